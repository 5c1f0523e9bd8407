"""The Apache Beam engine writes the local tool's records byte for byte.

Skipped only when Apache Beam is not installed (`pip install 'rembert_tf[beam]'`).
"""
import gzip
import json
import os

import pytest

import data_testlib
from rembert_tf.common import errors
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer

beam = pytest.importorskip("apache_beam")

SEQ = 32
PRED = 5


def _make(inputs, out, **kwargs):
  args = dict(seq_length=SEQ, max_predictions_per_seq=PRED,
              num_output_shards=3, verbose=False)
  args.update(kwargs)
  return pretraining_record_creation.create_pretraining_data(
      inputs, out, data_testlib.sentencepiece_model(), **args)


def _files(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


def test_beam_with_two_worker_processes_writes_the_local_bytes(tmp_path):
  inputs = data_testlib.tiny_corpus(tmp_path / "corpus")
  local = _make(inputs, tmp_path / "local", num_workers=1)
  beam_meta = _make(inputs, tmp_path / "beam", runner="DirectRunner",
                    num_workers=2)
  assert beam_meta == local
  assert local["num_examples"] > 50 and set(local["languages"]) == {"el", "zh"}
  assert _files(tmp_path / "beam") == _files(tmp_path / "local")
  assert len(_files(tmp_path / "local")) == 4  # 3 shards + metadata.json


def test_beam_unmasked_gzipped_json_language_field_on_ram(tmp_path):
  """C4-style input (text + a language field, gzipped), output on ram://."""
  lines = [json.dumps({"text": f"the cat sees the dog {i}.\nthe dog runs home.",
                       "language": "en", "url": "u"}) for i in range(120)]
  lines += [json.dumps({"text": f"ο σκύλος {i} τρέχει στο σπίτι.",
                        "language": "el"}) for i in range(60)]
  lines += ["{not json", json.dumps({"text": "no language field"})]
  path = tmp_path / "c4" / "c4-mixed.json.gz"
  path.parent.mkdir()
  path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8")))
  options = dict(unmasked=True, language_field="language", num_output_shards=2)
  local = _make([str(path)], tmp_path / "local", **options)
  out = "ram://beam_test/records"
  beam_meta = _make([str(path)], out, runner="DirectRunner", num_workers=2,
                    beam_args=["--direct_running_mode=multi_threading"],
                    **options)
  assert beam_meta == local
  assert local["layout"] == pretraining_record_format.LAYOUT_UNMASKED
  assert local["languages"]["el"]["documents"] == 60
  assert local["inputs"][0]["skipped_json_lines"] == 2
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  for name, data in _files(tmp_path / "local").items():
    assert fileio.read_bytes(f"{out}/{name}") == data, name
  assert not [n for n in fileio.listdir(out) if n.startswith(".")]


def test_beam_empty_input_is_one_clear_error(tmp_path):
  (tmp_path / "c" / "en").mkdir(parents=True)
  (tmp_path / "c" / "en" / "a.txt").write_text("\n\n \n")
  with pytest.raises(text_inputs.TextInputError, match="no text"):
    _make([str(tmp_path / "c" / "{lang}" / "*.txt")], tmp_path / "out",
          runner="DirectRunner")
  assert not (tmp_path / "out").exists()


def test_beam_worker_failure_is_one_error_and_keeps_old_records(tmp_path,
                                                                monkeypatch):
  inputs = data_testlib.tiny_corpus(tmp_path / "corpus")
  out = tmp_path / "out"
  _make(inputs, out, num_output_shards=1, languages=["el"])
  before = _files(out)

  def broken(*unused_args, **unused_kwargs):
    raise OSError(28, "No space left on device", "shard")
  monkeypatch.setattr(tfrecord_writer, "write_framed_file",
                      broken)
  with pytest.raises(errors.RemBertError,
                     match=f"{out}: writing it failed: no space left on the "
                     "device") as raised:
    _make(inputs, out, runner="DirectRunner", overwrite=True)
  assert "\n" not in str(raised.value)
  assert _files(out) == before  # Old records intact, staging removed.

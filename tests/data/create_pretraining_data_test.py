"""Record creation: round trip, determinism across workers, bad input, atomicity."""
import errno
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import data_testlib
import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import text_inputs
from rembert_tf.data import tfrecord_writer
from rembert_tf.data import tokenizer

SEQ = 32
PRED = 6


def _make(inputs, out, **kwargs):
  args = dict(seq_length=SEQ, max_predictions_per_seq=PRED,
              num_output_shards=3, verbose=False)
  args.update(kwargs)
  return pretraining_record_creation.create_pretraining_data(
      inputs, out, data_testlib.sentencepiece_model(), **args)


def _corpus_spec():
  return [str(data_testlib.corpus_dir() / "{lang}" / "*.txt")]


def _read(directory, layout=pretraining_record_format.LAYOUT_STATIC):
  features = {name: tf.io.FixedLenFeature([SEQ], tf.int64) for name in
              ("input_word_ids", "input_mask", "input_type_ids")}
  if layout == pretraining_record_format.LAYOUT_STATIC:
    features.update(
        masked_lm_positions=tf.io.FixedLenFeature([PRED], tf.int64),
        masked_lm_ids=tf.io.FixedLenFeature([PRED], tf.int64),
        masked_lm_weights=tf.io.FixedLenFeature([PRED], tf.float32))
  files = sorted(str(p) for p in directory.glob("*.tfrecord"))
  dataset = tf.data.TFRecordDataset(files).batch(100000).map(
      lambda s: tf.io.parse_example(s, features))
  return {k: v.numpy() for k, v in next(iter(dataset)).items()}


@pytest.fixture(scope="module")
def static_records(tmp_path_factory):
  out = tmp_path_factory.mktemp("static")
  meta = _make(_corpus_spec(), out, num_workers=1)
  return out, meta


def test_round_trip_static_records(static_records):
  out, meta = static_records
  data = _read(out)
  n = meta["num_examples"]
  assert n == len(data["input_word_ids"]) > 100
  assert sum(s["num_examples"] for s in meta["shards"]) == n
  ids, mask = data["input_word_ids"], data["input_mask"]
  lengths = mask.sum(1)
  assert (ids[:, 0] == tokenizer.CLS_ID).all()
  assert (ids[np.arange(n), lengths - 1] == tokenizer.SEP_ID).all()
  assert ((ids == tokenizer.PAD_ID) == (mask == 0)).all()
  assert (data["input_type_ids"] == 0).all()
  weights = data["masked_lm_weights"]
  positions = data["masked_lm_positions"]
  assert (weights.sum(1) >= 1).all() and (weights.sum(1) <= PRED).all()
  real = weights > 0
  assert (positions[real] > 0).all() and (positions[real] < lengths[:, None].repeat(PRED, 1)[real]).all()
  labels = data["masked_lm_ids"][real]
  assert not np.isin(labels, [tokenizer.PAD_ID, tokenizer.CLS_ID,
                              tokenizer.SEP_ID, tokenizer.MASK_ID]).any()
  at_positions = np.take_along_axis(ids, positions, 1)[real]
  # 80/10/10: most predicted positions hold [MASK], some the original token.
  mask_share = (at_positions == tokenizer.MASK_ID).mean()
  kept_share = (at_positions == labels).mean()
  assert 0.7 < mask_share < 0.9 and 0.04 < kept_share < 0.2
  # ~15% of tokens predicted.
  share = real.sum() / (lengths - 2).sum()
  assert 0.12 < share < 0.2


def test_metadata_fields(static_records):
  out, meta = static_records
  on_disk = json.loads((out / "metadata.json").read_text())
  assert on_disk == meta
  assert meta["vocab_size"] == data_testlib.SENTENCEPIECE_VOCAB_SIZE
  assert meta["seq_length"] == SEQ and meta["max_predictions_per_seq"] == PRED
  assert meta["special_ids"] == tokenizer.special_ids()
  assert meta["sentencepiece_sha256"] == fileio.sha256(
      data_testlib.sentencepiece_model())
  assert meta["masking"]["masked_lm_prob"] == 0.15
  langs = meta["languages"]
  assert set(langs) == {"en", "es", "ru", "el", "ar", "hi", "zh"}
  assert sum(l["sequences"] for l in langs.values()) == meta["num_examples"]
  per_shard = {}
  for shard in meta["shards"]:
    for lang, count in shard["num_examples_per_language"].items():
      per_shard[lang] = per_shard.get(lang, 0) + count
  assert per_shard == {l: v["sequences"] for l, v in langs.items()}
  # Smoothing upsamples the smallest language relative to the largest.
  assert langs["hi"]["passes_per_document"] > langs["en"]["passes_per_document"] == 1.0
  assert langs["hi"]["sampling_probability"] > langs["hi"]["natural_probability"]


def test_output_identical_whatever_the_worker_count(static_records, tmp_path):
  out, _ = static_records
  _make(_corpus_spec(), tmp_path, num_workers=2)
  names = sorted(p.name for p in out.iterdir())
  assert names == sorted(p.name for p in tmp_path.iterdir())
  for name in names:
    assert (out / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_unmasked_layout_round_trip(tmp_path):
  meta = _make([str(data_testlib.corpus_dir() / "{lang}" / "*.txt")], tmp_path,
               unmasked=True, languages=["el"])
  assert meta["layout"] == pretraining_record_format.LAYOUT_UNMASKED
  data = _read(tmp_path, pretraining_record_format.LAYOUT_UNMASKED)
  assert tokenizer.MASK_ID not in data["input_word_ids"]
  assert len(data["input_word_ids"]) == meta["num_examples"]


def test_refuses_output_with_records_unless_overwrite(static_records, tmp_path):
  out, _ = static_records
  target = tmp_path / "records"
  target.mkdir()
  (target / "metadata.json").write_text("{}")
  with pytest.raises(FileExistsError, match="--overwrite"):
    _make(_corpus_spec(), target, languages=["el"])
  meta = _make(_corpus_spec(), target, languages=["el"], overwrite=True,
               num_output_shards=2)
  assert sorted(p.name for p in target.iterdir()) == [
      "metadata.json", "pretrain-00000-of-00002.tfrecord",
      "pretrain-00001-of-00002.tfrecord"]
  assert meta["num_examples"] > 0


def test_missing_and_empty_input(tmp_path):
  with pytest.raises(text_inputs.TextInputError, match="matches no files"):
    _make([str(tmp_path / "none" / "{lang}" / "*.txt")], tmp_path / "o1")
  (tmp_path / "c" / "en").mkdir(parents=True)
  (tmp_path / "c" / "en" / "a.txt").write_text("")
  with pytest.raises(text_inputs.TextInputError, match="empty"):
    _make([str(tmp_path / "c" / "{lang}" / "*.txt")], tmp_path / "o2")
  (tmp_path / "c" / "en" / "a.txt").write_text("\n\n  \n\n")
  with pytest.raises(text_inputs.TextInputError, match="no text"):
    _make([str(tmp_path / "c" / "{lang}" / "*.txt")], tmp_path / "o3")
  assert not (tmp_path / "o3" / "metadata.json").exists()


def test_language_without_text_is_skipped_and_reported(tmp_path):
  corpus = tmp_path / "c"
  (corpus / "en").mkdir(parents=True)
  (corpus / "xx").mkdir()
  (corpus / "en" / "a.txt").write_text("The cat sees a dog.\nThe dog runs.\n")
  (corpus / "xx" / "a.txt").write_text("")
  meta = _make([str(corpus / "{lang}" / "*.txt")], tmp_path / "out")
  assert meta["languages_without_text"] == ["xx"]
  assert meta["languages"]["xx"]["sequences"] == 0
  assert meta["languages"]["en"]["sequences"] >= 1


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
  corpus = tmp_path / "c" / "en"
  corpus.mkdir(parents=True)
  (corpus / "a.txt").write_bytes(b"The cat \xff sees a dog.\n\xc3\x28 The dog runs.\n")
  meta = _make([str(tmp_path / "c" / "{lang}" / "*.txt")], tmp_path / "out")
  assert meta["languages"]["en"]["invalid_utf8_replacements"] == 2
  assert meta["num_examples"] >= 1


def test_long_document_is_split_not_dropped(tmp_path):
  corpus = tmp_path / "c" / "en"
  corpus.mkdir(parents=True)
  line = " ".join(["the old farmer reads a long letter"] * 30)  # >> SEQ tokens
  (corpus / "a.txt").write_text("\n".join([line] * 20) + "\n")
  meta = _make([str(tmp_path / "c" / "{lang}" / "*.txt")], tmp_path / "out",
               unmasked=True, short_seq_prob=0.0)
  data = _read(tmp_path / "out", pretraining_record_format.LAYOUT_UNMASKED)
  content_tokens = int((data["input_mask"].sum(1) - 2).sum())
  assert meta["languages"]["en"]["documents"] == 1
  assert content_tokens == meta["languages"]["en"]["tokens"]
  assert meta["num_examples"] >= meta["languages"]["en"]["tokens"] // (SEQ - 2)


def test_pack_document_keeps_every_token():
  rng = np.random.default_rng(0)
  lines = [np.arange(n) + 100 for n in (5, 70, 3, 29, 1, 200)]
  sequences = pretraining_instances.pack_document(lines, 30, 0.3, rng)
  assert all(1 <= len(s) <= 30 for s in sequences)
  np.testing.assert_array_equal(np.concatenate(sequences), np.concatenate(lines))


def _kill_second_shard(monkeypatch):
  calls = {"n": 0}
  original = tfrecord_writer.write_framed_file

  def dying_writer(path, framed):
    calls["n"] += 1
    if calls["n"] == 2:
      def partial():
        yield next(iter(framed))
        raise KeyboardInterrupt("killed")
      return original(path, partial())
    return original(path, framed)
  monkeypatch.setattr(tfrecord_writer, "write_framed_file", dying_writer)


def test_run_killed_midway_leaves_nothing(tmp_path, monkeypatch):
  _kill_second_shard(monkeypatch)
  out = tmp_path / "out"
  with pytest.raises(KeyboardInterrupt):
    _make(_corpus_spec(), out, languages=["el"])
  # The run created the directory and leaves neither it nor temporaries.
  assert not out.exists() and os.listdir(tmp_path) == []


def test_failed_overwrite_keeps_old_records_and_stale_staging_is_removed(
    tmp_path, monkeypatch):
  out = tmp_path / "out"
  _make(_corpus_spec(), out, languages=["el"], num_output_shards=2)
  before = {p.name: p.read_bytes() for p in out.iterdir()}
  stale = out / ".create_pretraining_data.tmp-999-dead"
  (stale / "spill").mkdir(parents=True)
  (stale / "spill" / "unit-000000.shard-00000").write_bytes(b"x" * 100)
  with monkeypatch.context() as patch:
    _kill_second_shard(patch)
    with pytest.raises(KeyboardInterrupt):
      _make(_corpus_spec(), out, languages=["zh"], overwrite=True)
  # The failed --overwrite run removed the stale staging directory and its
  # own, and the old records are byte-identical.
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before
  meta = _make(_corpus_spec(), out, languages=["zh"], overwrite=True)
  assert sorted(p.name for p in out.iterdir()) == [
      "metadata.json"] + [f"pretrain-0000{i}-of-00003.tfrecord" for i in range(3)]
  assert list(meta["languages"]) == ["zh"]


def test_a_full_disk_is_one_line_naming_the_output_and_keeps_old_records(
    tmp_path, monkeypatch):
  out = tmp_path / "out"
  _make(_corpus_spec(), out, languages=["el"], num_output_shards=2)
  before = {p.name: p.read_bytes() for p in out.iterdir()}

  def disk_full(path, framed):
    del framed
    with open(path, "wb") as f:
      f.write(b"half a shard")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
  monkeypatch.setattr(tfrecord_writer, "write_framed_file", disk_full)
  for target, overwrite in ((out, True), (tmp_path / "new", False)):
    with pytest.raises(errors.InputError) as raised:
      _make(_corpus_spec(), target, languages=["zh"], overwrite=overwrite)
    assert errors.one_line(raised.value) == (
        f"{target}: writing it failed: no space left on the device. Nothing "
        "was written (its temporary files are removed; an existing output is "
        f"kept). Free space where {target} goes, or choose an output on "
        "another disk, then run again.")
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before
  assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("flags, message", [
    (dict(seq_length=100000), "--seq_length must be in [3, 8192]"),
    (dict(seq_length=2), "--seq_length must be in [3, 8192]"),
    (dict(max_predictions_per_seq=SEQ - 1), "--max_predictions_per_seq must be in [1, 30]"),
    (dict(masking=pretraining_record_format.Masking(masked_lm_prob=0)), "--masked_lm_prob"),
    (dict(masking=pretraining_record_format.Masking(mask_token_rate=0.8,
                                                    random_token_rate=0.3)),
     "--mask_token_rate + --random_token_rate"),
    (dict(dupe_factor=0), "--dupe_factor"),
    (dict(num_workers=0), "--num_workers"),
])
def test_flags_out_of_range_name_the_flag(tmp_path, flags, message):
  with pytest.raises(errors.UsageError) as raised:
    _make(_corpus_spec(), tmp_path / "out", **flags)
  assert message in str(raised.value)
  assert not (tmp_path / "out").exists()


def test_released_layout_model_puts_its_own_special_ids(tmp_path):
  model = testlib.released_layout_sentencepiece()
  meta = pretraining_record_creation.create_pretraining_data(
      _corpus_spec(), tmp_path, model, seq_length=SEQ,
      max_predictions_per_seq=PRED, num_output_shards=1, languages=["el"],
      verbose=False)
  special = tokenizer.SpecialTokens.from_model(model)
  assert meta["special_ids"] == special.as_dict()
  assert special.cls_id == 312 and special.mask_id == 314
  data = _read(tmp_path)
  ids, mask = data["input_word_ids"], data["input_mask"]
  lengths = mask.sum(1)
  assert (ids[:, 0] == 312).all()
  assert (ids[np.arange(len(ids)), lengths - 1] == 313).all()
  assert (ids == 314).sum() > 0
  real = data["masked_lm_weights"] > 0
  assert not np.isin(data["masked_lm_ids"][real], [0, 312, 313, 314]).any()


def test_random_replacements_avoid_every_special_id():
  special = tokenizer.SpecialTokens(pad_id=0, unk_id=1, cls_id=5, sep_id=6,
                                    mask_id=9, vocab_size=12)
  draws = pretraining_record_format.random_non_special_ids(
      np.random.default_rng(0), 6000, special)
  assert sorted(set(draws.tolist())) == [2, 3, 4, 7, 8, 10, 11]


def test_output_on_another_filesystem(tmp_path):
  out = "ram://records_test/out"
  meta = _make(_corpus_spec(), out, languages=["el", "zh"], num_workers=2)
  local = _make(_corpus_spec(), tmp_path, languages=["el", "zh"])
  assert meta == local
  for shard in meta["shards"]:
    assert tf.io.gfile.GFile(f"{out}/{shard['file']}", "rb").read() == (
        tmp_path / shard["file"]).read_bytes()
  assert pretraining_record_format.read_metadata(out) == meta
  assert not [n for n in tf.io.gfile.listdir(out) if n.startswith(".")]


def test_gzipped_c4_json_lines_with_language_field(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  lines = ([json.dumps({"text": f"the cat sees the dog {i}.\nthe dog runs.",
                        "lang": "en", "url": "u"}) for i in range(30)] +
           [json.dumps({"text": f"ο σκύλος {i} τρέχει.", "lang": "el"})
            for i in range(10)] + ["{broken", json.dumps({"text": "no lang"})])
  path = tmp_path / "c4" / "mixed.json.gz"
  path.parent.mkdir()
  path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
  meta = pretraining_record_creation.create_pretraining_data(
      [str(path)], tmp_path / "out", data_testlib.sentencepiece_model(),
      seq_length=SEQ, max_predictions_per_seq=PRED, num_output_shards=1,
      language_field="lang", verbose=False)
  assert meta["languages"]["en"]["documents"] == 30
  assert meta["languages"]["el"]["documents"] == 10
  assert meta["inputs"][0]["skipped_json_lines"] == 2
  assert meta["languages"]["el"]["passes_per_document"] > 1.0


def test_runner_without_apache_beam_is_a_usage_error(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "apache_beam", None)  # Not installed.
  with pytest.raises(errors.UsageError, match=r"rembert_tf\[beam\]"):
    _make(_corpus_spec(), tmp_path / "out", runner="DataflowRunner",
          languages=["el"])
  assert not (tmp_path / "out").exists()


def test_an_output_overlapping_an_input_is_refused_before_any_work(tmp_path):
  corpus = data_testlib.corpus_dir()
  before = sorted(p.name for p in corpus.rglob("*"))
  (tmp_path / "link").symlink_to(corpus)
  for out, part in ((tmp_path / "link", "holds --input"),
                    (tmp_path / "link" / "en" / "part-00000.txt", "is --input"),
                    (data_testlib.sentencepiece_model().parent,
                     "holds --sentencepiece_model")):
    with pytest.raises(errors.UsageError,
                       match=f"--output_dir {out} {part} .* writing it would "
                       "replace or delete that input"):
      _make(_corpus_spec(), out, overwrite=True)
  assert sorted(p.name for p in corpus.rglob("*")) == before

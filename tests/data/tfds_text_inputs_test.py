"""Pre-training text from TFDS (`tfds:` inputs): languages, shards, documents,
the same records locally and on Beam, the commands under mocked TFDS, and
bad input in one line."""
import os
import pathlib

import pytest

import data_testlib
import tfds_corpora
import tfds_testlib
from rembert_tf.data import tfds_reader
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import text_inputs
from rembert_tf.data import tfds_text_inputs

HERE = pathlib.Path(__file__).resolve().parent
RECORDS = dict(seq_length=32, max_predictions_per_seq=5, num_output_shards=2,
               verbose=False)


@pytest.fixture()
def tfds_dir(tmp_path):
  """The corpora of `tfds_corpora`, prepared-looking in tmp_path/tfds."""
  examples, shards = tfds_corpora.examples_and_shards()
  with tfds_testlib.mocked_tfds(tmp_path / "tfds", examples, shards):
    yield tmp_path / "tfds"


def _resolve(specs, tfds_dir, languages=None, **options):
  return tfds_text_inputs.resolve_inputs(
      specs, languages=languages, tfds=tfds_text_inputs.TfdsTextOptions(
          str(tfds_dir), **options))


def test_lang_in_config_split_or_explicit_gives_one_unit_per_shard(tfds_dir):
  units = _resolve(["tfds:wiki40b/{lang}", "tfds:c4/multilingual:{lang}",
                    "sw=tfds:wikipedia/20230601.sw"], tfds_dir)
  assert [(u.language, u.path) for u in units] == [
      ("de", "tfds:wiki40b/de:train[0shard]"),
      ("el", "tfds:c4/multilingual:el[0shard]"),
      ("en", "tfds:wiki40b/en:train[0shard]"),
      ("en", "tfds:wiki40b/en:train[1shard]"),
      ("sw", "tfds:c4/multilingual:sw[0shard]"),
      ("sw", "tfds:wikipedia/20230601.sw:train[0shard]")]
  # The split's bytes spread over its shards by example count.
  en = [u for u in units if u.language == "en"]
  assert en[0].size() == en[1].size() > 0
  assert [u.language_bytes() for u in en] == [
      {"en": u.size()} for u in en]
  only = _resolve(["tfds:wiki40b/{lang}"], tfds_dir, languages=["de"])
  assert [u.language for u in only] == ["de"]


def test_documents_are_the_text_feature_with_wiki40b_markup_undone(tfds_dir):
  units = _resolve(["tfds:wiki40b/{lang}"], tfds_dir, languages=["en"])
  stats = text_inputs.ReadStats()
  documents = [d for u in units
               for _, d in u.language_documents(stats)]
  assert len(documents) == stats.documents == 40
  first = tfds_corpora.sentences("en", 0, 4)
  assert documents[0] == ["Title 0", "Section", first[0], first[1],
                          f"{first[2]} {first[3]}"]
  # Shard 1 holds the second half, in order.
  assert documents[20][0] == "Title 20"
  mc4 = _resolve(["tfds:c4/multilingual:{lang}"], tfds_dir, languages=["el"])
  assert [d for _, d in mc4[0].language_documents(
      text_inputs.ReadStats())][1] == \
      tfds_corpora.sentences("el", 1, 3)


@pytest.mark.parametrize("spec, options, message", [
    ("tfds:wiki41b/{lang}", {}, "TFDS has no dataset 'wiki41b' (did you mean "
     "wiki40b"),
    ("xx=tfds:wiki40b/xx", {}, "TFDS dataset 'wiki40b' has no config 'xx'"),
    ("fr=tfds:wiki40b/fr", {}, "TFDS dataset wiki40b/fr is not prepared in "
     "{tfds}: no {tfds}/wiki40b/fr/1.3.0/dataset_info.json; prepare it with "
     "`tfds build wiki40b --config fr --data_dir {tfds}`"),
    ("tfds:wiki40b/{lang}:validation", {}, "TFDS dataset wiki40b/de in {tfds} "
     "has no split 'validation' (its splits: train)"),
    ("tfds:wiki40b/{lang}", {"text_feature": "body"}, "TFDS dataset wiki40b/de"
     " has no feature 'body' (its features: text, version_id, wikidata_id); "
     "name the text feature with --tfds_text_feature"),
    ("tfds:wiki40b/en", {}, "does not say its language"),
    ("tfds:wikipedia/19990101.{lang}", {},
     "no config of wikipedia matches '19990101.{{lang}}' (its configs include "
     "20230601.en"),
])
def test_bad_tfds_input_names_builder_config_split_or_feature(
    tfds_dir, spec, options, message):
  with pytest.raises(tfds_reader.TfdsError) as e:
    _resolve([spec], tfds_dir, **options)
  assert message.format(tfds=tfds_dir) in str(e.value)
  assert "\n" not in str(e.value)


def test_tfds_input_without_a_data_dir_reads_tfds_default(tfds_dir,
                                                          monkeypatch):
  """As tfds.load: TFDS_DATA_DIR, else ~/tensorflow_datasets."""
  monkeypatch.setenv("TFDS_DATA_DIR", str(tfds_dir))
  units = tfds_text_inputs.resolve_inputs(["tfds:wiki40b/{lang}"])
  assert [(u.language, u.path, u.data_dir) for u in units] == [
      (u.language, u.path, str(tfds_dir))
      for u in _resolve(["tfds:wiki40b/{lang}"], tfds_dir)]
  assert len(units) == 3
  monkeypatch.delenv("TFDS_DATA_DIR")
  monkeypatch.setenv("HOME", str(tfds_dir.parent / "home"))
  assert tfds_reader.data_dir_or_default(None) == str(
      tfds_dir.parent / "home" / "tensorflow_datasets")
  assert tfds_reader.data_dir_or_default("gs://b/tfds") == "gs://b/tfds"


def test_local_workers_and_beam_write_the_same_records_from_tfds(tmp_path):
  """Datasets prepared on disk (no mock, so that worker processes read them
  too): two local worker processes and Beam write the same bytes."""
  pytest.importorskip("apache_beam")
  examples, shards = tfds_corpora.examples_and_shards()
  tfds_testlib.prepare_tfds(tmp_path / "tfds", examples, shards)
  tfds = tfds_text_inputs.TfdsTextOptions(str(tmp_path / "tfds"))
  make = lambda out, **kw: pretraining_record_creation.create_pretraining_data(  # noqa: E731
      ["tfds:wiki40b/{lang}", "tfds:c4/multilingual:{lang}",
       "sw=tfds:wikipedia/20230601.sw"], out,
      data_testlib.sentencepiece_model(), tfds=tfds, **RECORDS, **kw)
  local = make(tmp_path / "local", num_workers=2)
  beam = make(tmp_path / "beam", runner="DirectRunner", num_workers=1,
              beam_args=["--direct_running_mode=in_memory"])
  assert beam == local
  assert set(local["languages"]) == {"de", "el", "en", "sw"}
  assert local["languages"]["en"]["documents"] == 40
  assert local["languages"]["sw"]["documents"] == 16
  assert {i["format"] for i in local["inputs"]} == {"tfds"}
  files = lambda d: {n: (d / n).read_bytes() for n in sorted(os.listdir(d))}  # noqa: E731
  assert files(tmp_path / "beam") == files(tmp_path / "local")


# --- The commands, in one process each under mocked TFDS ------------------------


def _assert_one_line(result, prog, expected):
  lines = result["stderr"].strip().splitlines()
  assert result["code"] == 1, result
  assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), lines
  assert expected in lines[0], (expected, lines[0])


def test_create_pretraining_data_command_reads_tfds(tmp_path):
  tfds_dir, out = tmp_path / "tfds", tmp_path / "records"
  common = [f"--sentencepiece_model={data_testlib.sentencepiece_model()}",
            f"--tfds_data_dir={tfds_dir}", "--seq_length=32",
            "--max_predictions_per_seq=5", "--num_output_shards=2",
            "--num_workers=1"]
  cases = [["--input=tfds:wiki40b/{lang}", "--languages=en,de",
            f"--output_dir={out}"] + common,
           ["--input=tfds:wiki40b/{lang}", "--languages=fr",
            f"--output_dir={tmp_path / 'bad'}"] + common,
           ["--input=tfds:wikipedia/20230601.{lang}",
            "--tfds_text_feature=body", f"--output_dir={tmp_path / 'bad'}"]
           + common,
           # No --tfds_data_dir: TFDS's default, here TFDS_DATA_DIR.
           ["--input=tfds:wiki40b/{lang}", "--languages=en,de",
            f"--output_dir={tmp_path / 'from_default'}"]
           + [a for a in common if not a.startswith("--tfds_data_dir")]]
  results = tfds_testlib.run_command_cases(
      "rembert_tf.cli.create_pretraining_data",
      "tfds_corpora:examples_and_shards", tfds_dir, cases, paths=[HERE])
  assert results[0]["code"] == 0, results[0]
  meta = (out / "metadata.json").read_text()
  assert '"tfds:wiki40b/en:train[1shard]"' in meta
  prog = "rembert-create-pretraining-data"
  _assert_one_line(results[1], prog, "wiki40b/fr is not prepared in")
  _assert_one_line(results[2], prog, "has no feature 'body'")
  assert results[3]["code"] == 0, results[3]
  for name in ("pretrain-00000-of-00002.tfrecord",
               "pretrain-00001-of-00002.tfrecord"):
    assert ((tmp_path / "from_default" / name).read_bytes()
            == (out / name).read_bytes())
  assert not (tmp_path / "bad").exists()


def test_train_sentencepiece_command_reads_tfds(tmp_path):
  tfds_dir, out = tmp_path / "tfds", tmp_path / "spm"
  cases = [["--input=tfds:wiki40b/{lang},sw=tfds:wikipedia/20230601.sw",
            f"--tfds_data_dir={tfds_dir}", f"--output_dir={out}",
            "--vocab_size=60", "--sample_size=200"],
           ["--input=tfds:wiki40b/{lang}", "--languages=xx",
            f"--tfds_data_dir={tfds_dir}", f"--output_dir={tmp_path / 'bad'}"]]
  results = tfds_testlib.run_command_cases(
      "rembert_tf.cli.train_sentencepiece", "tfds_corpora:examples_and_shards",
      tfds_dir, cases, paths=[HERE])
  assert results[0]["code"] == 0, results[0]
  assert (out / "sentencepiece.model").stat().st_size > 0
  _assert_one_line(results[1], "rembert-train-sentencepiece",
                   "TFDS dataset wiki40b has no config for language(s) xx")
  assert not (tmp_path / "bad").exists()

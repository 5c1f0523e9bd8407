"""UD-POS: records from XTREME's layout (first-piece tags), and a tiny model end
to end from TFDS through `rembert-finetune` to predictions the scorer reads."""
import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

import tfds_testlib
import xtreme_fixtures
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.data import xtreme_records
from rembert_tf.data import finetuning_data

QUIET = lambda s: None  # noqa: E731


def _label_ids(path, seq_length):
  spec = xtreme_records.feature_spec("tagging", seq_length)
  return [tf.io.parse_single_example(r, spec)["label_ids"].numpy()
          for r in tf.data.TFRecordDataset(str(path))]


def test_udpos_entry_has_the_benchmark_languages_and_universal_tags():
  udpos = xtreme_tasks.get("udpos")
  assert udpos.task_type == "tagging"
  assert len(udpos.labels) == 17 and "PROPN" in udpos.labels
  assert "O" not in udpos.labels
  assert len(udpos.languages) == 33
  assert udpos.download.path("download", "dev", "tl") == \
      "download/udpos/dev-tl.tsv"


def test_udpos_records_tag_the_first_piece_of_each_word(sp_model, download_dir,
                                                       tmp_path):
  meta = finetuning_data.create_finetuning_data(
      "udpos", download_dir, sp_model, tmp_path, seq_length=8,
      progress=QUIET)
  assert {s: sorted(l) for s, l in meta["splits"].items()} == {
      "train": ["en"], "dev": ["ar", "de", "en"], "test": ["ar", "de", "en"]}
  dev = meta["splits"]["dev"]["en"]
  # 8-word sentences do not fit in 6 pieces: split, never cut.
  assert dev["num_features"] > dev["num_examples"] == 6
  side = xtreme_records.read_side_file(tmp_path / "udpos", "dev-en")
  rows = _label_ids(tmp_path / "udpos/dev-en.tfrecord", 8)
  labels = list(xtreme_tasks.UDPOS_LABELS)
  tags = []
  for row, side_row in zip(rows, side):
    assert np.where(row >= 0)[0].tolist() == side_row["positions"]
    tags += [labels[i] for i in row[row >= 0]]
  assert tags[:8] == ["DET", "NOUN", "VERB", "ADP", "DET", "ADJ", "NOUN",
                      "PUNCT"]
  assert (tmp_path / "udpos/labels/udpos/dev-ar.tsv").read_text() == \
      "PROPN\nNOUN\nPROPN\n\n"
  # XTREME's test files carry words only: no labels, nothing to learn.
  assert meta["splits"]["test"]["de"]["has_labels"] is False
  assert all((r < 0).all() for r in
             _label_ids(tmp_path / "udpos/test-de.tfrecord", 8))


def test_udpos_tag_outside_the_universal_set_names_file_and_line(
    sp_model, download_dir, tmp_path):
  data = tmp_path / "download"
  shutil.copytree(download_dir / "udpos", data / "udpos")
  (data / "udpos/dev-de.tsv").write_text("Anna\tPROPN\nwohnt\tB-PER\n",
                                         encoding="utf-8")
  with pytest.raises(finetuning_data.TaskDataError,
                     match=r"udpos/dev-de.tsv:2: tag 'B-PER' is not a udpos "
                     r"tag \(ADJ, ADP"):
    finetuning_data.create_finetuning_data(
        "udpos", data, sp_model, tmp_path / "out", progress=QUIET)
  assert not (tmp_path / "out/udpos").exists()


def _finetune_in_process(argv):
  """rembert-finetune's main in this process, after parsing its flags."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from rembert_tf.cli import finetune  # pylint: disable=g-import-not-at-top
  flags.FLAGS.unparse_flags()
  try:
    flags.FLAGS(["rembert-finetune"] + argv)
    return finetune.main([])
  finally:
    flags.FLAGS.unparse_flags()


def test_udpos_from_tfds_finetune_predict_and_score(checkpoint_dir, tmp_path):
  """TFDS (mocked) -> records -> fine-tune a tiny model -> one tag per word
  in the benchmark layout -> the scorer gives the run's F1."""
  tfds_dir, out = tmp_path / "tfds", tmp_path / "ft"
  examples = {k: v for k, v in xtreme_fixtures.tfds_examples().items()
              if k[0] == "xtreme_pos"}
  with tfds_testlib.mocked_tfds(tfds_dir, examples):
    _finetune_in_process([
        "--task=udpos", "--data_source=tfds", f"--tfds_data_dir={tfds_dir}",
        f"--init_checkpoint={checkpoint_dir}", f"--output_dir={out}",
        "--seq_length=16", "--num_train_steps=3", "--train_batch_size=2",
        "--eval_batch_size=2", "--learning_rate=1e-3", "--nojit_compile"])
  results = json.loads((out / "results.json").read_text())
  assert results["score_split"] == "dev"
  assert set(results["scores"]["f1"]) == {"en", "ta"}
  meta = json.loads((out / "records/udpos/metadata.json").read_text())
  assert meta["data_source"] == "tfds" and meta["data_dir"] == str(tfds_dir)
  run_dir = pathlib.Path(results["runs"][0]["run_dir"])
  predictions = run_dir / "predictions"
  for name, words in (("dev-en", [4, 3]), ("dev-ta", [2]), ("test-tl", [4])):
    sentences = [s.split("\n") for s in
                 (predictions / f"udpos/{name}.tsv").read_text()
                 .strip("\n").split("\n\n")]
    assert [len(s) for s in sentences] == words
    assert all(t in xtreme_tasks.UDPOS_LABELS for s in sentences for t in s)
  # TFDS's test split is labelled: scored as well.
  rescored = xtreme_scorer.score_task("udpos", predictions,
                                      out / "records/udpos/labels", split="dev")
  assert rescored["f1"] == results["scores"]["f1"]
  test = xtreme_scorer.score_task("udpos", predictions,
                                  out / "records/udpos/labels", split="test")
  assert 0 <= test["f1"]["tl"] <= 100

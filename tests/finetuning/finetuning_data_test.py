"""create_finetuning_data on fixtures in the real XTREME layouts."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import tokenizer
from rembert_tf.data import xtreme_records
from rembert_tf.common import output_lock
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.data import finetuning_data

def _records(path, task_type, seq_length):
  spec = xtreme_records.feature_spec(task_type, seq_length)
  return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
          for r in tf.data.TFRecordDataset(str(path))]


def test_classification_records(sp_model, download_dir, tmp_path):
  meta = finetuning_data.create_finetuning_data(
      "xnli", download_dir, sp_model, tmp_path, seq_length=24,
      progress=lambda s: None)
  assert set(meta["splits"]["dev"]) == {"en", "de", "ar"}
  assert meta["splits"]["test"]["ar"]["has_labels"] is False
  rows = _records(tmp_path / "xnli/dev-ar.tfrecord", "classification", 24)
  assert len(rows) == 3
  assert [int(r["label_id"][0]) for r in rows] == [1, 0, 2]  # ent, contra, neutral
  first = rows[0]
  assert first["input_word_ids"][0] == 2 and first["input_word_ids"].shape == (24,)
  n = int(first["input_mask"].sum())
  seps = np.where(first["input_word_ids"][:n] == 3)[0]
  assert len(seps) == 2 and seps[-1] == n - 1
  assert first["input_type_ids"][seps[0] + 1:n].all()
  labels = (tmp_path / "xnli/labels/xnli/dev-de.tsv").read_text().split()
  assert labels == ["entailment", "contradiction"]


def test_panx_first_piece_labels_and_split(sp_model, download_dir, tmp_path):
  meta = finetuning_data.create_finetuning_data(
      "panx", download_dir, sp_model, tmp_path, seq_length=8,
      languages=["en", "ar"], progress=lambda s: None)
  info = meta["splits"]["dev"]["en"]
  # 6-word sentences do not fit in 6 pieces: split into several records.
  assert info["num_features"] > info["num_examples"] == 6
  side = xtreme_records.read_side_file(tmp_path / "panx", "dev-en")
  covered = {}
  for row in side:
    for k in range(len(row["positions"])):
      covered.setdefault(row["sentence"], []).append(row["word_start"] + k)
  assert all(covered[s] == list(range(n)) for s, n in
             enumerate(info["num_words"]))
  rows = _records(tmp_path / "panx/dev-en.tfrecord", "tagging", 8)
  for row, side_row in zip(rows, side):
    labelled = np.where(row["label_ids"] >= 0)[0].tolist()
    assert labelled == side_row["positions"]   # only first pieces labelled
  # First sentence: Ann(B-PER=1) Lee(I-PER=2) ...
  first_labels = rows[0]["label_ids"][rows[0]["label_ids"] >= 0].tolist()
  assert first_labels[:2] == [1, 2]
  gold = (tmp_path / "panx/labels/panx/dev-ar.tsv").read_text()
  assert gold == "B-LOC\nO\nB-LOC\n\n"
  assert "test" in meta["splits"]
  assert not (tmp_path / "panx/labels/panx/test-ar.tsv").exists()


def test_qa_windows_answers_and_cls_target(sp_model, download_dir, tmp_path):
  meta = finetuning_data.create_finetuning_data(
      "mlqa", download_dir, sp_model, tmp_path, seq_length=24, doc_stride=4,
      max_query_length=8, progress=lambda s: None)
  sp = tokenizer.SentencePieceTokenizer(sp_model).sp
  train = _records(tmp_path / "mlqa/train-en.tfrecord", "span", 24)
  assert meta["splits"]["train"]["en"]["num_features"] == len(train) > 8
  starts = [int(r["start_position"][0]) for r in train]
  assert 0 in starts  # windows without the answer kept with the [CLS] target
  answers = set()
  for r in train:
    s, e = int(r["start_position"][0]), int(r["end_position"][0])
    if s:
      answers.add(sp.decode(r["input_word_ids"][s:e + 1].tolist()).strip())
  assert answers == {"Paris", "Rome", "the red mat"}
  # Chinese and Arabic eval windows: character offsets map back to the answer.
  for lang, answer in (("zh", "北京"), ("ar", "باريس")):
    side = xtreme_records.read_side_file(tmp_path / "mlqa", f"dev-{lang}")
    context = xtreme_records.read_side_file(
        tmp_path / "mlqa", f"dev-{lang}", "examples")[0]["context"]
    spans = [(a, b) for row in side for a, b in
             zip(row["tok_start_to_orig_index"], row["tok_end_to_orig_index"])]
    texts = {context[a:b + 1] for a, b in spans}
    assert any(t.strip() and answer.startswith(t.strip()) for t in texts)
    assert json.loads((tmp_path / f"mlqa/labels/mlqa/dev-{lang}.json")
                      .read_text())["data"]


def test_missing_file_names_file_and_layout(sp_model, download_dir, tmp_path):
  with pytest.raises(finetuning_data.TaskDataError) as e:
    finetuning_data.create_finetuning_data(
        "pawsx", download_dir, sp_model, tmp_path, languages=["en", "ko"],
        progress=lambda s: None)
  assert "pawsx/dev-ko.tsv" in str(e.value)
  assert "train: pawsx/train-en.tsv" in str(e.value)
  assert str(e.value).endswith(
      "No split has a file for ko: leave it out of --languages.")
  assert not (tmp_path / "pawsx").exists()  # nothing half-written
  with pytest.raises(finetuning_data.TaskDataError,
                     match="tydiqa.goldp.en.train.json"):
    finetuning_data.create_finetuning_data(
        "tydiqa", tmp_path / "empty", sp_model, tmp_path / "out",
        progress=lambda s: None)


def test_a_language_without_a_test_file_is_told_to_pass_splits(
    sp_model, download_dir, tmp_path):
  """A download/ with dev files alone (as the demo's) and --languages."""
  download = tmp_path / "download"
  shutil.copytree(download_dir / "xnli", download / "xnli")
  for test_file in download.glob("xnli/test-*.tsv"):
    test_file.unlink()
  with pytest.raises(finetuning_data.TaskDataError) as e:
    finetuning_data.create_finetuning_data(
        "xnli", download, sp_model, tmp_path, languages=["en", "ar"],
        progress=lambda s: None)
  assert "Missing xnli file" in str(e.value)
  assert "xnli/test-en.tsv" in str(e.value)
  assert str(e.value).endswith(
      "To predict only en's dev, pass --splits dev.")
  meta = finetuning_data.create_finetuning_data(
      "xnli", download, sp_model, tmp_path, languages=["en", "ar"],
      splits=["dev"], progress=lambda s: None)
  assert set(meta["splits"]) == {"train", "dev"}
  assert set(meta["splits"]["dev"]) == {"en", "ar"}


@pytest.mark.parametrize("flag, value", [("seq_length", 2),
                                         ("doc_stride", 0)])
def test_unusable_lengths_are_one_line_errors(sp_model, download_dir, tmp_path,
                                              flag, value):
  with pytest.raises(errors.RemBertError) as e:
    finetuning_data.create_finetuning_data(
        "mlqa", download_dir, sp_model, tmp_path, progress=lambda s: None,
        **{flag: value})
  assert f"--{flag} {value}" in str(e.value)
  assert "\n" not in str(e.value)
  assert not (tmp_path / "mlqa").exists()


def test_special_ids_come_from_the_sentencepiece_model(download_dir, tmp_path):
  """A model laid out like the released RemBERT: [CLS]=312, [SEP]=313."""
  meta = finetuning_data.create_finetuning_data(
      "xnli", download_dir, testlib.released_layout_sentencepiece(), tmp_path,
      seq_length=24, splits=("dev",), progress=lambda s: None)
  assert meta["sp_model_sha256"] == fileio.sha256(
      testlib.released_layout_sentencepiece())
  row = _records(tmp_path / "xnli/dev-de.tfrecord", "classification", 24)[0]
  n = int(row["input_mask"].sum())
  assert row["input_word_ids"][0] == testlib.RELEASED_CLS_ID
  assert row["input_word_ids"][n - 1] == testlib.RELEASED_SEP_ID
  assert (row["input_word_ids"][n:] == 0).all()          # [PAD]


def test_squad_file_without_paragraphs_names_file_and_field(
    sp_model, download_dir, tmp_path):
  data = tmp_path / "download"
  shutil.copytree(download_dir / "squad", data / "squad")
  (data / "squad/train-v1.1.json").write_text(
      json.dumps({"data": [{"title": "t"}]}), encoding="utf-8")
  with pytest.raises(finetuning_data.TaskDataError,
                     match=r"train-v1.1.json: data\[0\] has no field 'paragraphs'"):
    finetuning_data.create_finetuning_data(
        "xquad", data, sp_model, tmp_path / "out", splits=(),
        progress=lambda s: None)


def test_bad_label_names_file_and_line(sp_model, download_dir, tmp_path):
  data = tmp_path / "download"
  shutil.copytree(download_dir / "xnli", data / "xnli")
  path = data / "xnli/dev-de.tsv"
  path.write_text(path.read_text() + "a\tb\tmaybe\n", encoding="utf-8")
  with pytest.raises(finetuning_data.TaskDataError,
                     match=r"xnli/dev-de.tsv:3: label 'maybe'"):
    finetuning_data.create_finetuning_data(
        "xnli", data, sp_model, tmp_path / "out", progress=lambda s: None)
  shutil.copytree(download_dir / "panx", data / "panx")
  path = data / "panx/dev-ar.tsv"
  path.write_text("باريس\tB-CITY\n", encoding="utf-8")
  with pytest.raises(finetuning_data.TaskDataError,
                     match=r"panx/dev-ar.tsv:1: tag 'B-CITY'"):
    finetuning_data.create_finetuning_data(
        "panx", data, sp_model, tmp_path / "out", progress=lambda s: None)


def test_every_xtreme_dataset_names_a_registered_task_type():
  for name in xtreme_tasks.FINETUNING_TASKS:
    dataset = xtreme_tasks.get(name)
    assert xtreme_records.record_type(dataset.task_type).name == dataset.task_type
  retrieval = set(xtreme_tasks.XTREME_TASKS) - set(
      xtreme_tasks.FINETUNING_TASKS)
  assert retrieval == {"bucc2018", "tatoeba"}
  with pytest.raises(errors.UsageError, match="choose one of xnli, pawsx"):
    xtreme_tasks.get("nope")
  with pytest.raises(errors.UsageError, match="tatoeba is a retrieval task"):
    xtreme_tasks.get_finetuning_task("tatoeba")


def test_a_task_another_run_writes_is_refused(sp_model, download_dir, tmp_path):
  with testlib.held_by_another_process(tmp_path / "xnli") as (pid, _):
    with pytest.raises(output_lock.OutputLockedError,
                       match=rf"xnli is being written by another run \(pid {pid} "):
      finetuning_data.create_finetuning_data(
          "xnli", download_dir, sp_model, tmp_path, seq_length=24,
          progress=lambda s: None)
  assert not (tmp_path / "xnli").exists()

"""Turns the XTREME `download/` layout into fine-tuning TFRecords.

The steps, each in its own module: where a task's files lie
(`xtreme_datasets`), reading them (`xtreme_readers`, through the task type),
examples -> records with their side rows (`example_records`), and what
differs per task type (`task_types`: reader, record builder, gold labels).
This module picks the files, writes them and the metadata.

Output, for `--output_dir O` and task T (written atomically):
```
O/T/metadata.json                   task, task_type, seq_length, labels, splits
O/T/train-en.tfrecord               English training records
O/T/<split>-<lang>.tfrecord         dev / test records of each language
O/T/<split>-<lang>.side.jsonl       raw ids to write predictions back (panx, QA)
O/T/labels/T/<split>-<lang>.tsv|json   gold labels in the benchmark layout
```
The record features are described in `example_records`.

Example:
```python
from rembert_tf.finetuning import finetuning_data
meta = finetuning_data.create_finetuning_data(
    task="xnli", data_dir="download", sp_model="spm/sentencepiece.model",
    output_dir="records", seq_length=128)
```
"""
import json
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.finetuning import example_records
from rembert_tf.finetuning import task_types
from rembert_tf.finetuning import xtreme_datasets
from rembert_tf.finetuning import xtreme_readers

METADATA_FILE = "metadata.json"
# [CLS] + at least a few pieces + [SEP] (+ [SEP]); below this no task fits.
MIN_SEQ_LENGTH = 8
TaskDataError = xtreme_datasets.TaskDataError


def _write_split(records: Iterable, directory: str, name: str,
                 write_side: bool) -> int:
  """`<name>.tfrecord` (and `<name>.side.jsonl`); returns the record count."""
  count = 0
  side_rows = []
  with tf.io.TFRecordWriter(fileio.join(directory, f"{name}.tfrecord")) as writer:
    for record, side in records:
      writer.write(record)
      if side is not None:
        side_rows.append(side)
      count += 1
      if count % 10000 == 0:
        logging.info("%s: %d records", name, count)
  if write_side:
    fileio.write_text(fileio.join(directory, f"{name}.side.jsonl"), "".join(
        json.dumps(row, ensure_ascii=False) + "\n" for row in side_rows))
  return count


def _check_options(kind, seq_length, doc_stride, max_query_length) -> int:
  """The sequence length to use; one-line errors for unusable lengths."""
  if seq_length is None:
    seq_length = kind.default_seq_length
  if seq_length < MIN_SEQ_LENGTH:
    raise TaskDataError(f"--seq_length {seq_length} is too short: [CLS], "
                        "[SEP] and the text need at least "
                        f"{MIN_SEQ_LENGTH} positions; use 128 (384 for QA).")
  for flag, value in (("--doc_stride", doc_stride),
                      ("--max_query_length", max_query_length)):
    if value < 1:
      raise TaskDataError(f"{flag} {value} must be at least 1.")
  return seq_length


def _split_jobs(dataset: xtreme_datasets.XtremeDataset, data_dir, languages,
                splits) -> List[Tuple[str, str, str]]:
  """(split, language, file) of every file to write, checked to exist."""
  layout = dataset.download
  jobs = [("train", "en", layout.path(data_dir, "train"))]
  for split in splits:
    if split not in layout.eval_files:
      continue
    split_languages = languages
    if split_languages is None:
      split_languages = dataset.discover_languages(data_dir, split)
    elif layout.eval_languages(split) == ["en"]:
      split_languages = [l for l in split_languages if l == "en"]
    for lang in split_languages:
      jobs.append((split, lang, layout.path(data_dir, split, lang)))
  for _, _, path in jobs:
    xtreme_readers.require_file(path, dataset)
  return jobs


def _write_one_split(kind, dataset, path, split, lang, tokenizer, seq_length,
                     options, out_dir) -> Dict:
  """Records, side files and gold labels of one file; its metadata entry."""
  name = f"{split}-{lang}"
  is_training = split == "train"
  data = kind.read(path, dataset, is_training)
  count = _write_split(
      kind.records(data, dataset, tokenizer, seq_length, options, is_training),
      out_dir, name, write_side=kind.writes_side_files and not is_training)
  if not is_training:
    if kind.write_examples_side is not None:
      kind.write_examples_side(out_dir, name, data.examples)
    if data.has_labels:
      label_name, content = kind.gold_text(name, data)
      fileio.write_bytes(
          fileio.join(out_dir, "labels", dataset.name, label_name), content)
  info = {"file": f"{name}.tfrecord", "source": fileio.as_str(path),
          "num_examples": len(data.examples), "num_features": count,
          "has_labels": bool(is_training or data.has_labels)}
  info.update({k: v for k, v in data.info.items() if k != "source_file"})
  return info


def create_finetuning_data(task: str, data_dir, sp_model, output_dir,
                           seq_length: Optional[int] = None,
                           doc_stride: int = 128, max_query_length: int = 64,
                           languages: Optional[Sequence[str]] = None,
                           splits: Sequence[str] = ("dev", "test"),
                           overwrite: bool = False,
                           progress=print) -> Dict:
  """Writes the records of one task; returns its metadata dict.

  `languages`: the dev / test languages to write (default: every language
  present in data_dir); a requested language whose file is missing is an error.
  The output directory appears complete or not at all; with `overwrite` the
  old one stays until the new one is whole.
  """
  dataset = xtreme_datasets.get(task)
  kind = task_types.get(dataset.task_type)
  seq_length = _check_options(kind, seq_length, doc_stride, max_query_length)
  tokenizer = example_records.SentencePieceTokenizer(sp_model)
  data_dir = fileio.as_str(data_dir)
  jobs = _split_jobs(dataset, data_dir, languages, splits)
  meta = {"task": task, "task_type": dataset.task_type,
          "seq_length": seq_length, "labels": list(dataset.labels),
          "score_split": dataset.score_split,
          "sp_model": fileio.as_str(sp_model),
          "sp_model_sha256": fileio.sha256(sp_model),
          "doc_stride": doc_stride, "max_query_length": max_query_length,
          "data_dir": data_dir, "splits": {}}
  options = {"doc_stride": doc_stride, "max_query_length": max_query_length}
  with fileio.atomic_directory(fileio.join(output_dir, task),
                               overwrite=overwrite) as tmp:
    fileio.makedirs(fileio.join(tmp, "labels", task))
    for split, lang, path in jobs:
      info = _write_one_split(kind, dataset, path, split, lang, tokenizer,
                              seq_length, options, tmp)
      meta["splits"].setdefault(split, {})[lang] = info
      progress(f"[create_finetuning_data] {task} {split}-{lang}: "
               f"{info['num_examples']} examples -> {info['num_features']} "
               "records")
    fileio.write_text(fileio.join(tmp, METADATA_FILE),
                      json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
  return meta


def read_metadata(records_dir) -> Dict:
  """The metadata.json of a records directory (one-line errors)."""
  path = fileio.join(records_dir, METADATA_FILE)
  if not fileio.isfile(path):
    raise TaskDataError(
        f"{path} does not exist: {records_dir} is not a fine-tuning records "
        "directory; make one with tools/create_finetuning_data.py --task T "
        "--output_dir O (records land in O/T/).")
  try:
    return json.loads(fileio.read_text(path))
  except (ValueError, UnicodeDecodeError) as e:
    raise TaskDataError(f"{path} is not valid JSON ({e}); recreate the "
                        "records with tools/create_finetuning_data.py.") from None

"""An XTREME task (its `download/` files, or prepared TFDS) -> fine-tuning TFRecords.

`create_finetuning_data` writes `O/T/` atomically (`common.outputs`): each
split's records and side files (`xtreme_records`), the gold labels under
`labels/T/` and `metadata.json` (settings, labels, splits, each source by
sha256). Examples come from `xtreme_readers.DownloadSource` or
`xtreme_tfds.TfdsSource`. For a `rembert-finetune` run, `prepare_records`
makes them under its output_dir (or reuses them while their inputs are the
same by content) and `checked_metadata` checks them.
"""
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_overlap
from rembert_tf.common import outputs
from rembert_tf.data import tfds_reader
from rembert_tf.data import tokenizer
from rembert_tf.data import xtreme_readers
from rembert_tf.data import xtreme_records
from rembert_tf.data import xtreme_tfds
from rembert_tf.evaluation import xtreme_tasks

METADATA_FILE = "metadata.json"
# [CLS] + at least a few pieces + [SEP] (+ [SEP]); below this no task fits.
MIN_SEQ_LENGTH = 8
TaskDataError = xtreme_tasks.TaskDataError
# The settings of metadata.json that change the training records (so do the
# SentencePiece model and the training file, `train-en` of sources_sha256).
TRAINING_SETTINGS = ("task", "data_source", "seq_length", "sp_model_sha256",
                     "doc_stride", "max_query_length")


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


def _source(dataset: xtreme_tasks.XtremeTask, data_source: str, data_dir,
            tfds_data_dir):
  """The source of `data_source`; one-line errors for a missing root."""
  if data_source == "tfds":  # without --tfds_data_dir: TFDS's own default
    return xtreme_tfds.TfdsSource(
        dataset, tfds_reader.data_dir_or_default(tfds_data_dir))
  if data_source != "download":
    raise errors.UsageError(f"--data_source {data_source!r}: choose one of "
                            f"{', '.join(xtreme_tasks.DATA_SOURCES)}.")
  if not data_dir:
    raise errors.UsageError("Give --data_dir (the XTREME download/ folder), "
                            "or --data_source tfds.")
  return xtreme_readers.DownloadSource(dataset, data_dir)


def _jobs(source, languages: Optional[Sequence[str]],
          splits: Sequence[str]) -> List[Tuple[str, str]]:
  """(split, language) of every split to write, each checked to be there."""
  jobs = [("train", "en")]
  for split in [s for s in splits if s in source.eval_splits]:
    only = source.layout.eval_languages(split)  # XQuAD's dev (SQuAD): English
    jobs += [(split, lang) for lang in (
        source.present_languages(split) if languages is None else
        [l for l in languages if only is None or l in only])]
  for split, lang in jobs:
    source.check(split, lang)
  return jobs


def _plan(task: str, data_dir, sp_model, seq_length: Optional[int] = None,
          doc_stride: int = 128, max_query_length: int = 64,
          languages: Optional[Sequence[str]] = None,
          splits: Sequence[str] = ("dev", "test"),
          data_source: str = "download", tfds_data_dir=None):
  """(dataset, task type, source, jobs, the identity `records_changes` compares)."""
  dataset = xtreme_tasks.get_finetuning_task(task)
  kind = xtreme_records.record_type(dataset.task_type)
  seq_length = _check_options(kind, seq_length, doc_stride, max_query_length)
  source = _source(dataset, data_source, data_dir, tfds_data_dir)
  jobs = _jobs(source, languages, splits)
  # A file by its content, whatever its path; a TFDS split by its name and
  # version (a prepared version does not change).
  sources = {f"{split}-{lang}": (fileio.sha256(source.describe(split, lang))
                                 if data_source == "download"
                                 else source.describe(split, lang))
             for split, lang in jobs}
  identity = {"task": task, "data_source": data_source,
              "seq_length": seq_length, "doc_stride": doc_stride,
              "max_query_length": max_query_length,
              "sp_model_sha256": fileio.sha256(sp_model),
              "sources_sha256": sources}
  return dataset, kind, source, jobs, identity


def _check_dev_labels(where: str, data, allow_unlabelled_dev: bool) -> None:
  """A dev file gives the dev scores the learning rate is selected on."""
  if allow_unlabelled_dev or (data.examples and data.has_labels):
    return
  state = "has no labels" if data.examples else "holds no example"
  raise TaskDataError(
      f"{where}: the dev file {state}, so it would get no dev score (and a "
      "sweep could not select its learning rate on it). Give a labelled dev "
      "file, leave dev out (--splits test), or pass --allow_unlabelled_dev.")


def _write_split(kind, dataset, source, split: str, lang: str, tokens,
                 seq_length: int, options, out_dir,
                 allow_unlabelled_dev: bool) -> Dict:
  """Records, side files and gold labels of one split; its metadata entry."""
  name, where = f"{split}-{lang}", source.describe(split, lang)
  is_training = split == "train"
  data = source.read(kind, split, lang)
  if split == "dev":
    _check_dev_labels(where, data, allow_unlabelled_dev)
  count, side_rows = 0, []
  with tf.io.TFRecordWriter(fileio.join(out_dir, f"{name}.tfrecord")) as writer:
    for record, side in kind.records(data.examples, dataset, tokens, seq_length,
                                     dict(options, is_training=is_training)):
      writer.write(record)
      if side is not None:
        side_rows.append(side)
      count += 1
      if count % 10000 == 0:
        logging.info("%s: %d records", name, count)
  if is_training and not count:
    raise TaskDataError(
        f"{where}: no training record could be made from its "
        f"{len(data.examples)} example(s); fix the training data.")
  if not is_training and kind.write_sides is not None:
    kind.write_sides(out_dir, name, side_rows, data.examples)
  if not is_training and data.has_labels:
    label_name, content = kind.gold(name, data)
    fileio.write_bytes(
        fileio.join(out_dir, "labels", dataset.name, label_name), content)
  return dict({"file": f"{name}.tfrecord", "source": where,
               "num_examples": len(data.examples), "num_features": count,
               "has_labels": bool(is_training or data.has_labels)},
              **data.info)


def records_changes(meta: Dict, identity: Dict) -> List[Tuple[str, Any, Any]]:
  """(setting, value in `meta`, value in `identity`) of each difference, as text.

  A field that older records lack is not held against them.
  """
  changes = [(key, _shown(meta[key]), _shown(identity[key]))
             for key in TRAINING_SETTINGS
             if key in meta and meta[key] != identity[key]]
  there = meta.get("sources_sha256", {})
  now = identity["sources_sha256"]
  for name in sorted(set(there) | set(now)):
    if there.get(name) != now.get(name):
      changes.append((name, _shown(there.get(name, "absent")),
                      _shown(now.get(name, "absent"))))
  return changes


def _shown(value: Any) -> str:
  """A value in a line: a sha256 by its first 12 digits."""
  if isinstance(value, str) and len(value) == 64:
    return f"sha256 {value[:12]}"
  return str(value)


def create_finetuning_data(task: str, data_dir, sp_model, output_dir,
                           seq_length: Optional[int] = None,
                           doc_stride: int = 128, max_query_length: int = 64,
                           languages: Optional[Sequence[str]] = None,
                           splits: Sequence[str] = ("dev", "test"),
                           overwrite: bool = False,
                           progress=print, data_source: str = "download",
                           tfds_data_dir=None,
                           allow_unlabelled_dev: bool = False) -> Dict:
  """Writes the records of one task; returns its metadata dict.

  Examples come from `data_dir` (XTREME's download/) or, with
  `data_source="tfds"`, from `tfds_data_dir`. `languages` defaults to every
  language present; a missing requested language is an error, and so is an
  unlabelled dev split unless `allow_unlabelled_dev`. With `overwrite` the
  old output stays until the new one is whole.
  """
  output_overlap.refuse_overlap(fileio.join(output_dir, task), {
      "--data_dir": data_dir, "--tfds_data_dir": tfds_data_dir,
      "--sentencepiece_model": sp_model}, "the task folder")
  dataset, kind, source, jobs, identity = _plan(
      task, data_dir, sp_model, seq_length, doc_stride, max_query_length,
      languages, splits, data_source, tfds_data_dir)
  tokens = tokenizer.SentencePieceTokenizer(sp_model)
  meta = dict(identity, labels=list(dataset.labels),
              score_split=dataset.score_split,
              task_type=dataset.task_type, sp_model=fileio.as_str(sp_model),
              data_dir=source.data_dir, splits={})
  options = {"doc_stride": doc_stride, "max_query_length": max_query_length}
  with outputs.atomic_directory(fileio.join(output_dir, task),
                               overwrite=overwrite) as tmp:
    fileio.makedirs(fileio.join(tmp, "labels", task))
    for split, lang in jobs:
      info = _write_split(kind, dataset, source, split, lang, tokens,
                          meta["seq_length"], options, tmp,
                          allow_unlabelled_dev)
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
        "directory; make one with rembert-create-finetuning-data --task T "
        "--output_dir O (records land in O/T/).")
  try:
    return json.loads(fileio.read_text(path))
  except (ValueError, UnicodeDecodeError) as e:
    raise TaskDataError(f"{path} is not valid JSON ({e}); recreate the "
                        "records with rembert-create-finetuning-data.") from None


# --- The records of a fine-tuning run -------------------------------------


def prepare_records(data, output_dir: str, sp_model, init_checkpoint,
                    holds_runs: bool, progress) -> str:
  """The records directory of a run of `data` (the fine-tuning experiment's
  data section): `data.records_dir`, or written under
  output_dir/records/<task> and reused while their inputs are the same by
  content. `holds_runs`: output_dir holds runs trained on those records;
  then changed training records are refused, and changed dev / test files
  are made again with a note (the runs predict them again). An output_dir
  that is, holds or lies in an input is refused."""
  output_overlap.refuse_overlap(output_dir, {
      "--init_checkpoint": init_checkpoint, "--records_dir": data.records_dir,
      "--data_dir": data.data_dir, "--tfds_data_dir": data.tfds_data_dir,
      "--sentencepiece_model": data.sentencepiece_model}, "--output_dir")
  if data.records_dir is not None:
    return fileio.as_str(data.records_dir)
  tfds_data_dir = data.tfds_data_dir
  if data.data_source == "tfds":
    tfds_data_dir = tfds_reader.data_dir_or_default(tfds_data_dir)
  records_root = fileio.join(output_dir, "records")
  existing = fileio.join(records_root, data.task)
  options = dict(seq_length=data.seq_length, languages=data.languages,
                 splits=data.splits, data_source=data.data_source,
                 tfds_data_dir=tfds_data_dir)
  if fileio.exists(fileio.join(existing, METADATA_FILE)):
    changes = records_changes(read_metadata(existing), _plan(
        data.task, data.data_dir, sp_model, **options)[-1])
    if not changes:  # a rerun (after a kill, another rate) reuses them
      progress(f"[finetune] records of an earlier run reused: {existing}")
      return existing
    said = "; ".join(f"{name} is {there} there, {now} now"
                     for name, there, now in changes)
    if holds_runs and any(name in TRAINING_SETTINGS or name == "train-en"
                          for name, _, _ in changes):
      raise TaskDataError(
          f"{output_dir}: its runs were trained on records made with other "
          f"settings or files ({said}). Pass --overwrite to start "
          f"{output_dir} again, or use another --output_dir.")
    if holds_runs:
      progress(f"[finetune] note: {existing} is made again: its dev / test "
               f"files changed ({said}); the finished runs predict them again.")
  create_finetuning_data(
      data.task, data.data_dir, sp_model, records_root, overwrite=True,
      progress=progress, allow_unlabelled_dev=data.allow_unlabelled_dev,
      **options)
  return existing


def checked_metadata(data, records_dir: str, checkpoint_sp_model,
                     num_learning_rates: int, progress) -> Dict:
  """The records' metadata.json once every check passes: the task, training
  records, labelled dev files (unless data.allow_unlabelled_dev) and the
  SentencePiece model of the checkpoint (`checkpoint_sp_model`, if any)."""
  meta = read_metadata(records_dir)
  metadata = fileio.join(records_dir, METADATA_FILE)
  if meta["task"] != data.task:
    raise TaskDataError(f"{metadata}: field task is {meta['task']!r}, not "
                        f"{data.task!r}; give the records of {data.task}.")
  train = meta["splits"].get("train", {}).get("en", {})
  if not train.get("num_features"):
    raise TaskDataError(
        f"{metadata}: the English training split "
        f"({train.get('source', 'train-en')}) has no record, so there is "
        "nothing to train on; fix the training file and recreate the records.")
  dev = meta["splits"].get("dev", {})
  for lang, info in sorted(dev.items() if "dev" in data.splits and
                           not data.allow_unlabelled_dev else ()):
    if not info.get("has_labels") or not info.get("num_examples"):
      state = "no labels" if info.get("num_examples") else "no examples"
      raise TaskDataError(
          f"{metadata}: dev-{lang} has {state} (from {info.get('source')}), "
          "so it gets no dev score"
          + (" and the learning rate cannot be selected on it"
             if lang == "en" and num_learning_rates > 1 else "") +
          ". Recreate the records from a labelled dev file, leave dev out "
          "(--splits test), or pass --allow_unlabelled_dev.")
  records_hash = meta.get("sp_model_sha256")
  if checkpoint_sp_model and records_hash and (
      fileio.sha256(checkpoint_sp_model) != records_hash):
    message = (
        f"{metadata}: the records were made with the SentencePiece model "
        f"{meta.get('sp_model', '?')} (sp_model_sha256 {records_hash}), but "
        f"the checkpoint was trained with {checkpoint_sp_model} (sha256 "
        f"{fileio.sha256(checkpoint_sp_model)}). Recreate the records with "
        f"--sentencepiece_model {checkpoint_sp_model}")
    if not data.allow_sentencepiece_mismatch:
      raise TaskDataError(message + ", or pass --allow_sentencepiece_mismatch"
                          " to fine-tune anyway.")
    logging.warning("%s", message)
    progress(f"[finetune] WARNING: {message} "
             "(--allow_sentencepiece_mismatch given; going on).")
  return meta

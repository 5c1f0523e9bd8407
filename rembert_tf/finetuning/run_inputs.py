"""What fine-tuning starts from: the task's records and the encoder.

Records are given, or written under `<output_dir>/records/` from XTREME's
`download/` or TFDS and reused while their inputs are the same by content;
they must name the task and come from the checkpoint's SentencePiece model.
The encoder is anything `checkpoints.checkpoint_layout` resolves, or random
weights of `--model_config`.
"""
from typing import Callable, Dict, Optional, Tuple

from absl import logging

from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import tfds_reader
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_config

FinetuningError = finetuning_experiment.FinetuningError


def checkpoint_sentencepiece(init_checkpoint) -> Optional[str]:
  """The SentencePiece model stored with a checkpoint, if any."""
  if not init_checkpoint:
    return None
  return checkpoint_layout.find_sentencepiece(init_checkpoint)


def prepare_records(task, output_dir, records_dir, data_dir, sp_model,
                    init_checkpoint, seq_length, languages, splits,
                    progress, data_source: str = "download",
                    tfds_data_dir=None,
                    allow_unlabelled_dev: bool = False,
                    holds_runs: bool = False) -> str:
  """The records directory: given, or written under output_dir/records/<task>
  (reused for the same inputs). `holds_runs`: output_dir holds runs trained
  on those records. An output_dir that is, holds or lies in an input is refused."""
  outputs.refuse_overlap(output_dir, {
      "--init_checkpoint": init_checkpoint, "--records_dir": records_dir,
      "--data_dir": data_dir, "--tfds_data_dir": tfds_data_dir,
      "--sentencepiece_model": sp_model}, "--output_dir")
  if records_dir is not None:
    return fileio.as_str(records_dir)
  if data_source == "tfds":
    tfds_data_dir = root = tfds_reader.data_dir_or_default(tfds_data_dir)
  else:
    root = data_dir
  if root is None:
    raise FinetuningError("Give records_dir / --records_dir "
                          "(rembert-create-finetuning-data output), "
                          "data_dir / --data_dir (XTREME download/), or "
                          "--data_source tfds.")
  if sp_model is None:
    sp_model = checkpoint_sentencepiece(init_checkpoint)
    if sp_model is None:
      raise FinetuningError(
          "Give --sentencepiece_model: the init checkpoint "
          f"{init_checkpoint} has no "
          f"{checkpoint_layout.SENTENCEPIECE_FILE}.")
  records_root = fileio.join(output_dir, "records")
  existing = fileio.join(records_root, task)
  identity = finetuning_data.records_identity(
      task, data_dir, sp_model, seq_length, languages=languages,
      splits=splits, data_source=data_source, tfds_data_dir=tfds_data_dir)
  if fileio.exists(fileio.join(existing, finetuning_data.METADATA_FILE)):
    changes = finetuning_data.records_changes(
        finetuning_data.read_metadata(existing), identity)
    if not changes:  # a rerun (after a kill, another rate) reuses them
      progress(f"[finetune] records of an earlier run reused: {existing}")
      return existing
    _check_records_change(output_dir, existing, changes, holds_runs, progress)
  finetuning_data.create_finetuning_data(
      task, data_dir, sp_model, records_root,
      seq_length=seq_length, languages=languages, splits=splits,
      overwrite=True, progress=progress, data_source=data_source,
      tfds_data_dir=tfds_data_dir, allow_unlabelled_dev=allow_unlabelled_dev)
  return existing


def _check_records_change(output_dir: str, existing: str, changes,
                          holds_runs: bool, progress) -> None:
  """Under finished runs, changed training records are refused; changed dev /
  test files are rebuilt with a note (the runs then predict them again)."""
  if not holds_runs:
    return
  said = "; ".join(f"{name} is {there} there, {now} now"
                   for name, there, now in changes)
  if any(name in finetuning_data.TRAINING_SETTINGS or name == "train-en"
         for name, _, _ in changes):
    raise FinetuningError(
        f"{output_dir}: its runs were trained on records made with other "
        f"settings or files ({said}). Pass --overwrite to start "
        f"{output_dir} again, or use another --output_dir.")
  progress(f"[finetune] note: {existing} is made again: its dev / test "
           f"files changed ({said}); the finished runs predict them again.")


def read_task_metadata(task: str, records_dir: str) -> Dict:
  """The records' metadata.json, which must be the task's."""
  meta = finetuning_data.read_metadata(records_dir)
  if meta["task"] != task:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: field "
        f"task is {meta['task']!r}, not {task!r}; give the records of {task}.")
  train = meta["splits"].get("train", {}).get("en", {})
  if not train.get("num_features"):
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: the "
        f"English training split ({train.get('source', 'train-en')}) has no "
        "record, so there is nothing to train on; fix the training file "
        "and recreate the records.")
  return meta


def checked_metadata(task: str, records_dir: str, init_checkpoint, splits,
                     num_learning_rates: int, allow_unlabelled_dev: bool,
                     allow_sp_model_mismatch: bool, progress) -> Dict:
  """The records' metadata.json once every check passes (task, training records,
  labelled dev files, the checkpoint's SentencePiece model)."""
  meta = read_task_metadata(task, records_dir)
  check_labels(meta, records_dir, splits, num_learning_rates,
               allow_unlabelled_dev)
  check_tokenizer(meta, records_dir, init_checkpoint, allow_sp_model_mismatch,
                  progress)
  return meta


def check_labels(meta: Dict, records_dir: str, splits, num_learning_rates: int,
                 allow_unlabelled_dev: bool) -> None:
  """Refuses dev files without labels unless `allow_unlabelled_dev` (a sweep of
  several rates then takes the smallest)."""
  if allow_unlabelled_dev or "dev" not in splits:
    return
  metadata = fileio.join(records_dir, finetuning_data.METADATA_FILE)
  for lang, info in sorted(meta["splits"].get("dev", {}).items()):
    if not info.get("has_labels") or not info.get("num_examples"):
      state = "no labels" if info.get("num_examples") else "no examples"
      raise FinetuningError(
          f"{metadata}: dev-{lang} has {state} (from {info.get('source')}), "
          "so it gets no dev score"
          + (" and the learning rate cannot be selected on it"
             if lang == "en" and num_learning_rates > 1 else "") +
          ". Recreate the records from a labelled dev file, leave dev out "
          "(--splits test), or pass --allow_unlabelled_dev.")


def check_tokenizer(meta: Dict, records_dir: str, init_checkpoint,
                    allow_mismatch: bool, progress) -> None:
  """Records must come from the checkpoint's SentencePiece model."""
  checkpoint_model = checkpoint_sentencepiece(init_checkpoint)
  records_hash = meta.get("sp_model_sha256")
  if checkpoint_model is None or not records_hash:
    return
  checkpoint_hash = fileio.sha256(checkpoint_model)
  if checkpoint_hash == records_hash:
    return
  message = (
      f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: the records "
      f"were made with the SentencePiece model {meta.get('sp_model', '?')} "
      f"(sp_model_sha256 {records_hash}), but the checkpoint was trained with "
      f"{checkpoint_model} (sha256 {checkpoint_hash}). Recreate the records "
      f"with --sentencepiece_model {checkpoint_model}")
  if not allow_mismatch:
    raise FinetuningError(message + ", or pass "
                          "--allow_sentencepiece_mismatch to "
                          "fine-tune anyway.")
  logging.warning("%s", message)
  progress(f"[finetune] WARNING: {message} "
           "(--allow_sentencepiece_mismatch given; "
           "going on).")


def encoder_source(init_checkpoint, model_config, meta, records_dir
                   ) -> Tuple[rembert_config.RemBertConfig,
                              Optional[Callable], str]:
  """(model config, restore_encoder(encoder) or None, description); reads only the config now."""
  if not init_checkpoint:
    if model_config is None:
      raise FinetuningError("Give --init_checkpoint, or --model_config to "
                            "fine-tune from random weights.")
    model_cfg = (model_config
                 if isinstance(model_config, rembert_config.RemBertConfig)
                 else rembert_config.load_model_config(model_config))
    restore, source = None, "random initialisation (no --init_checkpoint)"
  else:
    model_cfg = checkpoint_restore.model_config_of(init_checkpoint, model_config)
    restore = lambda encoder: checkpoint_restore.restore_encoder(  # pylint: disable=g-long-lambda
        encoder, init_checkpoint)
    source = checkpoint_layout.resolve(init_checkpoint).encoder_checkpoint
  if meta["seq_length"] > model_cfg.max_position_embeddings:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: "
        f"seq_length {meta['seq_length']} > the model's "
        f"max_position_embeddings {model_cfg.max_position_embeddings}; "
        "recreate the records with a smaller --seq_length.")
  return model_cfg, restore, source

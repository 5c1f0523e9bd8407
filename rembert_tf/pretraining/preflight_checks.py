"""Checks of model_dir before the first pre-training step: one line each,
nothing written. The records are checked by the input pipeline that reads
them (`rembert_tf.data.pretraining_input_pipeline`).

| check | refuses |
| --- | --- |
| `check_model_dir` | a model_dir holding a checkpoint no training run wrote (a converted one), or that is, holds or lies inside the init checkpoint or the records (a records glob matching nothing: the input pipeline's error); then `check_model_dir_writable` |
| `check_model_dir_writable` | a model_dir that cannot be created or written |
| `check_checkpoint_compatible` | a model_dir checkpoint of another model (config fields, variable names and shapes) |
| `check_sentencepiece_matches` | a resume on records of another SentencePiece model (sha256) |
| `check_async_checkpointing` | asynchronous checkpoints under multi-worker MWMS |
| `finished_checkpoint` | (refuses nothing) says a training run is complete in model_dir: nothing to do |

Example:
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from rembert_tf.pretraining import preflight_checks
preflight_checks.check_model_dir_writable("/tmp/pretrain")
preflight_checks.check_model_dir(config, "/tmp/pretrain", "train_and_eval")
preflight_checks.sentencepiece_model_of(config.task.train_data)  # or None
```
"""
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf
import tf_keras
from official.core import base_trainer
from official.core import config_definitions as cfg
from tensorflow.python.checkpoint import graph_view  # pylint: disable=g-direct-tensorflow-import

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import artifacts
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.pretraining import pretraining_errors

_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# How many names of a kind a checkpoint mismatch lists before "(+N more)".
_LISTED_VARIABLES = 8


# ---------------------------------------------------------------------------
# model_dir and records.
def check_model_dir_writable(model_dir: str) -> None:
  try:
    fileio.makedirs(model_dir)
    probe = fileio.join(model_dir, f".write_probe-{os.getpid()}")
    fileio.write_text(probe, "ok")
    fileio.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise pretraining_errors.PretrainingError(
        f"--model_dir {model_dir} is not writable ({errors.one_line(e)}). "
        "Choose a directory you can create and write to.") from None


def check_model_dir(config: cfg.ExperimentConfig, model_dir: str,
                    mode: str) -> None:
  """Refuses a model_dir that is one of the run's inputs, or not writable.

  A directory holding checkpoints that no training run wrote (no
  params.yaml: a converted checkpoint directory, an export) is an input: a
  run there would train from scratch and its `max_to_keep` would delete
  them. So is a model_dir that is, holds or lies inside the init
  checkpoint or the records (`outputs.refuse_overlap`, on real paths). The
  records are the input pipeline's `record_files`: an empty input_path or
  a glob matching nothing is refused at once, before the strategy is made.
  """
  if not artifacts.holds_a_run(model_dir):
    found = [fileio.join(model_dir, name) for name in (
        checkpoint_layout.ENCODER_SUBDIR, checkpoint_layout.PRETRAINER_SUBDIR,
        checkpoint_layout.SAVED_MODEL_FILE, "checkpoint")
             if fileio.exists(fileio.join(model_dir, name))]
    if found:
      raise pretraining_errors.PretrainingError(
          f"--model_dir {model_dir} holds a checkpoint no training run wrote "
          f"({found[0]}; no {artifacts.PARAMS_FILE}): it is an input, and "
          "training there would replace it. Start from it with "
          f"--params_override task.init_checkpoint={model_dir} and give "
          "another --model_dir.")
  inputs = {"task.init_checkpoint": config.task.init_checkpoint or None}
  for field, data in data_sections(config, mode):
    if data.input_path != masked_lm_task.SYNTHETIC_INPUT_PATH:
      for path in pretraining_input_pipeline.record_files(data, field):
        inputs[f"{field}.input_path ({path})"] = path
  outputs.refuse_overlap(model_dir, inputs, "--model_dir")
  check_model_dir_writable(model_dir)


def data_sections(config: cfg.ExperimentConfig, mode: str
                  ) -> List[Tuple[str, Any]]:
  """(field name, data config) of the data `mode` reads."""
  sections = []
  if "train" in mode:
    sections.append(("task.train_data", config.task.train_data))
  if "eval" in mode:
    sections.append(("task.validation_data", config.task.validation_data))
  return sections


# ---------------------------------------------------------------------------
# The checkpoint in model_dir.
def checkpoint_reader(prefix: str):
  """A reader of a checkpoint prefix. `tf.train.list_variables` first asks
  whether the prefix is a directory, which some filesystems (ram://) answer
  yes for any prefix; the reader opens the prefix itself."""
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def checkpoint_step(checkpoint_path: str) -> int:
  """The global step a full checkpoint was saved at (0 when unreadable)."""
  try:
    return int(checkpoint_reader(checkpoint_path).get_tensor(
        "global_step" + _VARIABLE_SUFFIX))
  except (ValueError, tf.errors.NotFoundError, tf.errors.OpError):
    return 0


def _escape(name: str) -> str:
  return name.replace(".", "..").replace("/", ".S")


def expected_checkpoint_variables(checkpoint: tf.train.Checkpoint,
                                  model: tf_keras.Model) -> Dict[str, List[int]]:
  """Checkpoint keys -> shapes of the model's variables in `checkpoint`."""
  _, paths = graph_view.ObjectGraphView(checkpoint).breadth_first_traversal()
  expected = {}
  for variable in model.variables:
    refs = paths.get(variable)
    if refs is None:
      continue
    key = "/".join(_escape(r.name) for r in refs)
    expected[key + _VARIABLE_SUFFIX] = list(variable.shape)
  return expected


def _model_config_differences(model_dir: str,
                              model_config: rembert_config.RemBertConfig
                              ) -> List[str]:
  config_path = fileio.join(model_dir, checkpoint_layout.MODEL_CONFIG_FILE)
  if not fileio.exists(config_path):
    return []
  saved = rembert_config.load_model_config(config_path)
  diffs = [f"{k}: {getattr(saved, k)!r} in model_dir, {getattr(model_config, k)!r} now"
           for k in rembert_config.field_names()
           if getattr(saved, k) != getattr(model_config, k)]
  return ["model config fields differ: " + "; ".join(diffs)] if diffs else []


def _listing(keys: List[str], describe: Callable[[str], str]) -> str:
  head = [describe(k) for k in keys[:_LISTED_VARIABLES]]
  more = len(keys) - _LISTED_VARIABLES
  return ", ".join(head) + (f" (+{more} more)" if more > 0 else "")


def _short(key: str) -> str:
  return key.replace(_VARIABLE_SUFFIX, "")


def _model_variables_in_checkpoint(latest: str, roots) -> Dict[str, List[int]]:
  """Variable keys -> shapes in the checkpoint, under the model's roots
  (optimizer slots left out)."""
  return {
      name: shape
      for name, shape in checkpoint_reader(latest).get_variable_to_shape_map().items()
      if name.endswith(_VARIABLE_SUFFIX)
      and ".OPTIMIZER_SLOT" not in name and name.split("/")[0] in roots}


def _variable_differences(latest: str, trainer: base_trainer.Trainer
                          ) -> List[str]:
  expected = expected_checkpoint_variables(trainer.checkpoint, trainer.model)
  in_checkpoint = _model_variables_in_checkpoint(
      latest, {k.split("/")[0] for k in expected})
  missing = sorted(set(expected) - set(in_checkpoint))
  unexpected = sorted(set(in_checkpoint) - set(expected))
  reshaped = sorted(k for k in set(expected) & set(in_checkpoint)
                    if list(expected[k]) != list(in_checkpoint[k]))
  problems = []
  if reshaped:
    problems.append("variables with other shapes: " + _listing(
        reshaped, lambda k: f"{_short(k)} {in_checkpoint[k]} in checkpoint vs "
        f"{expected[k]} in the model"))
  if missing:
    problems.append("model variables missing from the checkpoint: " +
                    _listing(missing, _short))
  if unexpected:
    problems.append("checkpoint variables the model lacks: " +
                    _listing(unexpected, _short))
  return problems


def check_checkpoint_compatible(model_dir: str, trainer: base_trainer.Trainer,
                                model_config: rembert_config.RemBertConfig
                                ) -> Optional[str]:
  """Refuses a model_dir whose checkpoint is of another model (nothing
  written); returns the newest intact checkpoint (None without one)."""
  latest = checkpoint_layout.latest_checkpoint(model_dir)
  if latest is None:
    return None
  problems = (_model_config_differences(model_dir, model_config) +
              _variable_differences(latest, trainer))
  if problems:
    raise pretraining_errors.CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({fileio.join(model_dir, artifacts.PARAMS_FILE)}).")
  return latest


def check_async_checkpointing(config: cfg.ExperimentConfig,
                              multi_worker: bool) -> None:
  """Asynchronous checkpoints are written from one host; a multi-worker job
  has every worker join each save."""
  if config.trainer.enable_async_checkpointing and multi_worker:
    raise pretraining_errors.PretrainingError(
        "trainer.enable_async_checkpointing=true writes checkpoints from one "
        "host; under --strategy multi_worker_mirrored every worker joins each "
        "save. Set trainer.enable_async_checkpointing=false for this job.")


def finished_checkpoint(config: cfg.ExperimentConfig, model_dir: str,
                        mode: str) -> Optional[str]:
  """model_dir's final checkpoint when a training run of this config is
  complete there (its newest checkpoint is at trainer.train_steps or later,
  with its encoder export, and of this model); else None.

  Read from model_dir alone, so every worker of a job decides alike before
  any of them connects to the others.
  """
  if "train" not in mode or not fileio.isdir(model_dir):
    return None
  try:  # An index naming only broken checkpoints is reported by the run.
    latest = checkpoint_layout.latest_checkpoint(model_dir, report=lambda _: None)
  except checkpoint_layout.CheckpointError:
    return None
  if latest is None or checkpoint_step(latest) < config.trainer.train_steps:
    return None
  step = checkpoint_step(latest)
  if (artifacts.exported_step(model_dir) != step
      or not fileio.exists(fileio.join(model_dir,
                                       checkpoint_layout.MODEL_CONFIG_FILE))
      or _model_config_differences(model_dir, config.task.model)):
    return None  # the run goes on: it exports, or names the mismatch
  return latest


# ---------------------------------------------------------------------------
# The records' SentencePiece model.
def _records_metadata_path(data_config) -> Optional[str]:
  if data_config.input_path in ("", masked_lm_task.SYNTHETIC_INPUT_PATH):
    return None
  files = pretraining_input_pipeline.input_files(data_config.input_path)
  if not files:
    return None
  meta_path = fileio.join(fileio.dirname(files[0]), "metadata.json")
  return meta_path if fileio.exists(meta_path) else None


def _named_sentencepiece_models(meta: Dict[str, Any]) -> List[str]:
  candidates = [meta[key] for key in ("sentencepiece_model", "spm_model",
                                      "tokenizer_model")
                if isinstance(meta.get(key), str)]
  tok = meta.get("tokenizer")
  if isinstance(tok, dict):
    candidates += [tok[k] for k in ("model", "path", "sentencepiece_model")
                   if isinstance(tok.get(k), str)]
  elif isinstance(tok, str):
    candidates.append(tok)
  return candidates


def sentencepiece_model_of(data_config) -> Optional[str]:
  """The SentencePiece model the records' metadata.json names, if it exists;
  when the metadata records the model's sha256, only a file of that content
  (another file at the same path is not the records' model)."""
  meta_path = _records_metadata_path(data_config)
  if meta_path is None:
    return None
  meta = fileio.read_json(meta_path)
  recorded = _recorded_sha256(meta)
  for named in _named_sentencepiece_models(meta):
    # A relative name is relative to where the data tool ran, or else to the
    # records' folder.
    paths = [named]
    if not fileio.is_remote(named) and not os.path.isabs(named):
      paths.append(fileio.join(fileio.dirname(meta_path), named))
    for path in paths:
      if fileio.exists(path) and (recorded is None
                                  or fileio.sha256(path) == recorded):
        return path
  return None


def _recorded_sha256(meta: Dict[str, Any]) -> Optional[str]:
  """The sha256 of the SentencePiece model a metadata.json records (records
  made before it was recorded: None)."""
  tok = meta.get("tokenizer") if isinstance(meta.get("tokenizer"), dict) else {}
  return meta.get("sentencepiece_sha256") or tok.get("sha256") or None


def records_sentencepiece_sha256(data_config):
  """(sha256, metadata path, named model) of the records' tokenizer, or Nones."""
  meta_path = _records_metadata_path(data_config)
  if meta_path is None:
    return None, None, None
  named = sentencepiece_model_of(data_config)
  sha = _recorded_sha256(fileio.read_json(meta_path))
  if not sha and named:
    sha = fileio.sha256(named)
  return sha, meta_path, named


def check_sentencepiece_matches(model_dir: str, data_config,
                                allow_mismatch: bool = False,
                                warn: Callable[[str], None] = logging.warning
                                ) -> bool:
  """A resume on records of another SentencePiece model is refused.

  Compares the sha256 of the tokenizer the checkpoint was trained with
  (`model_dir/sentencepiece.model`, or else the sha256 the run recorded in
  `model_dir/sentencepiece.sha256`) with the one the records' metadata.json
  records. With `allow_mismatch` a mismatch is a warning, and the records'
  model (when available) replaces model_dir's. Returns True on a mismatch.
  """
  ours = fileio.join(model_dir, checkpoint_layout.SENTENCEPIECE_FILE)
  recorded = fileio.join(model_dir, checkpoint_layout.SENTENCEPIECE_SHA256_FILE)
  if fileio.exists(ours):
    our_sha, trained_with = fileio.sha256(ours), ours
  elif fileio.exists(recorded):
    our_sha, trained_with = fileio.read_text(recorded).strip(), recorded
  else:
    return False
  records_sha, meta_path, named = records_sentencepiece_sha256(data_config)
  if not records_sha or our_sha == records_sha:
    return False
  message = (
      f"the records were made with another SentencePiece model than this "
      f"run: {meta_path} records sha256 {records_sha}"
      f"{f' ({named})' if named else ''}, but {trained_with} (the model the "
      f"checkpoint was trained with) has sha256 {our_sha}.")
  if not allow_mismatch:
    raise pretraining_errors.TokenizerMismatchError(
        message + " Use records made with that model, or a new --model_dir; "
        "--allow_sentencepiece_mismatch goes on anyway.")
  warn(message + " Going on (--allow_sentencepiece_mismatch)"
       + (f"; {ours} is replaced by {named}." if named else "."))
  if named:
    fileio.copy(named, ours, overwrite=True)
  if fileio.exists(recorded):
    fileio.write_text(recorded, records_sha + "\n")
  return True

"""A pre-training model_dir: the checks before a run's first step (one line
each, nothing written) and what the run writes there besides its saves.

Builds on Model Garden's `CheckpointManager` layout (`ckpt-N`, the
`checkpoint` index), `checkpoints.checkpoint_integrity` and `tf.io.gfile`
(any filesystem). Refused: a model_dir that is an input (`check`) or not
writable (`make_writable`), `--mode eval` without a checkpoint, a checkpoint
of another model, a resume on records of another SentencePiece model. Once
every check passed, the chief writes `params.yaml`, `model_config.yaml` and
the records' `sentencepiece.model` or its sha256 (`prepare`).

Example:
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from rembert_tf.pretraining import model_directory
model_directory.check(config, "/tmp/pretrain", "train_and_eval")
```
"""
import collections
import hashlib
import os
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf
import yaml
from official.core import config_definitions as cfg
from official.core import train_utils

from rembert_tf.checkpoints import checkpoint_integrity as checkpoints
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task

PARAMS_FILE = "params.yaml"
_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# How many names of a kind a checkpoint mismatch lists before "(+N more)".
_LISTED_VARIABLES = 8


class PretrainingError(errors.RemBertError, ValueError):
  """A pre-training run cannot start or go on; the message names the cause and fix."""


class CheckpointMismatchError(PretrainingError):
  """model_dir holds a checkpoint of a different model."""


class TokenizerMismatchError(PretrainingError):
  """The records were made with another SentencePiece model than model_dir's."""


def holds_a_run(model_dir: str) -> bool:
  """Whether a run got past its checks in model_dir (it wrote params.yaml)."""
  try:
    return tf.io.gfile.exists(os.path.join(model_dir, PARAMS_FILE))
  except tf.errors.OpError:
    return False


def checkpoint_step(prefix: str) -> int:
  """The global step a full checkpoint was saved at (0 when unreadable; not
  `tf.train.load_variable`, which ram:// misleads)."""
  try:
    return int(tf.compat.v1.train.NewCheckpointReader(prefix).get_tensor(
        "global_step" + _VARIABLE_SUFFIX))
  except (ValueError, tf.errors.OpError):
    return 0


def resume_checkpoint(model_dir: str, mode: str,
                      report: Callable[[str], None]) -> Optional[str]:
  """model_dir's newest intact checkpoint, the one a run starts from (a
  fallback past a broken one is reported); None without one, which
  `--mode eval` refuses."""
  latest = checkpoints.latest_checkpoint(model_dir, report=report)
  if mode == "eval" and latest is None:
    raise PretrainingError(
        f"--mode eval: --model_dir {model_dir} holds no checkpoint to evaluate "
        "(expected ckpt-N files and a `checkpoint` index). Train first, or "
        "point --model_dir at a pre-training run.")
  return latest


def finished_checkpoint(config: cfg.ExperimentConfig, model_dir: str,
                        mode: str) -> Optional[str]:
  """model_dir's final checkpoint when a training run of this config is
  complete there (at trainer.train_steps or later, with its encoder export,
  of this model); else None. Read from model_dir alone, so every worker of
  a job decides alike before any of them connects to the others."""
  if "train" not in mode or not tf.io.gfile.isdir(model_dir):
    return None
  try:  # An index naming only broken checkpoints is reported by the run.
    latest = checkpoints.latest_checkpoint(model_dir)
  except checkpoints.CheckpointError:
    return None
  exported = tf.train.latest_checkpoint(
      os.path.join(model_dir, checkpoints.ENCODER_SUBDIR))
  if (latest is None or checkpoint_step(latest) < config.trainer.train_steps
      or exported is None
      or checkpoints.step_of(exported) != checkpoint_step(latest)
      or not tf.io.gfile.exists(os.path.join(model_dir,
                                             checkpoints.MODEL_CONFIG_FILE))
      or _model_config_differences(model_dir, config.task.model)):
    return None  # the run goes on: it exports, or names the mismatch
  return latest


def check(config: cfg.ExperimentConfig, model_dir: str, mode: str) -> None:
  """Refuses a model_dir that is one of the run's inputs: one holding
  checkpoints no training run wrote (no params.yaml: a run there would
  train from scratch, and `max_to_keep` delete them), or one that is, holds
  or lies inside the init checkpoint or the records (an empty input_path or
  a glob matching nothing is refused here, before the strategy is made)."""
  found = [os.path.join(model_dir, name) for name in (
      checkpoints.ENCODER_SUBDIR, checkpoints.PRETRAINER_SUBDIR,
      checkpoints.SAVED_MODEL_FILE, "checkpoint")
           if tf.io.gfile.exists(os.path.join(model_dir, name))]
  if found and not holds_a_run(model_dir):
    raise PretrainingError(
        f"--model_dir {model_dir} holds a checkpoint no training run wrote "
        f"({found[0]}; no {PARAMS_FILE}): it is an input, and training "
        "there would replace it. Start from it with --params_override "
        f"task.init_checkpoint={model_dir} and give another --model_dir.")
  inputs = {"task.init_checkpoint": config.task.init_checkpoint or None}
  for field, data in experiments.data_sections(config, mode):
    if data.input_path != masked_lm_task.SYNTHETIC_INPUT_PATH:
      for path in pretraining_input_pipeline.record_files(data, field):
        inputs[f"{field}.input_path ({path})"] = path
  output_lock.refuse_overlap(model_dir, inputs, "--model_dir")


def make_writable(model_dir: str) -> None:
  """Creates model_dir, refusing one that cannot be written."""
  probe = os.path.join(model_dir, f".write_probe-{os.getpid()}")
  try:
    tf.io.gfile.makedirs(model_dir)
    with tf.io.gfile.GFile(probe, "w") as f:
      f.write("ok")
    tf.io.gfile.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise PretrainingError(
        f"--model_dir {model_dir} is not writable ({errors.one_line(e)}). "
        "Choose a directory you can create and write to.") from None


def _model_config_differences(model_dir: str,
                              model_config: rembert_config.RemBertConfig
                              ) -> List[str]:
  path = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path) as f:
    saved = yaml.safe_load(f) or {}
  saved = dict(rembert_config.RemBertConfig().as_dict(),
               **saved.get("model", saved))
  diffs = [f"{k}: {saved[k]!r} in model_dir, {v!r} now"
           for k, v in model_config.as_dict().items() if saved[k] != v]
  return ["model config fields differ: " + "; ".join(diffs)] if diffs else []


def _checkpoint_keys(checkpoint: tf.train.Checkpoint, model) -> Dict[str, list]:
  """Checkpoint keys -> shapes of the model's variables in `checkpoint`: the
  names on the first path to each in a breadth-first walk from the root, the
  walk `tf.train.Checkpoint` names its keys by."""
  escape = lambda name: name.replace(".", "..").replace("/", ".S")
  paths, queue = {id(checkpoint): ()}, collections.deque([checkpoint])
  while queue:
    node = queue.popleft()
    for name, child in tf.train.TrackableView.children(node).items():
      if id(child) not in paths:
        paths[id(child)] = paths[id(node)] + (escape(name),)
        queue.append(child)
  return {"/".join(paths[id(v)]) + _VARIABLE_SUFFIX: list(v.shape)
          for v in model.variables if id(v) in paths}


def _listing(keys: List[str], describe: Callable[[str], str]) -> str:
  more = len(keys) - _LISTED_VARIABLES
  return (", ".join(describe(k).replace(_VARIABLE_SUFFIX, "")
                    for k in keys[:_LISTED_VARIABLES])
          + (f" (+{more} more)" if more > 0 else ""))


def check_checkpoint_compatible(model_dir: str, trainer,
                                model_config: rembert_config.RemBertConfig
                                ) -> None:
  """Refuses a model_dir whose checkpoint is of another model (nothing
  written), naming the config fields and variables that differ."""
  latest = checkpoints.latest_checkpoint(model_dir)
  if latest is None:
    return
  expected = _checkpoint_keys(trainer.checkpoint, trainer.model)
  roots = {k.split("/")[0] for k in expected}
  # The model's variables in the checkpoint (optimizer slots left out).
  reader = tf.compat.v1.train.NewCheckpointReader(latest)
  found = {name: shape for name, shape in
           reader.get_variable_to_shape_map().items()
           if name.endswith(_VARIABLE_SUFFIX) and ".OPTIMIZER_SLOT" not in name
           and name.split("/")[0] in roots}
  reshaped = sorted(k for k in set(expected) & set(found)
                    if list(expected[k]) != list(found[k]))
  problems = _model_config_differences(model_dir, model_config)
  if reshaped:
    problems.append("variables with other shapes: " + _listing(
        reshaped, lambda k: f"{k} {found[k]} in checkpoint vs {expected[k]} "
        "in the model"))
  for what, keys in (("model variables missing from the checkpoint",
                      set(expected) - set(found)),
                     ("checkpoint variables the model lacks",
                      set(found) - set(expected))):
    if keys:
      problems.append(f"{what}: " + _listing(sorted(keys), str))
  if problems:
    raise CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({os.path.join(model_dir, PARAMS_FILE)}).")


def records_sentencepiece(data_config
                          ) -> Tuple[Optional[str], Optional[str], Optional[str]]:
  """(sha256, metadata.json path, model path) of the SentencePiece model the
  records' metadata.json names, or Nones. The model path is a file that
  exists and, when the metadata records the model's sha256, of that content
  (another file at the same path is not the records' model); without a
  recorded sha256, the sha256 is the found model's."""
  if data_config.input_path in ("", masked_lm_task.SYNTHETIC_INPUT_PATH):
    return None, None, None
  files = pretraining_input_pipeline.input_files(data_config.input_path)
  meta_path = files and fileio.join(fileio.dirname(files[0]), "metadata.json")
  if not meta_path or not fileio.exists(meta_path):
    return None, None, None
  meta = fileio.read_json(meta_path)
  tok = meta.get("tokenizer") if isinstance(meta.get("tokenizer"), dict) else {}
  recorded = meta.get("sentencepiece_sha256") or tok.get("sha256") or None
  # The data tool names the model under `tokenizer`; top level: other tools.
  for named in (meta.get("sentencepiece_model"),
                tok.get("sentencepiece_model")):
    if not isinstance(named, str):
      continue
    # Relative to where the data tool ran, or else to the records' folder.
    paths = [named]
    if not fileio.is_remote(named) and not os.path.isabs(named):
      paths.append(fileio.join(fileio.dirname(meta_path), named))
    for path in paths:
      if fileio.exists(path) and (recorded is None
                                  or fileio.sha256(path) == recorded):
        return recorded or fileio.sha256(path), meta_path, path
  return recorded, meta_path, None


def _sentencepiece_of(model_dir: str) -> Tuple[Optional[str], str]:
  """(sha256, file) of the SentencePiece model model_dir's checkpoints were
  trained with: its sentencepiece.model, else the sha256 the run recorded."""
  for name in (checkpoints.SENTENCEPIECE_FILE,
               checkpoints.SENTENCEPIECE_SHA256_FILE):
    path = os.path.join(model_dir, name)
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path, "rb") as f:
        content = f.read()
      if name == checkpoints.SENTENCEPIECE_FILE:
        return hashlib.sha256(content).hexdigest(), path
      return content.decode().strip(), path
  return None, ""


def check_sentencepiece_matches(model_dir: str, data_config,
                                allow_mismatch: bool = False,
                                warn: Callable[[str], None] = logging.warning
                                ) -> bool:
  """Refuses a resume on records of another SentencePiece model than the
  checkpoint's (TokenizerMismatchError); with `allow_mismatch` a warning,
  and `prepare` puts the records' model in. Returns True on a mismatch."""
  ours, trained_with = _sentencepiece_of(model_dir)
  records_sha, meta_path, named = records_sentencepiece(data_config)
  if not ours or not records_sha or ours == records_sha:
    return False
  message = (
      f"the records were made with another SentencePiece model than this "
      f"run: {meta_path} records sha256 {records_sha}"
      f"{f' ({named})' if named else ''}, but {trained_with} (the model the "
      f"checkpoint was trained with) has sha256 {ours}.")
  if not allow_mismatch:
    raise TokenizerMismatchError(
        message + " Use records made with that model, or a new --model_dir; "
        "--allow_sentencepiece_mismatch goes on anyway.")
  warn(message + " Going on (--allow_sentencepiece_mismatch)" + (
      f"; {os.path.join(model_dir, checkpoints.SENTENCEPIECE_FILE)} is "
      f"replaced by {named}." if named else "."))
  return True


def prepare(config: cfg.ExperimentConfig, model_dir: str,
            latest: Optional[str]) -> None:
  """The chief's first writes, after every check: removes what a killed
  save left, writes params.yaml (as Model Garden's train.py does), the
  model config and the records' SentencePiece model (or its sha256), and
  names `latest` in the checkpoint index (after a fallback: the checkpoint
  the manager restores)."""
  checkpoints.remove_temporaries(
      [model_dir, os.path.join(model_dir, checkpoints.ENCODER_SUBDIR)])
  train_utils.serialize_config(config, model_dir)
  model_config = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
  if latest is None or not tf.io.gfile.exists(model_config):
    with tf.io.gfile.GFile(model_config, "w") as f:
      f.write(yaml.safe_dump(config.task.model.as_dict(), sort_keys=False))
  sha, _, named = records_sentencepiece(config.task.train_data)
  ours = _sentencepiece_of(model_dir)[0]
  target = os.path.join(model_dir, checkpoints.SENTENCEPIECE_FILE)
  if named and (ours != sha or not tf.io.gfile.exists(target)):
    tf.io.gfile.copy(named, target, overwrite=True)
  recorded = os.path.join(model_dir, checkpoints.SENTENCEPIECE_SHA256_FILE)
  if sha and (ours != sha or not tf.io.gfile.exists(recorded)):
    with tf.io.gfile.GFile(recorded, "w") as f:
      f.write(sha + "\n")
  if latest:
    checkpoints.name_as_latest(model_dir, latest)

"""A pre-training model_dir: what a run writes there and the checks before
its first step (one line each, nothing written).

Builds on Model Garden's `CheckpointManager` layout (`ckpt-N`, the
`checkpoint` index) and `rembert_tf.checkpoints.checkpoint_layout`. Beside
the trainer's checkpoints a run writes `params.yaml` (when it starts), and
after a save `model_config.yaml`, `encoder/ckpt-N` (every
`trainer.encoder_export_every_n_checkpoints`-th save and the last) and the
records' `sentencepiece.model` or `sentencepiece.sha256` (`ArtifactWriter`).
The checks refuse a model_dir that is an input or not writable (`check`),
`--mode eval` without a checkpoint (`resume_checkpoint`), a checkpoint of
another model (`check_checkpoint_compatible`) and a resume on records of
another SentencePiece model (`check_sentencepiece_matches`);
`finished_checkpoint` tells a complete job.

Example:
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from rembert_tf.pretraining import model_directory
model_directory.check(config, "/tmp/pretrain", "train_and_eval")
writer = model_directory.ArtifactWriter(config, "/tmp/pretrain",
                                        trainer.model.encoder, is_chief=True)
writer(step=100)              # after ckpt-100: model_config.yaml, encoder/ckpt-100
writer(step=300, final=True)  # the last save: always exported
```
"""
import collections
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf
import tf_keras
from official.core import base_trainer
from official.core import config_definitions as cfg

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.pretraining import synthetic_data

PARAMS_FILE = "params.yaml"
_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# How many names of a kind a checkpoint mismatch lists before "(+N more)".
_LISTED_VARIABLES = 8


# ---------------------------------------------------------------------------
# What a run wrote.
def holds_a_run(model_dir: str) -> bool:
  """Whether a run got past its checks in model_dir (it wrote params.yaml)."""
  try:
    return fileio.exists(fileio.join(model_dir, PARAMS_FILE))
  except (OSError, tf.errors.OpError):
    return False


def exported_step(model_dir: str) -> Optional[int]:
  """The step of model_dir's newest complete encoder export (None: none)."""
  latest = tf.train.latest_checkpoint(
      fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR))
  return int(latest.rsplit("-", 1)[1]) if latest else None


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


def resume_checkpoint(model_dir: str, mode: str,
                      report: Callable[[str], None]) -> Optional[str]:
  """model_dir's newest intact checkpoint, the one a run starts from (a
  fallback past a broken one is reported); None without one, which
  `--mode eval` refuses."""
  latest = checkpoint_layout.latest_checkpoint(model_dir, report=report)
  if mode == "eval" and latest is None:
    raise pretraining_errors.PretrainingError(
        f"--mode eval: --model_dir {model_dir} holds no checkpoint to evaluate "
        "(expected ckpt-N files and a `checkpoint` index). Train first, or "
        "point --model_dir at a pre-training run.")
  return latest


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
  if (exported_step(model_dir) != checkpoint_step(latest)
      or not fileio.exists(fileio.join(model_dir,
                                       checkpoint_layout.MODEL_CONFIG_FILE))
      or _model_config_differences(model_dir, config.task.model)):
    return None  # the run goes on: it exports, or names the mismatch
  return latest


# ---------------------------------------------------------------------------
# Before the first step.
def check(config: cfg.ExperimentConfig, model_dir: str, mode: str) -> None:
  """Refuses a model_dir that is one of the run's inputs, or not writable.

  A directory holding checkpoints that no training run wrote (no
  params.yaml: a converted checkpoint directory, an export) is an input: a
  run there would train from scratch and its `max_to_keep` would delete
  them. So is a model_dir that is, holds or lies inside the init
  checkpoint or the records (`outputs.refuse_overlap`, on real paths). The
  records are the input pipeline's `record_files`: an empty input_path or
  a glob matching nothing is refused at once, before the strategy is made.
  """
  if not holds_a_run(model_dir):
    found = [fileio.join(model_dir, name) for name in (
        checkpoint_layout.ENCODER_SUBDIR, checkpoint_layout.PRETRAINER_SUBDIR,
        checkpoint_layout.SAVED_MODEL_FILE, "checkpoint")
             if fileio.exists(fileio.join(model_dir, name))]
    if found:
      raise pretraining_errors.PretrainingError(
          f"--model_dir {model_dir} holds a checkpoint no training run wrote "
          f"({found[0]}; no {PARAMS_FILE}): it is an input, and "
          "training there would replace it. Start from it with "
          f"--params_override task.init_checkpoint={model_dir} and give "
          "another --model_dir.")
  inputs = {"task.init_checkpoint": config.task.init_checkpoint or None}
  for field, data in experiments.data_sections(config, mode):
    if data.input_path != synthetic_data.SYNTHETIC_INPUT_PATH:
      for path in pretraining_input_pipeline.record_files(data, field):
        inputs[f"{field}.input_path ({path})"] = path
  outputs.refuse_overlap(model_dir, inputs, "--model_dir")
  try:
    fileio.makedirs(model_dir)
    probe = fileio.join(model_dir, f".write_probe-{os.getpid()}")
    fileio.write_text(probe, "ok")
    fileio.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise pretraining_errors.PretrainingError(
        f"--model_dir {model_dir} is not writable ({errors.one_line(e)}). "
        "Choose a directory you can create and write to.") from None


def _escape(name: str) -> str:
  return name.replace(".", "..").replace("/", ".S")


def expected_checkpoint_variables(checkpoint: tf.train.Checkpoint,
                                  model: tf_keras.Model) -> Dict[str, List[int]]:
  """Checkpoint keys -> shapes of the model's variables in `checkpoint`.

  A key is the names on the first path to the variable in a breadth-first
  walk from the root, the walk `tf.train.Checkpoint` names its keys by.
  """
  paths, queue = {id(checkpoint): ()}, collections.deque([checkpoint])
  while queue:
    node = queue.popleft()
    for name, child in tf.train.TrackableView.children(node).items():
      if id(child) not in paths:
        paths[id(child)] = paths[id(node)] + (_escape(name),)
        queue.append(child)
  return {"/".join(paths[id(v)]) + _VARIABLE_SUFFIX: list(v.shape)
          for v in model.variables if id(v) in paths}


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


def _variable_differences(latest: str, trainer: base_trainer.Trainer
                          ) -> List[str]:
  expected = expected_checkpoint_variables(trainer.checkpoint, trainer.model)
  roots = {k.split("/")[0] for k in expected}
  # The model's variables in the checkpoint (optimizer slots left out).
  in_checkpoint = {
      name: shape for name, shape in
      checkpoint_reader(latest).get_variable_to_shape_map().items()
      if name.endswith(_VARIABLE_SUFFIX)
      and ".OPTIMIZER_SLOT" not in name and name.split("/")[0] in roots}
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
                                ) -> None:
  """Refuses a model_dir whose checkpoint is of another model (nothing
  written)."""
  latest = checkpoint_layout.latest_checkpoint(model_dir)
  if latest is None:
    return
  problems = (_model_config_differences(model_dir, model_config) +
              _variable_differences(latest, trainer))
  if problems:
    raise pretraining_errors.CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({fileio.join(model_dir, PARAMS_FILE)}).")


# ---------------------------------------------------------------------------
# The records' SentencePiece model, which model_dir keeps.
def records_sentencepiece(data_config
                          ) -> Tuple[Optional[str], Optional[str], Optional[str]]:
  """(sha256, metadata.json path, model path) of the SentencePiece model the
  records' metadata.json names, or Nones. The model path is a file that
  exists and, when the metadata records the model's sha256, of that content
  (another file at the same path is not the records' model); without a
  recorded sha256, the sha256 is the found model's."""
  if data_config.input_path in ("", synthetic_data.SYNTHETIC_INPUT_PATH):
    return None, None, None
  files = pretraining_input_pipeline.input_files(data_config.input_path)
  meta_path = files and fileio.join(fileio.dirname(files[0]), "metadata.json")
  if not meta_path or not fileio.exists(meta_path):
    return None, None, None
  meta = fileio.read_json(meta_path)
  tok = meta.get("tokenizer") if isinstance(meta.get("tokenizer"), dict) else {}
  recorded = meta.get("sentencepiece_sha256") or tok.get("sha256") or None
  # The data tool names the model under `tokenizer`; top level: other tools.
  named_models = [m for m in (meta.get("sentencepiece_model"),
                              tok.get("sentencepiece_model"))
                  if isinstance(m, str)]
  for named in named_models:
    # A relative name is relative to where the data tool ran, or else to the
    # records' folder.
    paths = [named]
    if not fileio.is_remote(named) and not os.path.isabs(named):
      paths.append(fileio.join(fileio.dirname(meta_path), named))
    for path in paths:
      if fileio.exists(path) and (recorded is None
                                  or fileio.sha256(path) == recorded):
        return recorded or fileio.sha256(path), meta_path, path
  return recorded, meta_path, None


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
  records_sha, meta_path, named = records_sentencepiece(data_config)
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


# ---------------------------------------------------------------------------
# Writing.
def prepare(config: cfg.ExperimentConfig, model_dir: str,
            latest: Optional[str]) -> None:
  """The chief's first writes, after every check: removes what a killed save
  left, writes params.yaml and names `latest` in the checkpoint index
  (after a fallback: the checkpoint the manager restores)."""
  remove_temporaries(model_dir)
  fileio.write_yaml(fileio.join(model_dir, PARAMS_FILE), config.as_dict())
  if latest:
    checkpoint_layout.name_as_latest(model_dir, latest)


def remove_temporaries(model_dir: str) -> List[str]:
  """Removes what a save that failed or was killed left (`ckpt-N_temp` in
  model_dir and `encoder/`, temporaries of params.yaml); returns the paths."""
  removed = checkpoint_layout.remove_temporaries(
      [model_dir, fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR)])
  removed += outputs.remove_stale_temporaries(
      fileio.join(model_dir, PARAMS_FILE), lock_of=model_dir)
  return removed


class ArtifactWriter:
  """After each save: model_config.yaml, encoder/ckpt-N, and the records'
  SentencePiece model (or its sha256).

  Built on every worker (the encoder export is a collective under
  MultiWorkerMirroredStrategy); workers other than the chief write into a
  temporary local directory that `close` deletes. Whether a step is
  exported is decided from what every worker sees alike (model_dir's export
  when the run started, the calls so far), never from a worker's own
  directory, so all of them join the same exports.

  With `trainer.enable_async_checkpointing` the encoder export is written in
  the background like the full checkpoint, but for the final one; `wait`
  returns once it is complete.
  """

  def __init__(self, config: cfg.ExperimentConfig, model_dir: str,
               encoder: tf_keras.Model, is_chief: bool):
    self._config = config
    self._model_dir = model_dir
    self._is_chief = is_chief
    self._spm_sha256, _, self._spm_path = records_sentencepiece(
        config.task.train_data)
    self._export_dir = model_dir if is_chief else tempfile.mkdtemp(
        prefix="rembert_tf-worker-export-")
    self._exported_steps = {exported_step(model_dir)}
    self.encoder_writer = checkpoint_layout.EncoderExportWriter(
        encoder, self._export_dir, max_to_keep=config.trainer.max_to_keep,
        every_n_saves=getattr(config.trainer,
                              "encoder_export_every_n_checkpoints", 1),
        options=tf.train.CheckpointOptions(
            enable_async=config.trainer.enable_async_checkpointing))

  def __call__(self, step: int, final: bool = False):
    if step not in self._exported_steps:
      # The final export (the last save, a preemption save) is written
      # before the call returns: the run ends right after it.
      if self.encoder_writer.save(step, final=final, options=(
          tf.train.CheckpointOptions() if final else None)) is not None:
        self._exported_steps.add(step)
    if not self._is_chief:
      return
    config_path = fileio.join(self._model_dir, checkpoint_layout.MODEL_CONFIG_FILE)
    if not fileio.exists(config_path):
      rembert_config.save_model_config(self._config.task.model, config_path)
    spm_target = fileio.join(self._model_dir, checkpoint_layout.SENTENCEPIECE_FILE)
    if self._spm_path and not fileio.exists(spm_target):
      fileio.copy(self._spm_path, spm_target)
    sha_target = fileio.join(self._model_dir,
                             checkpoint_layout.SENTENCEPIECE_SHA256_FILE)
    if self._spm_sha256 and not fileio.exists(sha_target):
      fileio.write_text(sha_target, self._spm_sha256 + "\n")

  def wait(self):
    """Returns once every export started so far is written (raises a failed one's error)."""
    checkpoint_layout.wait_for_writes(self.encoder_writer.checkpoint)

  def close(self):
    if not self._is_chief:
      fileio.rmtree(self._export_dir)

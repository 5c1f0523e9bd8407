"""Runs a pre-training experiment in a model_dir: the library behind `rembert-train`.

Builds on Model Garden's `train_lib.OrbitExperimentRunner` (orbit's
Controller over `base_trainer.Trainer`, and its checkpoint manager),
`rembert_tf.runtime` and `checkpoints.checkpoint_integrity`. A run starts
from model_dir's newest intact checkpoint. Before it writes anything it
refuses, one line each: a model_dir that is one of its inputs or cannot be
written, a checkpoint of another model, a resume on records of another
SentencePiece model. The chief then writes `params.yaml`,
`model_config.yaml` and the records' `sentencepiece.model` (or its sha256),
and the run trains and/or evaluates with these orbit train actions, in
order: a NaN / inf loss stops before its weights are saved (exit code 3);
the console line; a save at each multiple of trainer.checkpoint_interval,
then the encoder export `encoder/ckpt-N` of the same weights (every n-th
save and the last); the SIGTERM stop (exit code 42).

Example:
<!-- snippet: not run: pre-trains the demo model (minutes on a CPU) and needs its records -->
```python
from rembert_tf.pretraining import experiments, runner
config = experiments.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"],
    "task.train_data.input_path=/tmp/run/records/train/*.tfrecord,"
    "task.validation_data.input_path=/tmp/run/records/eval/*.tfrecord")
metrics = runner.run(config, "/tmp/run/pretrain", mode="train_and_eval")
metrics["eval_masked_lm_accuracy"], metrics["global_step"]
```
"""
import contextlib
import os
import tempfile
import time
from typing import Any, Callable, Dict, Optional, Union

import numpy as np
import orbit
import tensorflow as tf
import yaml
from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils

from rembert_tf.checkpoints import checkpoint_integrity as checkpoints
from rembert_tf.common import errors
from rembert_tf.common import output_lock
from rembert_tf.common import output_overlap
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.pretraining import run_failures
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies

MODES = ("train", "eval", "train_and_eval", "continuous_eval")
PARAMS_FILE = "params.yaml"
PretrainingError = run_failures.PretrainingError


class CheckpointMismatchError(PretrainingError):
  """model_dir holds a checkpoint of a different model."""


def run(experiment_config: cfg.ExperimentConfig, model_dir: str,
        mode: str = "train",
        strategy: Union[str, tf.distribute.Strategy, None] = None,
        tpu: Optional[str] = None, mixed_precision: Optional[str] = None,
        deterministic: bool = False, seed: Optional[int] = None,
        allow_sentencepiece_mismatch: bool = False,
        print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
  """Pre-trains and/or evaluates `experiment_config` in `model_dir`.

  `mode` is one of MODES; `strategy` (a name or a tf.distribute.Strategy),
  `tpu` and `mixed_precision` override the experiment's runtime fields;
  `deterministic` makes a resumed run end with the weights of an
  uninterrupted one (with dropout 0).

  Returns:
    global_step, checkpoint (the newest complete one), model_dir; train_loss,
    train_masked_lm_accuracy, train_examples_per_second (last loop); eval_loss,
    eval_masked_lm_accuracy (over all eval predictions; eval modes).
  """
  config = _resolved_config(experiment_config, mode, mixed_precision)
  model_dir = os.fspath(model_dir).rstrip("/")
  latest = checkpoints.latest_checkpoint(model_dir, report=print_fn)
  if "train" in mode and _is_complete(config, model_dir, latest):
    step = checkpoints.step_of(latest)
    if mode != "train_and_eval":  # nothing built, nothing written
      print_fn(f"the job is complete: {latest} is at step {step} "
               f"(trainer.train_steps={config.trainer.train_steps}); nothing "
               "to do. Raise trainer.train_steps to train further.")
      return {"global_step": step, "model_dir": model_dir,
              "checkpoint": latest}
    print_fn(f"the job is complete: {latest} is at step {step}; "
             "evaluating it (as --mode eval).")
    mode = "eval"
    config = _resolved_config(experiment_config, mode, mixed_precision)
  _refuse_inputs(config, model_dir, mode, latest)
  if not isinstance(strategy, tf.distribute.Strategy):
    strategy = strategies.make_strategy(
        strategy or config.runtime.distribution_strategy,
        tpu or config.runtime.tpu)
  _make_writable(model_dir)  # after the strategy could start
  writes_run = strategies.is_chief(strategy) and mode != "continuous_eval"
  lock = (output_lock.writing_output(model_dir) if writes_run  # one writer
          else contextlib.nullcontext())  # the others write temporaries
  with lock, \
      process_settings.training_settings(config.runtime.mixed_precision_dtype,
                                         deterministic=deterministic,
                                         seed=seed):
    try:
      return _run(config, model_dir, latest, mode, strategy,
                  allow_sentencepiece_mismatch, print_fn)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise run_failures.records_error(config, mode, e) from None


def _resolved_config(experiment_config: cfg.ExperimentConfig, mode: str,
                     mixed_precision: Optional[str]) -> cfg.ExperimentConfig:
  """A copy of the config with the command's choices applied."""
  if mode not in MODES:
    raise PretrainingError(
        f"--mode {mode!r}: expected one of {', '.join(MODES)}.")
  config = experiment_config.replace()  # never mutate the caller's config
  precision = mixed_precision or config.runtime.mixed_precision_dtype
  if precision not in process_settings.POLICIES:  # float16 needs loss scaling
    raise PretrainingError(
        f"runtime.mixed_precision_dtype {precision!r}: expected float32 or "
        "bfloat16 (--mixed_precision mixed_bfloat16); the pre-training task "
        "does not implement float16's loss scaling.")
  config.runtime.mixed_precision_dtype = {  # Model Garden's name
      "mixed_bfloat16": "bfloat16"}.get(precision, precision)
  # The task compiles forward+backward itself, without the all-reduce.
  config.runtime.enable_xla = False
  # runtime.preemption saves and stops; Model Garden's save goes on training.
  config.trainer.preemption_on_demand_checkpoint = False
  return config


# --- model_dir: what a run checks and writes there ---------------------------
def holds_a_run(model_dir: str) -> bool:
  """Whether a run got past its checks in model_dir (it wrote params.yaml)."""
  try:
    return tf.io.gfile.exists(os.path.join(model_dir, PARAMS_FILE))
  except tf.errors.OpError:
    return False


def _is_complete(config: cfg.ExperimentConfig, model_dir: str,
                 latest: Optional[str]) -> bool:
  """Whether model_dir's newest checkpoint is at train_steps, exported, of
  this model: read from model_dir alone, so every worker decides alike."""
  exported = tf.train.latest_checkpoint(
      os.path.join(model_dir, checkpoints.ENCODER_SUBDIR))
  return bool(
      latest and exported
      and checkpoints.step_of(latest) >= config.trainer.train_steps
      and checkpoints.step_of(exported) == checkpoints.step_of(latest)
      and tf.io.gfile.exists(os.path.join(model_dir,
                                          checkpoints.MODEL_CONFIG_FILE))
      and not _model_config_differences(model_dir, config.task.model))


def _refuse_inputs(config: cfg.ExperimentConfig, model_dir: str, mode: str,
                   latest: Optional[str]) -> None:
  """Refuses `--mode eval` without a checkpoint, and a model_dir that is an
  input of the run: checkpoints no training run wrote (no params.yaml), the
  init checkpoint or the records (before the strategy is made)."""
  if mode == "eval" and latest is None:
    raise PretrainingError(
        f"--mode eval: --model_dir {model_dir} holds no checkpoint to evaluate "
        "(expected ckpt-N files and a `checkpoint` index). Train first, or "
        "point --model_dir at a pre-training run.")
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
  output_overlap.refuse_overlap(model_dir, inputs, "--model_dir")


def _make_writable(model_dir: str) -> None:
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
                              ) -> Optional[str]:
  """The fields in which model_dir's model_config.yaml differs, or None."""
  path = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    saved = yaml.safe_load(f) or {}
  saved = dict(rembert_config.RemBertConfig().as_dict(),
               **saved.get("model", saved))
  diffs = [f"{k}: {saved[k]!r} in model_dir, {v!r} now"
           for k, v in model_config.as_dict().items() if saved[k] != v]
  return "model config fields differ: " + "; ".join(diffs) if diffs else None


def _check_compatible(model_dir: str, latest: str, trainer,
                      model_config: rembert_config.RemBertConfig) -> None:
  """Refuses a checkpoint of another model, naming what differs."""
  problems = [p for p in (
      _model_config_differences(model_dir, model_config),
      *run_failures.variable_differences(latest, trainer)) if p]
  if problems:
    raise CheckpointMismatchError(
        f"--model_dir {model_dir} holds a checkpoint of a different model "
        f"({latest}); refusing to resume or overwrite it. " +
        " | ".join(problems) +
        ". Use a new --model_dir, or the config this directory was trained "
        f"with ({os.path.join(model_dir, PARAMS_FILE)}).")


def _prepare(config: cfg.ExperimentConfig, model_dir: str,
             latest: Optional[str]) -> None:
  """The chief's first writes, after every check: removes what a killed
  save left; writes params.yaml, the model config, the records'
  SentencePiece model (or its sha256); names `latest` in the checkpoint
  index (the one the manager restores after a fallback)."""
  checkpoints.remove_temporaries(
      [model_dir, os.path.join(model_dir, checkpoints.ENCODER_SUBDIR)])
  train_utils.serialize_config(config, model_dir)
  model_config = os.path.join(model_dir, checkpoints.MODEL_CONFIG_FILE)
  if latest is None or not tf.io.gfile.exists(model_config):
    with tf.io.gfile.GFile(model_config, "w") as f:
      f.write(yaml.safe_dump(config.task.model.as_dict(), sort_keys=False))
  sha, _, named = masked_lm_task.records_sentencepiece(config.task.train_data)
  ours = run_failures.sentencepiece_of(model_dir)[0]
  target = os.path.join(model_dir, checkpoints.SENTENCEPIECE_FILE)
  if named and (ours != sha or not tf.io.gfile.exists(target)):
    tf.io.gfile.copy(named, target, overwrite=True)
  recorded = os.path.join(model_dir, checkpoints.SENTENCEPIECE_SHA256_FILE)
  if sha and (ours != sha or not tf.io.gfile.exists(recorded)):
    with tf.io.gfile.GFile(recorded, "w") as f:
      f.write(sha + "\n")
  if latest:
    checkpoints.name_as_latest(model_dir, latest)


# --- The run ------------------------------------------------------------------
class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's trainer with examples/s in its loop logs; on a worker
  (whose manager Model Garden puts in an empty temporary directory)
  `initialize` restores the chief's newest checkpoint."""

  model_dir: Optional[str] = None

  def initialize(self):
    latest = (self.model_dir and not self.strategy.extended.should_checkpoint
              and tf.train.latest_checkpoint(self.model_dir))
    if latest:
      self.checkpoint.restore(latest)
    else:
      super().initialize()

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_start = (time.time(), int(self.global_step.numpy()))

  def train_loop_end(self):
    logs = {k: float(np.asarray(v)) for k, v in super().train_loop_end().items()}
    started, first_step = self._loop_start
    logs["examples_per_second"] = (
        (int(self.global_step.numpy()) - first_step)
        * self.config.task.train_data.global_batch_size
        / max(time.time() - started, 1e-9))
    return logs


def _run(config: cfg.ExperimentConfig, model_dir: str, latest: Optional[str],
         mode: str, strategy: tf.distribute.Strategy,
         allow_sentencepiece_mismatch: bool,
         print_fn: Callable[[str], None]) -> Dict[str, Any]:
  """The named steps of a run under `strategy`, after the first checks."""
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  if latest is not None:  # the data starts at the step resumed
    task.initial_train_step = checkpoints.step_of(latest)
  with strategy.scope():
    trainer = train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)
  trainer.model_dir = model_dir
  if latest is not None:
    _check_compatible(model_dir, latest, trainer, config.task.model)
    if "train" in mode:  # the records' tokenizer too
      run_failures.check_sentencepiece(
          model_dir, config.task.train_data, allow_sentencepiece_mismatch,
          print_fn)
  run_failures.check_async_checkpointing(
      config, strategies.is_multi_worker(strategy))
  if strategies.is_chief(strategy) and mode != "continuous_eval":
    _prepare(config, model_dir, latest)  # the first writes
  saves = _Saves(config, trainer, model_dir, strategy)
  with preemption.sigterm_stop_flag() as stop, \
      orbit_loop.orbit_prints_to_log(print_fn) as say:
    try:
      experiment, progress, evaluation = _experiment(
          config, task, trainer, mode, saves, stop, say)
      if latest and "train" in mode:
        say(f"resumed from {latest} at step {int(trainer.global_step.numpy())}")
      try:
        experiment.run()
      except tf.errors.OpError as e:
        if not (strategies.is_multi_worker(strategy)
                and run_failures.is_peer_failure(e)):
          raise
        raise run_failures.LostPeerError.from_error(
            e, strategy.cluster_resolver,
            tf.train.latest_checkpoint(model_dir)) from None
      final = saves.final() if "train" in mode else None
    finally:
      saves.close()
  metrics = {"global_step": int(trainer.global_step.numpy()),
             "model_dir": model_dir,
             "checkpoint": final or tf.train.latest_checkpoint(model_dir)}
  if progress.last_logs:
    metrics.update(
        train_loss=progress.last_logs.get("training_loss"),
        train_masked_lm_accuracy=progress.last_logs.get("masked_lm_accuracy"),
        train_examples_per_second=progress.last_logs.get("examples_per_second"))
  if evaluation:
    metrics.update(eval_loss=evaluation.get("lm_example_loss"),
                   eval_masked_lm_accuracy=evaluation.get("masked_lm_accuracy"))
  return metrics


class _Saves(orbit_loop.Checkpoints):
  """The save action: the full checkpoint, then the encoder export of the
  same weights every n-th save and on the final one; a failed write is one
  line naming the newest complete checkpoint, its partial files removed.
  Every worker exports (a collective), all but the chief into a temporary
  directory."""

  def __init__(self, config: cfg.ExperimentConfig, trainer, model_dir: str,
               strategy: tf.distribute.Strategy):
    super().__init__(config.trainer.checkpoint_interval,
                     config.trainer.enable_async_checkpointing)
    self.model_dir, self.strategy = model_dir, strategy
    self._every_n = config.trainer.encoder_export_every_n_checkpoints
    self._export_dir = model_dir if strategies.is_chief(strategy) else (
        tempfile.mkdtemp(prefix="rembert_tf-worker-export-"))
    self.export = tf.train.CheckpointManager(
        tf.train.Checkpoint(encoder=trainer.model.encoder),
        os.path.join(self._export_dir, checkpoints.ENCODER_SUBDIR),
        max_to_keep=config.trainer.max_to_keep)
    exported = tf.train.latest_checkpoint(
        os.path.join(model_dir, checkpoints.ENCODER_SUBDIR))
    self._exported = {exported and checkpoints.step_of(exported)}
    self._saves = 0

  def after_save(self, step: int, final: bool) -> None:
    self._saves += 1
    due = final or self._saves % self._every_n == 0
    if step in self._exported or not due:
      return
    if final:
      checkpoints.wait_for_writes(self.export.checkpoint)
    self.export.save(checkpoint_number=step, options=tf.train.CheckpointOptions(
        enable_async=self.asynchronous and not final))
    self._exported.add(step)

  def failure(self, step: int, error: Exception) -> Exception:
    if strategies.is_multi_worker(self.strategy) and (
        run_failures.is_peer_failure(error)):
      return error  # the runner names the lost peer
    self.finish_writes()  # their temporaries are no longer written
    removed = checkpoints.remove_temporaries(
        [self.manager.directory, self.export.directory])
    return PretrainingError(
        f"writing the checkpoint of step {step} to {self.model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{tf.train.latest_checkpoint(self.model_dir) or '(none yet)'}. Free "
        "disk space or fix the permissions, then run the same command again: "
        "it resumes from there.")

  def final(self) -> str:
    """The last save; its path in model_dir (also on a worker)."""
    return os.path.join(self.model_dir, os.path.basename(self.save(final=True)))

  def finish_writes(self) -> None:
    orbit_loop.finish_writes(self.export.checkpoint, *(
        [self.manager.checkpoint] if self.manager else []))

  def close(self) -> None:
    """Waits for the writes in flight; a worker's copies go."""
    self.finish_writes()
    if self._export_dir != self.model_dir:
      for copies in (self._export_dir, self.manager and self.manager.directory):
        if copies:  # Model Garden's runner saved a worker's in a temp dir
          tf.io.gfile.rmtree(copies)


def _experiment(config: cfg.ExperimentConfig, task, trainer, mode: str,
                saves: _Saves, stop, say: Callable[[str], None]):
  """Model Garden's runner, its loops cut into device calls, with the train
  actions; `saves` saves, so its manager gets no interval. Returns it, the
  progress printer and the last evaluation's metrics (filled in later)."""
  global_step, evaluation = trainer.global_step, {}
  progress = orbit_loop.ProgressPrinter(
      global_step, config.trainer.train_steps, say,
      accuracy_key="masked_lm_accuracy", accuracy_name="mlm_acc",
      steps_per_loop=config.trainer.steps_per_loop)

  def print_evaluation(output) -> None:
    evaluation.clear()
    evaluation.update({k: float(np.asarray(v)) for k, v in output.items()
                       if np.asarray(v).size == 1})
    say(f"eval at step {int(global_step.numpy())} | mlm_loss "
        f"{evaluation.get('lm_example_loss', np.nan):.4f} | mlm_acc "
        f"{evaluation.get('masked_lm_accuracy', np.nan):.4f}")

  def stop_on_nonfinite_loss(output) -> None:
    saves.finish_writes()
    raise run_failures.NonFiniteLossError.at(
        output["training_loss"], global_step,
        tf.train.latest_checkpoint(saves.model_dir))

  actions = []
  if "train" in mode:  # in this order, before Model Garden's own
    actions = [orbit.actions.ConditionalAction(
        lambda output: not np.isfinite(float(np.asarray(
            output.get("training_loss", 0.0)))), stop_on_nonfinite_loss),
               progress, saves, *preemption.stop_actions(
                   saves.strategy, stop, saves.final, global_step)]
  steps = orbit_loop.LoopSteps(
      config.trainer.steps_per_loop, config.trainer.checkpoint_interval,
      saves.strategy, seconds=config.trainer.stop_check_seconds,
      fixed_steps=config.trainer.stop_check_steps)
  experiment = train_lib.OrbitExperimentRunner(
      distribution_strategy=saves.strategy, task=task, mode=mode,
      params=config.replace(trainer={"checkpoint_interval": 0}),
      model_dir=saves.model_dir, trainer=trainer, train_actions=actions,
      eval_actions=[print_evaluation],
      controller_cls=orbit_loop.controller_with_steps(steps))
  saves.attach(experiment.checkpoint_manager, global_step)
  return experiment, progress, evaluation

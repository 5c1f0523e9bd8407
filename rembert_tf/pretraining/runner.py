"""Runs a pre-training experiment: the library behind `rembert-train`.

Builds on Model Garden's `train_lib.OrbitExperimentRunner` (orbit's
Controller over `base_trainer.Trainer`, and its checkpoint manager) and
`rembert_tf.runtime`. After model_dir's checks (`model_directory`) a run
trains and/or evaluates with these orbit train actions, in order: a NaN /
inf loss stops before its weights are saved (exit code 3); the console
line; a save at each multiple of trainer.checkpoint_interval, then the
encoder export `encoder/ckpt-N` of the same weights (every n-th save and
the last); the SIGTERM stop (exit code 42). A corrupted record shard, a lost
worker and a failed save are one line each.

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
import os
import re
import tempfile
import time
from typing import Any, Callable, Dict, Optional, Union

import numpy as np
import orbit
import tensorflow as tf
from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils

from rembert_tf.checkpoints import checkpoint_integrity as checkpoints
from rembert_tf.common import errors
from rembert_tf.common import output_lock
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import model_directory
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies

MODES = ("train", "eval", "train_and_eval", "continuous_eval")
PretrainingError = model_directory.PretrainingError
# What the text of a failed collective or coordination-service call of a
# multi-worker run names (a storage error of the same type names none).
_PEER_MARKERS = ("collective", "coordination", "heartbeat", "/job:")
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


class CorruptRecordsError(PretrainingError):
  """A record shard is corrupted or truncated."""


class NonFiniteLossError(errors.RemBertError, RuntimeError):
  """The training loss became NaN or inf; the last good checkpoint is kept."""

  exit_code = errors.EXIT_NON_FINITE_LOSS


class LostPeerError(errors.RemBertError, RuntimeError):
  """Another worker of a multi-worker job is gone; this one stopped."""

  @classmethod
  def from_error(cls, error: BaseException, resolver,
                 newest_checkpoint: Optional[str]) -> "LostPeerError":
    """Names the peer the error names (else the others of the cluster)."""
    spec = resolver.cluster_spec().as_dict()
    own = (resolver.task_type, int(resolver.task_id))
    named = [(job, int(task)) for job, task in _TASK_NAME.findall(str(error))]
    peers = [t for t in dict.fromkeys(named) if t != own] or [
        (job, index) for job in sorted(spec) for index in range(len(spec[job]))
        if (job, index) != own]
    cause = re.sub(r"\{\{function_node [^}]*\}\}\s*", "",
                   errors.one_line(error)).split("aborted by: ", 1)[-1]
    return cls(
        "lost contact with " + " or ".join(
            f"{job} {index} ({spec[job][index]})" for job, index in peers) +
        f": this worker stopped ({cause[:160]}). The newest complete "
        f"checkpoint is {newest_checkpoint or '(none yet)'}. Restart every "
        "worker with the same command: the job resumes from there.")


def is_peer_failure(error: BaseException) -> bool:
  """Whether an error is what TensorFlow raises when a peer is gone."""
  return isinstance(error, (
      tf.errors.UnavailableError, tf.errors.AbortedError,
      tf.errors.DeadlineExceededError, tf.errors.CancelledError)) and any(
          marker in str(error).lower() for marker in _PEER_MARKERS)


class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's trainer with wall-clock examples/s in its loop logs.

  Model Garden's runner gives a worker other than the chief a checkpoint
  manager on an empty temporary directory (every worker must join a save),
  whose `init_fn` is this trainer's `initialize`: here it restores the
  chief's newest checkpoint, as the chief does, so their variables match.
  """

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


def run(experiment_config: cfg.ExperimentConfig, model_dir: str,
        mode: str = "train",
        strategy: Union[str, tf.distribute.Strategy, None] = None,
        tpu: Optional[str] = None, mixed_precision: Optional[str] = None,
        deterministic: bool = False, seed: Optional[int] = None,
        allow_sentencepiece_mismatch: bool = False,
        print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
  """Pre-trains and/or evaluates `experiment_config` (from
  `experiments.load_experiment_config`) in `model_dir` (any TensorFlow
  filesystem), resuming from its newest checkpoint.

  `mode` is one of MODES, as in Model Garden ("continuous_eval": beside a
  live trainer); `strategy` a name of `runtime.strategies.STRATEGIES` or a
  tf.distribute.Strategy, `tpu` a TPU name for "tpu"; `mixed_precision`
  ("float32", "mixed_bfloat16") overrides runtime.mixed_precision_dtype;
  `deterministic` makes a resumed run end with the weights of an
  uninterrupted one (with dropout 0); the console lines go to `print_fn`.

  Returns:
    global_step, checkpoint (the newest complete one), model_dir; train_loss,
    train_masked_lm_accuracy, train_examples_per_second (last loop); eval_loss,
    eval_masked_lm_accuracy (over all eval predictions; eval modes).
  """
  config = _resolved_config(experiment_config, mode, mixed_precision)
  model_dir = os.fspath(model_dir).rstrip("/")
  finished = model_directory.finished_checkpoint(config, model_dir, mode)
  if finished:
    step = model_directory.checkpoint_step(finished)
    if mode != "train_and_eval":  # nothing built, nothing written
      print_fn(f"the job is complete: {finished} is at step {step} "
               f"(trainer.train_steps={config.trainer.train_steps}); nothing "
               "to do. Raise trainer.train_steps to train further.")
      return {"global_step": step, "model_dir": model_dir,
              "checkpoint": finished}
    print_fn(f"the job is complete: {finished} is at step {step}; "
             "evaluating it (as --mode eval).")
    mode = "eval"
    config = _resolved_config(experiment_config, mode, mixed_precision)
  model_directory.check(config, model_dir, mode)
  if not isinstance(strategy, tf.distribute.Strategy):
    strategy = strategies.make_strategy(
        strategy or strategies.DEFAULT_STRATEGY, tpu)
  model_directory.make_writable(model_dir)  # after the strategy could start
  settings = process_settings.training_settings(  # float16: the task's line
      process_settings.POLICIES.get(config.runtime.mixed_precision_dtype,
                                    "float32"),
      deterministic=deterministic, seed=seed)
  writes_run = strategies.is_chief(strategy) and mode != "continuous_eval"
  with output_lock.writing_shared_output(model_dir, writes_run), settings:
    try:
      return _run(config, model_dir, mode, strategy,
                  allow_sentencepiece_mismatch, print_fn)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise records_error(config, mode, e) from None


def _resolved_config(experiment_config: cfg.ExperimentConfig, mode: str,
                     mixed_precision: Optional[str]) -> cfg.ExperimentConfig:
  """A copy of the config with the command's choices applied, checked."""
  if mode not in MODES:
    raise PretrainingError(
        f"--mode {mode!r}: expected one of {', '.join(MODES)}.")
  config = experiment_config.replace()  # never mutate the caller's config
  if mixed_precision is not None:
    config.runtime.mixed_precision_dtype = {
        "mixed_bfloat16": "bfloat16"}.get(mixed_precision, mixed_precision)
  # The task compiles forward+backward itself; Model Garden's GPU-only
  # whole-step jit would wrap the cross-replica all-reduce as well.
  config.runtime.enable_xla = False
  # The preemption saves are runtime.preemption's (Model Garden's on-demand
  # save goes on training after it).
  config.trainer.preemption_on_demand_checkpoint = False
  config.task.model.validate()
  experiments.check_trainer_config(config.trainer)
  return config


def records_error(config: cfg.ExperimentConfig, mode: str,
                  error: Exception) -> Exception:
  """The one line for records that failed to read mid-run, naming the shard:
  a corrupted one (`DataLossError`), or one of another shape (records
  replaced under the run: a parse error); else `error` itself."""
  for field, data in experiments.data_sections(config, mode):
    if isinstance(error, tf.errors.DataLossError):
      culprit = pretraining_input_pipeline.unreadable_shard(data)
      if culprit:
        return CorruptRecordsError(
            f"{field}.input_path: record shard {culprit} is corrupted or "
            "truncated. Recreate the records (rembert-create-pretraining-data "
            "--overwrite) or copy the shard again, then run the same command: "
            "it resumes from the newest checkpoint.")
    else:
      other = pretraining_input_pipeline.shard_of_other_shape(data)
      if other:
        return PretrainingError(
            f"{field}.input_path: record shard {other}; the records changed "
            "under the run. Put back records of the experiment's shape, then "
            "run the same command: it resumes from the newest checkpoint.")
  return error


def check_async_checkpointing(config: cfg.ExperimentConfig,
                              multi_worker: bool) -> None:
  """Asynchronous checkpoints are written from one host; a multi-worker job
  has every worker join each save."""
  if config.trainer.enable_async_checkpointing and multi_worker:
    raise PretrainingError(
        "trainer.enable_async_checkpointing=true writes checkpoints from one "
        "host; under --strategy multi_worker_mirrored every worker joins each "
        "save. Set trainer.enable_async_checkpointing=false for this job.")


def _run(config: cfg.ExperimentConfig, model_dir: str, mode: str,
         strategy: tf.distribute.Strategy, allow_sentencepiece_mismatch: bool,
         print_fn: Callable[[str], None]) -> Dict[str, Any]:
  """The named steps of a run under `strategy`, after the first checks."""
  latest = model_directory.resume_checkpoint(model_dir, mode, print_fn)
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  if latest is not None:  # the data starts at the step resumed
    task.initial_train_step = model_directory.checkpoint_step(latest)
  with strategy.scope():
    trainer = train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)
  trainer.model_dir = model_dir
  model_directory.check_checkpoint_compatible(model_dir, trainer,
                                              config.task.model)
  if latest is not None and "train" in mode:  # the records' tokenizer too
    model_directory.check_sentencepiece_matches(
        model_dir, config.task.train_data, allow_sentencepiece_mismatch,
        print_fn)
  check_async_checkpointing(config, strategies.is_multi_worker(strategy))
  if strategies.is_chief(strategy) and mode != "continuous_eval":
    model_directory.prepare(config, model_dir, latest)  # the first writes
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
        if not (strategies.is_multi_worker(strategy) and is_peer_failure(e)):
          raise
        raise LostPeerError.from_error(
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
  same weights every n-th save and on the final one (complete when it
  returns); a failed write is one line naming the newest complete
  checkpoint, its partial files removed.

  Every worker exports (a collective under MultiWorkerMirroredStrategy),
  those but the chief into a temporary directory; which steps are exported
  is decided from what every worker sees alike (model_dir's export when the
  run started, the saves so far).
  """

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
    if final:
      checkpoints.wait_for_writes(self.export.checkpoint)

  def failure(self, step: int, error: Exception) -> Exception:
    if strategies.is_multi_worker(self.strategy) and is_peer_failure(error):
      return error  # the runner names the lost peer
    self.finish_writes()  # their temporaries are no longer written
    model_dir = self.model_dir
    removed = checkpoints.remove_temporaries([model_dir, os.path.join(
        model_dir, checkpoints.ENCODER_SUBDIR)])
    return PretrainingError(
        f"writing the checkpoint of step {step} to {model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{tf.train.latest_checkpoint(model_dir) or '(none yet)'}. Free disk "
        "space or fix the permissions, then run the same command again: it "
        "resumes from there.")

  def final(self) -> str:
    """The last save; its path in model_dir, also on a worker that saved a
    copy elsewhere."""
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
  """Model Garden's OrbitExperimentRunner with orbit's Controller, its loops
  cut into device calls (`orbit_loop.LoopSteps`), and the train actions;
  the saves are `saves`', so its checkpoint manager gets no interval (orbit
  saves by itself only with one). Returns it, the progress line and the
  last evaluation's metrics (filled in as the run goes)."""
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
    last = tf.train.latest_checkpoint(saves.model_dir)
    raise NonFiniteLossError(
        f"training loss is {float(np.asarray(output['training_loss']))} at "
        f"step {int(global_step.numpy())}; stopped without saving these "
        f"weights. The last good checkpoint is {last or '(none yet)'}. Lower "
        "the learning rate, raise the warmup, or check the records, then run "
        "again (it resumes from there).")

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
  try:
    experiment = train_lib.OrbitExperimentRunner(
        distribution_strategy=saves.strategy, task=task, mode=mode,
        params=config.replace(trainer={"checkpoint_interval": 0}),
        model_dir=saves.model_dir, trainer=trainer, train_actions=actions,
        eval_actions=[print_evaluation],
        controller_cls=orbit_loop.controller_with_steps(steps))
  except ValueError as e:  # orbit / Model Garden refusing a trainer setting
    raise PretrainingError(
        f"experiment config: {errors.one_line(e)}. Fix the named trainer.* "
        "field in --config_file or --params_override.") from None
  saves.attach(experiment.checkpoint_manager, global_step)
  return experiment, progress, evaluation

"""The pre-training loop: Model Garden's trainer, orbit's controller and
experiment runner, with what a preemptible run on TPU pods adds.

| class | builds on | adds |
| --- | --- | --- |
| `PretrainTrainer` | `runtime.orbit_loop.StopCheckingTrainer` (a stop check between device calls of about a second of steps inside a loop; no per-call host read of the step) | wall-clock examples/s |
| `ExportingController` | `runtime.preemption.PreemptibleController` (`orbit.Controller` that saves then stops on SIGTERM) | artefacts after every save; no partial checkpoint after a failed save; waits for asynchronous writes before a checkpoint is reported, also the SIGTERM save |
| `ExperimentRunner` | `runtime.orbit_loop.ExperimentRunner` (`official.core.train_lib.OrbitExperimentRunner`) | workers other than the chief start from the chief's newest checkpoint |

`rembert_tf.pretraining.runner.run` puts them together.

Example (what `runner.run` does, shortened):
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from official.core import train_utils
from rembert_tf.pretraining import training_loop
trainer = train_utils.create_trainer(config, task, train=True, evaluate=False,
                                     trainer_cls=training_loop.PretrainTrainer)
experiment = training_loop.ExperimentRunner(
    distribution_strategy=strategy, task=task, mode="train", params=config,
    model_dir=model_dir, trainer=trainer,
    controller_cls=lambda **kw: training_loop.ExportingController(
        artifact_writer=writer, stop_flag=stop_flag, model_dir=model_dir, **kw))
experiment.run()
```
"""
import tempfile
import time
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf
from official.core import train_utils

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.pretraining import model_directory
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.checkpoints import async_checkpoints
from rembert_tf.runtime import cluster_failures
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption

class PretrainTrainer(orbit_loop.StopCheckingTrainer):
  """The runtime's trainer (a stop check between device calls of about a
  second), plus wall-clock examples/s in the loop logs (TensorBoard's
  `examples_per_second` and the console line's)."""

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_start_time = time.time()

  def train_loop_end(self):
    logs = super().train_loop_end()
    logs = {k: float(np.asarray(v)) for k, v in logs.items()}
    elapsed = max(time.time() - self._loop_start_time, 1e-9)
    logs["examples_per_second"] = (
        self._steps_in_loop * self.config.task.train_data.global_batch_size
        / elapsed)
    return logs


def create_trainer(config, task, strategy: tf.distribute.Strategy,
                   mode: str = "train") -> PretrainTrainer:
  """Model Garden's trainer of `task` (`train_utils.create_trainer`) as a
  `PretrainTrainer`, its variables under `strategy`; `mode` as the runner's
  (`train`, `eval`, `train_and_eval`)."""
  with strategy.scope():
    return train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)


class ExportingController(preemption.PreemptibleController):
  """orbit.Controller (the runtime's `PreemptibleController`: saves then
  stops on SIGTERM) that writes the fine-tuning artefacts after every save,
  leaves no partial checkpoint when a save fails, and waits for asynchronous
  writes before it reports a checkpoint (the SIGTERM save's included).

  Whether a step is saved is decided from the step alone (the same on every
  worker), never from a worker's own checkpoint directory: under
  MultiWorkerMirroredStrategy every worker must join the same saves.
  """

  def __init__(self, *args,
               artifact_writer: Optional[model_directory.ArtifactWriter] = None,
               model_dir: Optional[str] = None, **kwargs):
    self._artifact_writer = artifact_writer
    self._model_dir = model_dir
    self._last_saved_step = 0
    self._unconfirmed_step = None  # an asynchronous save not yet waited for
    self.final_checkpoint: Optional[str] = None  # set by `save_final`
    super().__init__(*args, **kwargs)
    self._last_saved_step = int(self.global_step.numpy())  # after restore

  def _save_step(self, step: int) -> bool:
    """Saves the checkpoint of `step` unless it exists (restored or saved)."""
    if step == self._last_saved_step:
      return False
    try:
      # orbit's own save (the base class's), without the interval check.
      saved = super().save_on_schedule(check_interval=False)
    except (OSError, tf.errors.OpError) as e:
      raise self._save_failed(self._unconfirmed_step or step, e) from None
    if saved:
      self._last_saved_step = step
      if self.async_checkpointing:
        self._unconfirmed_step = step
    return saved

  def _export(self, step: int, final: bool) -> None:
    if self._artifact_writer is None:
      return
    try:
      self._artifact_writer(step, final)
    except (OSError, tf.errors.OpError) as e:
      raise self._save_failed(step, e) from None

  def wait_for_saves(self) -> None:
    """Returns once every checkpoint and export started so far is complete."""
    try:
      if self.checkpoint_manager is not None:
        async_checkpoints.wait_for_writes(self.checkpoint_manager.checkpoint)
      if self._artifact_writer is not None:
        self._artifact_writer.wait()
    except (OSError, tf.errors.OpError) as e:
      raise self._save_failed(self._unconfirmed_step, e) from None
    self._unconfirmed_step = None

  def save_final(self) -> Optional[str]:
    """Saves the checkpoint of the step reached (unless it exists) and
    exports it, after the writes in flight and before it returns; returns
    the checkpoint.

    As TensorFlow's own preemption save does (`tf.train.Checkpoint` in a
    preemption save context): first every asynchronous write in flight is
    waited for (a failed one is reported with its own step, and nothing
    else writes while the last checkpoint is made), then the last
    checkpoint and its export are written synchronously: the process must
    not exit before they are complete anyway.
    """
    self.wait_for_saves()
    step = int(self.global_step.numpy())
    with self.synchronous_saves():
      self._save_step(step)
      if step != self._last_saved_step:
        return None
      self._export(step, final=True)
    self.wait_for_saves()
    # The chief's path, also on a worker that saved into a directory of its
    # own (whose chief may still be renaming its files).
    written = self.checkpoint_manager.latest_checkpoint or f"ckpt-{step}"
    self.final_checkpoint = (fileio.join(self._model_dir,
                                         fileio.basename(written))
                             if self._model_dir else written)
    return self.final_checkpoint

  def _settle_writes(self) -> None:
    """Waits for every write in flight, whatever its outcome (logged): their
    temporaries are then no longer being written."""
    checkpoints = [self.checkpoint_manager.checkpoint
                   ] if self.checkpoint_manager is not None else []
    if self._artifact_writer is not None:
      checkpoints.append(self._artifact_writer.encoder_writer.checkpoint)
    for checkpoint in checkpoints:
      try:
        async_checkpoints.wait_for_writes(checkpoint)
      except (OSError, tf.errors.OpError) as e:
        logging.warning("a checkpoint write in flight failed too: %s", e)

  def newest_complete_checkpoint(self) -> Optional[str]:
    """model_dir's newest complete checkpoint, what a restart resumes from
    (a save in flight is not in model_dir's index yet)."""
    if self._model_dir:
      return tf.train.latest_checkpoint(self._model_dir)
    return self.checkpoint_manager.latest_checkpoint

  def _save_failed(self, step, error) -> Exception:
    if cluster_failures.is_lost_peer(error, self.strategy):
      return error  # the runner names the lost peer
    # The other writes in flight end first: their temporaries are not
    # partial files to remove while they are still being written.
    self._settle_writes()
    removed = []
    if self._model_dir and fileio.isdir(self._model_dir):
      removed = model_directory.remove_temporaries(self._model_dir)
    latest = self.newest_complete_checkpoint()
    return pretraining_errors.PretrainingError(
        f"writing the checkpoint of step {step} to {self._model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{latest or '(none yet)'}. Free disk space or fix the permissions, "
        "then run the same command again: it resumes from there.")

  def save_on_schedule(self, check_interval: bool = True) -> bool:
    """Saves at multiples of checkpoint_interval (CheckpointManager's own
    interval counts from the first save, which lands on step 1 or on
    whatever step a run resumed at); `check_interval=False` is orbit's save
    at the end of training: the final save. (On SIGTERM the runtime's
    controller calls `save_final` instead.)"""
    if not check_interval:
      return self.save_final() is not None
    step = int(self.global_step.numpy())
    interval = (self.checkpoint_manager.checkpoint_interval
                if self.checkpoint_manager else None)
    if not interval or step // interval <= self._last_saved_step // interval:
      return False
    saved = self._save_step(step)
    if saved:
      self._export(step, final=False)
    return saved


class ExperimentRunner(orbit_loop.ExperimentRunner):
  """Model Garden's experiment runner (the runtime's, which binds the
  actions that need it); on a worker other than the chief, the
  run starts from the chief's newest checkpoint in model_dir.

  Model Garden gives such a worker a CheckpointManager on an empty temporary
  directory (every worker must save: saving reads variables, a collective),
  so on a resume it would initialise while the chief restores, and their
  collectives (the variables a restore creates) would no longer match.
  """
  worker_checkpoint_dir: Optional[str] = None

  def _maybe_build_checkpoint_manager(self):
    strategy = self.strategy
    if (not self.trainer.checkpoint or strategy is None
        or strategy.extended.should_checkpoint):
      return super()._maybe_build_checkpoint_manager()
    latest = tf.train.latest_checkpoint(self.model_dir)
    checkpoint, trainer = self.trainer.checkpoint, self.trainer
    self.worker_checkpoint_dir = tempfile.mkdtemp(prefix="rembert_tf-worker-ckpt-")

    def start_like_the_chief():
      if latest:
        checkpoint.restore(latest)
      else:
        trainer.initialize()

    return tf.train.CheckpointManager(
        checkpoint, directory=self.worker_checkpoint_dir, max_to_keep=1,
        step_counter=trainer.global_step,
        checkpoint_interval=self.params.trainer.checkpoint_interval,
        init_fn=start_like_the_chief)

  def newest_complete_checkpoint(self, wait: bool = False) -> Optional[str]:
    """model_dir's newest complete checkpoint (what a restart resumes from);
    with `wait`, after the writes in flight are complete."""
    if wait:
      self.finish_writes()
    return tf.train.latest_checkpoint(self.model_dir)

  def finish_writes(self) -> None:
    """Waits for asynchronous checkpoint writes still in flight; on the way
    out of a failed run a failed write is logged, not raised over the
    error that ended the run."""
    try:
      self.controller.wait_for_saves()
    except (errors.RemBertError, OSError, tf.errors.OpError) as e:
      logging.warning("a checkpoint write in flight failed: %s", e)

  def remove_worker_checkpoints(self) -> None:
    """Deletes the temporary checkpoint directory of a non-chief worker."""
    if self.worker_checkpoint_dir:
      fileio.rmtree(self.worker_checkpoint_dir)

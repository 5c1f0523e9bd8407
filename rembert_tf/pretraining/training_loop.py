"""The pre-training loop: Model Garden's trainer, orbit's controller and
experiment runner, with what a preemptible run on TPU pods adds.

| class | builds on | adds |
| --- | --- | --- |
| `PretrainTrainer` | `official.core.base_trainer.Trainer` | a stop check every `stop_check_steps` steps inside a loop; wall-clock examples/s |
| `ExportingController` | `orbit.Controller` | artefacts after every save; no partial checkpoint after a failed save; save-then-stop on SIGTERM |
| `ExperimentRunner` | `official.core.train_lib.OrbitExperimentRunner` | workers other than the chief start from the chief's newest checkpoint |

`rembert_tf.pretraining.runner.run` puts them together.

Example (what `runner.run` does, shortened):
```python
from official.core import train_utils
from rembert_tf.pretraining import training_loop
trainer = train_utils.create_trainer(config, task, train=True, evaluate=False,
                                     trainer_cls=training_loop.PretrainTrainer)
experiment = training_loop.ExperimentRunner(
    distribution_strategy=strategy, task=task, mode="train", params=config,
    model_dir=model_dir, trainer=trainer,
    controller_cls=lambda **kw: training_loop.ExportingController(
        after_save=writer, stop_flag=stop_flag, model_dir=model_dir, **kw))
experiment.run()
```
"""
import tempfile
import threading
import time
from typing import Callable, List, Optional

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
from official.core import base_trainer
from official.core import train_lib

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.pretraining import artifacts
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.runtime import preemption

# A log line (not the console) with the step reached, at most this often,
# also inside a long loop of steps_per_loop steps.
HEARTBEAT_SECONDS = 60


class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's Trainer, plus wall-clock examples/s in the loop logs and a
  stop check between steps.

  orbit runs a loop of `steps_per_loop` steps as one device call; a Python
  signal handler only runs when that call returns, so with thousands of steps
  per loop a SIGTERM would wait minutes. Here the loop is dispatched in calls
  of `stop_check_steps` steps; after each, `between_steps_hooks` run and the
  loop ends early when `stop_requested()` says so.
  """
  stop_check_steps: int = 1
  stop_requested: Optional[Callable[[], bool]] = None
  between_steps_hooks: List[Callable[[], None]] = []

  def train(self, num_steps: tf.Tensor):
    self.train_loop_begin()
    if self._train_loop_fn is None:
      self._train_loop_fn = self.create_train_loop_fn()
    if self._train_iter is None:
      self._train_iter = tf.nest.map_structure(iter, self.train_dataset)
    remaining = int(num_steps)
    while remaining > 0:
      steps = min(remaining, max(1, self.stop_check_steps))
      self._train_loop_fn(self._train_iter, tf.constant(steps, tf.int32))
      remaining -= steps
      logging.log_every_n_seconds(
          logging.INFO, "training: at step %d", HEARTBEAT_SECONDS,
          int(self.global_step.numpy()))
      for hook in self.between_steps_hooks:
        hook()
      if remaining and self.stop_requested and self.stop_requested():
        break
    return self.train_loop_end()

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_start_time = time.time()
    self._loop_start_step = int(self.global_step.numpy())

  def train_loop_end(self):
    logs = super().train_loop_end()
    logs = {k: float(np.asarray(v)) for k, v in logs.items()}
    elapsed = max(time.time() - self._loop_start_time, 1e-9)
    steps = int(self.global_step.numpy()) - self._loop_start_step
    logs["examples_per_second"] = (
        steps * self.config.task.train_data.global_batch_size / elapsed)
    return logs


class ExportingController(orbit.Controller):
  """orbit.Controller that writes the fine-tuning artefacts after every save,
  leaves no partial checkpoint when a save fails, and saves-then-stops when a
  SIGTERM was received."""

  def __init__(self, *args,
               after_save: Optional[Callable[[int, bool], None]] = None,
               stop_flag: Optional[threading.Event] = None,
               model_dir: Optional[str] = None, **kwargs):
    self._after_save = after_save
    # Set by SIGTERM (one host); None on several workers, where TF's
    # preemption handler saves and stops between steps instead.
    self._stop_flag = stop_flag
    self._model_dir = model_dir
    self._last_saved_step = 0
    super().__init__(*args, **kwargs)
    self._last_saved_step = int(self.global_step.numpy())  # after restore

  def _save_now(self, final: bool):
    step = int(self.global_step.numpy())
    try:
      saved = super()._maybe_save_checkpoint(check_interval=False)
      # The final save of a step already saved is skipped by the manager;
      # the artefacts still get their final export.
      latest = self.checkpoint_manager.latest_checkpoint
      exists = bool(latest) and latest.endswith(f"ckpt-{step}")
      if (saved or (final and exists)) and self._after_save:
        self._after_save(step, final)
    except (OSError, tf.errors.OpError) as e:
      raise self._save_failed(step, e) from None
    if saved:
      self._last_saved_step = step
    return saved

  def _save_failed(self, step, error) -> pretraining_errors.PretrainingError:
    removed = []
    if self._model_dir and fileio.isdir(self._model_dir):
      removed = artifacts.remove_temporaries(self._model_dir)
    latest = self.checkpoint_manager.latest_checkpoint
    return pretraining_errors.PretrainingError(
        f"writing the checkpoint of step {step} to {self._model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{latest or '(none yet)'}. Free disk space or fix the permissions, "
        "then run the same command again: it resumes from there.")

  def _maybe_save_checkpoint(self, check_interval: bool = True):
    """Saves at multiples of checkpoint_interval (CheckpointManager's own
    interval counts from the first save, which lands on step 1 or on
    whatever step a run resumed at)."""
    if self._stop_flag is not None and self._stop_flag.is_set():
      self._save_now(final=True)
      raise preemption.TrainingPreempted.after_save(
          self.checkpoint_manager.latest_checkpoint,
          int(self.global_step.numpy()))
    step = int(self.global_step.numpy())
    interval = (self.checkpoint_manager.checkpoint_interval
                if self.checkpoint_manager else None)
    if check_interval and interval:
      if step // interval <= self._last_saved_step // interval:
        return False
    return self._save_now(final=not check_interval)


class ExperimentRunner(train_lib.OrbitExperimentRunner):
  """Model Garden's experiment runner; on a worker other than the chief, the
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

  def remove_worker_checkpoints(self) -> None:
    """Deletes the temporary checkpoint directory of a non-chief worker."""
    if self.worker_checkpoint_dir:
      fileio.rmtree(self.worker_checkpoint_dir)

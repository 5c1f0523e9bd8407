"""Trains (or resumes) one fine-tuning run on Model Garden's orbit loop.

Builds on `official.core.train_lib.OrbitExperimentRunner` (what
`train_lib.run_experiment` drives: orbit Controller + `base_trainer.Trainer`)
on the `finetuning_task.FinetuningTask`: `steps_per_loop` steps per host
round trip, TensorBoard summaries (`<run>/train`), a checkpoint every
`checkpoint_interval` steps and resume from the newest. Two train actions run
after each loop: one console line, and the stop on SIGTERM (a checkpoint is
saved and `runtime.preemption.TrainingPreempted` raised, exit code 42).

Example:
<!-- snippet: not run: a fragment: `meta` comes from the caller's code -->
```python
from rembert_tf.finetuning import training_loop
task, model = training_loop.train_run(
    meta, "records/xnli", "ft/xnli/runs/lr-2e-05_seed-0", model_config,
    restore_encoder=None, config=config, strategy=strategy,
    label="xnli lr=2e-05 seed=0", progress=print)
```
"""
import threading
import time
from typing import Callable, Optional

from absl import logging
import numpy as np
import tensorflow as tf
from official.core import train_lib
from official.core import train_utils

from rembert_tf.common import console
from rembert_tf.common import fileio
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import finetuning_task
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings


class LoopPrinter:
  """Train action: one console line per loop of `steps_per_loop` steps."""

  def __init__(self, label: str, global_step, total_steps: int,
               batch_size: int, print_fn: Callable[[str], None]):
    self._label = label
    self._global_step = global_step
    self._total_steps = total_steps
    self._batch_size = batch_size
    self._print = print_fn
    self._last = None

  def __call__(self, output):
    step = int(self._global_step.numpy())
    now = time.time()
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    speed = eta = None
    if self._last is not None and step > self._last[1]:
      seconds_per_step = (now - self._last[0]) / (step - self._last[1])
      speed = self._batch_size / seconds_per_step
      eta = max(self._total_steps - step, 0) * seconds_per_step
    self._last = (now, step)
    line = f"[finetune] {self._label}: " + console.loop_line(
        step, self._total_steps, loss=logs.get("training_loss"),
        accuracy=logs.get("accuracy"), examples_per_second=speed,
        learning_rate=logs.get("learning_rate"), eta_seconds=eta)
    self._print(line)
    logging.info(line)


class SaveOnSigterm:
  """Train action: once SIGTERM has arrived, saves at the end of the loop and
  raises `TrainingPreempted` (the flag is `preemption.sigterm_stop_flag()`'s)."""

  def __init__(self, stop: threading.Event, global_step,
               manager_fn: Callable[[], tf.train.CheckpointManager]):
    self._stop, self._global_step, self._manager_fn = stop, global_step, manager_fn

  def __call__(self, output):
    del output
    if not self._stop.is_set():
      return
    step = int(self._global_step.numpy())
    path = self._manager_fn().save(checkpoint_number=step, check_interval=False)
    raise preemption.TrainingPreempted.after_save(path, step)


def _checkpoint_step(path: str) -> int:
  return int(path.rsplit("-", 1)[1])


def _resume_step(task: finetuning_task.FinetuningTask, run_dir: str,
                 total_steps: int, label: str, progress) -> None:
  """Starts the task's input stream after the newest intact checkpoint's
  step (named in run_dir's `checkpoint` file, which the manager restores)."""
  latest = checkpoint_layout.latest_checkpoint(run_dir, report=progress)
  if latest is not None:
    checkpoint_layout.name_as_latest(run_dir, latest)
    task.initial_train_step = _checkpoint_step(latest)
    progress(f"[finetune] {label}: resuming from {latest} at step "
             f"{task.initial_train_step}/{total_steps}")


def train_run(meta, records_dir, run_dir, model_config, restore_encoder,
              config: finetuning_experiment.FinetuningConfig, strategy,
              label: str, progress, stop: Optional[threading.Event] = None):
  """Trains (or resumes) one run in `run_dir`; returns (task, model)."""
  params = finetuning_experiment.experiment_config(meta, records_dir,
                                                   model_config, config)
  process_settings.set_seed(config.seed)
  task = finetuning_task.FinetuningTask(params.task, logging_dir=run_dir,
                                        restore_encoder=restore_encoder)
  _resume_step(task, run_dir, params.trainer.train_steps, label, progress)
  with strategy.scope():
    trainer = train_utils.create_trainer(
        params, task, train=True, evaluate=False)
  actions = [LoopPrinter(label, trainer.global_step,
                         params.trainer.train_steps, config.train_batch_size,
                         progress)]
  runner_box = []
  if stop is not None:
    actions.append(SaveOnSigterm(stop, trainer.global_step,
                                 lambda: runner_box[0].checkpoint_manager))
  # OrbitExperimentRunner is what train_lib.run_experiment drives; called
  # directly, the run skips run_experiment's FLOP count (a graph profile).
  with console.orbit_logs_to_file():
    runner = train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode="train", params=params,
        model_dir=run_dir, trainer=trainer, train_actions=actions)
    runner_box.append(runner)
    with strategy.scope():
      runner.controller.train(steps=params.trainer.train_steps)
  return task, trainer.model


def remove_training_checkpoints(run_dir: str) -> None:
  """Drops a finished run's checkpoints (model + optimizer state)."""
  for path in fileio.glob(fileio.join(run_dir, "ckpt-*")):
    fileio.remove(path)
  index = fileio.join(run_dir, "checkpoint")
  if fileio.exists(index):
    fileio.remove(index)

"""Trains (or resumes) one fine-tuning run on Model Garden's orbit loop.

Builds on `official.core.train_lib.OrbitExperimentRunner` with the
`finetuning_task.FinetuningTask` and the orbit actions pre-training shares
(`runtime.orbit_loop`, `runtime.preemption`): summaries in `<run>/train`,
checkpoints every `checkpoint_interval` steps, resume from the newest, and
on SIGTERM a checkpoint then `TrainingPreempted` (exit code 42).
"""
import threading
from typing import Optional

from official.core import train_lib
from official.core import train_utils

from rembert_tf.common import console
from rembert_tf.common import fileio
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import finetuning_task
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import stop_checks


def _checkpoint_step(path: str) -> int:
  return int(path.rsplit("-", 1)[1])


def _resume_step(task: finetuning_task.FinetuningTask, run_dir: str,
                 total_steps: int, label: str, progress) -> None:
  """Starts the task's input stream after the newest intact checkpoint's step."""
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
    trainer = train_utils.create_trainer(params, task, train=True,
                                         evaluate=False)
  steps_per_loop = params.trainer.steps_per_loop
  printer = orbit_loop.ProgressPrinter(
      trainer.global_step, params.trainer.train_steps, progress,
      prefix=f"[finetune] {label}: ", batch_size=config.train_batch_size,
      steps_per_loop=steps_per_loop)
  saves = orbit_loop.Checkpoints(params.trainer.checkpoint_interval)
  stops = preemption.stop_actions(
      strategy, stop, lambda: saves.save(final=True), trainer.global_step)
  loop_steps = orbit_loop.LoopSteps(
      steps_per_loop, params.trainer.checkpoint_interval,
      stop_checks.StopCheckSchedule(
          agree=stop_checks.agree_across_workers(strategy)))
  # OrbitExperimentRunner is what train_lib.run_experiment drives; called
  # directly, the run skips run_experiment's FLOP count (a graph profile).
  # Its checkpoint manager gets no interval: the saves are `saves`'.
  with console.orbit_logs_to_file():
    runner = train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode="train",
        params=params.replace(trainer={"checkpoint_interval": 0}),
        model_dir=run_dir, trainer=trainer,
        train_actions=[printer, saves, *stops],
        controller_cls=orbit_loop.controller_with_steps(loop_steps))
    saves.attach(runner.checkpoint_manager, trainer.global_step)
    with strategy.scope():
      runner.controller.train(steps=params.trainer.train_steps)
    saves.save(final=True)
  return task, trainer.model


def remove_training_checkpoints(run_dir: str) -> None:
  """Drops a finished run's checkpoints (model + optimizer state)."""
  for path in fileio.glob(fileio.join(run_dir, "ckpt-*")):
    fileio.remove(path)
  index = fileio.join(run_dir, "checkpoint")
  if fileio.exists(index):
    fileio.remove(index)

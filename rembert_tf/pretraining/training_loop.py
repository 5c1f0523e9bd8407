"""Pre-training's trainer and orbit actions, for Model Garden's runner.

`PretrainTrainer` is Model Garden's `base_trainer.Trainer` with wall-clock
examples/s in its loop logs; `checkpoints` is the save action
(`runtime.orbit_loop.Checkpoints`) with the encoder export of the same step;
`nonfinite_loss_guard` (an `orbit.actions.ConditionalAction`) stops a NaN /
inf loss (exit code 3) before its weights are saved; `EvalRecorder` prints
an evaluation.

Example:
<!-- snippet: not run: a fragment: `config`, `task`, `strategy` come from the caller's code -->
```python
from rembert_tf.pretraining import training_loop
trainer = training_loop.create_trainer(config, task, strategy, "/tmp/pretrain")
```
"""
import time
from typing import Callable, Dict, Mapping, Optional

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
from official.core import base_trainer
from official.core import train_utils

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.pretraining import model_directory
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.runtime import cluster_failures
from rembert_tf.runtime import orbit_loop




class PretrainTrainer(base_trainer.Trainer):
  """Model Garden's trainer with wall-clock examples/s in its loop logs.

  Model Garden's runner gives a worker other than the chief a checkpoint
  manager on an empty temporary directory (every worker must join a save),
  whose `init_fn` is this trainer's `initialize`: here it restores the
  chief's newest checkpoint, as the chief does, so their variables (and the
  collectives that create them) match.
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
    steps = int(self.global_step.numpy()) - first_step
    logs["examples_per_second"] = (
        steps * self.config.task.train_data.global_batch_size
        / max(time.time() - started, 1e-9))
    return logs


def create_trainer(config, task, strategy: tf.distribute.Strategy,
                   model_dir: str, mode: str = "train") -> PretrainTrainer:
  """Model Garden's trainer of `task` (`train_utils.create_trainer`) as a
  `PretrainTrainer`, its variables under `strategy`."""
  with strategy.scope():
    trainer = train_utils.create_trainer(
        config, task, train="train" in mode, evaluate="eval" in mode,
        trainer_cls=PretrainTrainer)
  trainer.model_dir = model_dir
  return trainer


def checkpoints(config, writer: model_directory.ArtifactWriter,
                model_dir: str, strategy: tf.distribute.Strategy
                ) -> orbit_loop.Checkpoints:
  """The save action: at multiples of trainer.checkpoint_interval the full
  checkpoint, then the encoder export of the same weights (the final one
  after the writes in flight, written before it returns); a failed write is
  one line naming the newest complete checkpoint, its partial files
  removed."""

  def export(step: int, final: bool) -> None:
    if final:
      writer.wait()
    writer(step, final)
    if final:
      writer.wait()

  def failed(step: int, error: Exception) -> Exception:
    if cluster_failures.is_lost_peer(error, strategy):
      return error  # the runner names the lost peer
    finish_writes(saves, writer)  # their temporaries are no longer written
    removed = []
    if fileio.isdir(model_dir):
      removed = model_directory.remove_temporaries(model_dir)
    return pretraining_errors.PretrainingError(
        f"writing the checkpoint of step {step} to {model_dir} failed "
        f"({errors.one_line(error)}); removed the partial files "
        f"({', '.join(removed) or 'none'}). The newest complete checkpoint is "
        f"{tf.train.latest_checkpoint(model_dir) or '(none yet)'}. Free disk "
        "space or fix the permissions, then run the same command again: it "
        "resumes from there.")

  saves = orbit_loop.Checkpoints(
      config.trainer.checkpoint_interval,
      asynchronous=config.trainer.enable_async_checkpointing,
      after_save=export, on_failure=failed)
  return saves


def finish_writes(saves: orbit_loop.Checkpoints,
                  writer: model_directory.ArtifactWriter) -> None:
  """Waits for every checkpoint and export write in flight; a failed one is
  logged (on the way out of a run that failed already)."""
  saves.finish_writes()
  try:
    checkpoint_layout.wait_for_writes(writer.encoder_writer.checkpoint)
  except (OSError, tf.errors.OpError) as e:
    logging.warning("an encoder export in flight failed: %s", e)


def nonfinite_loss_guard(saves: orbit_loop.Checkpoints,
                         writer: model_directory.ArtifactWriter,
                         model_dir: str, global_step: tf.Variable
                         ) -> orbit.actions.ConditionalAction:
  """Train action (put it before the save): a NaN / inf loss raises
  `NonFiniteLossError` (exit code 3) naming the last good checkpoint, after
  the writes in flight; that loop's weights are never saved."""

  def nonfinite(output: Mapping[str, object]) -> bool:
    return not np.isfinite(float(np.asarray(output.get("training_loss", 0.0))))

  def stop(output: Mapping[str, object]) -> None:
    loss = float(np.asarray(output["training_loss"]))
    finish_writes(saves, writer)
    last = tf.train.latest_checkpoint(model_dir)
    raise pretraining_errors.NonFiniteLossError(
        f"training loss is {loss} at step {int(global_step.numpy())}; "
        f"stopped without saving these weights. The last good checkpoint is "
        f"{last or '(none yet)'}. Lower the learning rate, raise the warmup, "
        "or check the records, then run again (it resumes from there).")

  return orbit.actions.ConditionalAction(nonfinite, stop)


class EvalRecorder:
  """Eval action: keeps the last evaluation's metrics and prints them."""

  def __init__(self, global_step: tf.Variable,
               print_fn: Callable[[str], None] = print):
    self._global_step = global_step
    self._print = print_fn
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output: Mapping[str, object]) -> None:
    logs = {k: float(np.asarray(v)) for k, v in output.items()
            if np.asarray(v).size == 1}
    self.last_logs = logs
    line = (f"eval at step {int(self._global_step.numpy())} | mlm_loss "
            f"{logs.get('lm_example_loss', float('nan')):.4f} | mlm_acc "
            f"{logs.get('masked_lm_accuracy', float('nan')):.4f}")
    self._print(line)
    logging.info(line)

"""Stopping a run on SIGTERM with its work saved (exit code 42, TensorFlow's
own for a preempted worker): a train action after each device call
(`stop_actions`) saves, then raises `TrainingPreempted`; several workers stop
at one step through TensorFlow's `PreemptionCheckpointHandler` (Model
Garden's `trainer.preemption_on_demand_checkpoint` saves and goes on
training).

Example:
<!-- snippet: not run: a fragment: `strategy`, `checkpoints`, `trainer` come from the caller's code -->
```python
from rembert_tf.runtime import preemption
with preemption.sigterm_stop_flag() as stop:
  actions = preemption.stop_actions(
      strategy, stop, lambda: checkpoints.save(final=True), trainer.global_step)
```
"""
import contextlib
import os
import signal
import tempfile
import threading
from typing import Callable, Iterator, List, Optional

from absl import logging
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.runtime import strategies


class TrainingPreempted(errors.RemBertError, RuntimeError):
  """SIGTERM arrived; a checkpoint was saved and the run stopped."""

  exit_code = errors.EXIT_PREEMPTED

  def __init__(self, message: str, step: Optional[int] = None,
               checkpoint_path: Optional[str] = None):
    super().__init__(message)
    self.step = step
    self.checkpoint_path = checkpoint_path

  @classmethod
  def after_save(cls, checkpoint_path: Optional[str], step: int,
                 cause: str = "SIGTERM received") -> "TrainingPreempted":
    return cls(f"{cause}: saved {checkpoint_path} at step {step} and "
               "stopped; run the same command again to resume.",
               step, checkpoint_path)


@contextlib.contextmanager
def sigterm_stop_flag() -> Iterator[threading.Event]:
  """An Event that SIGTERM sets while the block runs (main thread only)."""
  stop = threading.Event()
  if threading.current_thread() is not threading.main_thread():
    yield stop
    return
  # Only the flag: the handler may run inside a logging call or a save.
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
  try:
    yield stop
  finally:
    signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def stop_actions(strategy: tf.distribute.Strategy,
                 stop_flag: Optional[threading.Event],
                 save: Callable[[], Optional[str]],
                 global_step: tf.Variable) -> List[Callable[[object], None]]:
  """The train action that runs `save` (returning the checkpoint written),
  then raises `TrainingPreempted`: on one host once `stop_flag` is set; on
  several, on every worker at the step they agree on once any got SIGTERM
  (the handler's own CheckpointManager stays empty)."""
  if strategies.is_multi_worker(strategy):
    saved = {}

    def stop():
      raise TrainingPreempted.after_save(saved.get("path"),
                                         int(global_step.numpy()),
                                         cause="a worker received SIGTERM")

    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver,
        tf.train.CheckpointManager(
            tf.train.Checkpoint(), max_to_keep=1, directory=os.path.join(
                tempfile.gettempdir(), f"rembert_tf-preemption-{os.getpid()}")),
        termination_config=tf.distribute.experimental.TerminationConfig(
            exit_fn=stop, save_fn=lambda: saved.update(path=save())))
    return [lambda output: handler.save_checkpoint_if_preempted()]
  if stop_flag is None:
    return []

  def stop_on_sigterm(output) -> None:
    del output
    if stop_flag.is_set():
      step = int(global_step.numpy())
      logging.warning("SIGTERM received: saving the checkpoint of step %d "
                      "(after the writes in flight) and stopping.", step)
      raise TrainingPreempted.after_save(save(), step)

  return [stop_on_sigterm]

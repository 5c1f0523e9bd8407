"""Stopping a run on SIGTERM with its work saved (exit code 42, TensorFlow's
own for a preempted worker): every trainer's SIGTERM path.

One host: a handler sets a flag (`sigterm_stop_flag`); the train action of
`stop_actions`, run by orbit's Controller between device calls, saves and
raises `TrainingPreempted`. Several workers: TensorFlow's
`PreemptionCheckpointHandler`, called at the same steps on every worker,
has all of them save at the same step and raise `TrainingPreempted`
together (one worker must never leave the loop alone).

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

EXIT_CODE = errors.EXIT_PREEMPTED


class TrainingPreempted(errors.RemBertError, RuntimeError):
  """SIGTERM arrived; a checkpoint was saved and the run stopped."""

  exit_code = EXIT_CODE

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
  """An Event that SIGTERM sets while the block runs.

  The handler is installed from the main thread only (Python's rule); in
  another thread the Event is never set. The previous handler comes back
  when the block ends.
  """
  stop = threading.Event()
  if threading.current_thread() is not threading.main_thread():
    yield stop
    return

  def handle(signum, frame):
    # Only the flag: the handler runs between any two bytecodes of the main
    # thread, also inside a logging call or a checkpoint save; the trainer
    # says what it does when it acts on the flag.
    del signum, frame
    stop.set()

  previous = signal.signal(signal.SIGTERM, handle)
  try:
    yield stop
  finally:
    signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def multi_worker_preemption_hook(
    strategy: tf.distribute.Strategy,
    save: Callable[[], Optional[str]],
    global_step: tf.Variable) -> Optional[Callable[[], None]]:
  """Under multi-worker MWMS: a call (make it between the same steps on every
  worker) that, once any worker got SIGTERM, runs `save` on every worker at
  the same step (it returns the checkpoint written) and raises
  `TrainingPreempted` on all of them; None on one host.

  Builds on TensorFlow's `PreemptionCheckpointHandler`, which agrees on the
  step through the cluster's coordination service. It is given an empty
  CheckpointManager of its own: the run restored its checkpoint already, and
  `save` is the trainer's save (checkpoint, encoder export, waiting for both).
  """
  if not strategies.is_multi_worker(strategy):
    return None
  saved = {}

  def save_on_every_worker():
    saved["path"] = save()

  def stop():
    raise TrainingPreempted.after_save(saved.get("path"),
                                       int(global_step.numpy()),
                                       cause="a worker received SIGTERM")

  handler = tf.distribute.experimental.PreemptionCheckpointHandler(
      strategy.cluster_resolver,
      tf.train.CheckpointManager(
          tf.train.Checkpoint(), max_to_keep=1,
          # Never written (the saves are `save`'s) nor holding a checkpoint.
          directory=os.path.join(tempfile.gettempdir(),
                                 f"rembert_tf-preemption-{os.getpid()}")),
      termination_config=tf.distribute.experimental.TerminationConfig(
          exit_fn=stop, save_fn=save_on_every_worker))
  return handler.save_checkpoint_if_preempted


def stop_actions(strategy: tf.distribute.Strategy,
                 stop_flag: Optional[threading.Event],
                 save: Callable[[], Optional[str]],
                 global_step: tf.Variable) -> List[Callable[[object], None]]:
  """The orbit train action that stops a run on SIGTERM (put it after the
  loop's scheduled save): on several workers, `multi_worker_preemption_hook`
  over `save`; on one host, once `stop_flag` is set, `save` (it returns the
  checkpoint written) and `TrainingPreempted`. No action without either."""
  hook = multi_worker_preemption_hook(strategy, save, global_step)
  if hook is not None:
    return [lambda output: hook()]
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

"""Stopping a run on SIGTERM with its work saved: the flag, the controller
that saves then stops, the multi-worker hook, the error. Every trainer's
SIGTERM path is this module's.

Preemptible TPUs and batch schedulers send SIGTERM before they kill a job.
One host: a handler sets a flag (`sigterm_stop_flag`) that the trainer reads
between device calls (`install_stop_checks`) to end its loop early; at the
end of the loop the controller (`PreemptibleController`, an orbit
Controller) saves a checkpoint and raises `TrainingPreempted`; the command
exits with code 42 (`errors.EXIT_PREEMPTED`, also the code of TensorFlow's
`PreemptionCheckpointHandler`). Several workers: one worker must never
leave the loop alone (the others would wait in a collective), so
TensorFlow's `PreemptionCheckpointHandler` (a preemption watcher over the
cluster) is called at the same steps on every worker; it has all of them
save at the same step and raise `TrainingPreempted` together.

Example (what both trainers do):
<!-- snippet: not run: a fragment: `trainer`, `manager` come from the caller's code -->
```python
from rembert_tf.runtime import preemption
with preemption.sigterm_stop_flag() as stop:
  controller = preemption.PreemptibleController(
      trainer=trainer, global_step=trainer.global_step, steps_per_loop=100,
      checkpoint_manager=manager, stop_flag=stop)
  controller.train(steps=1000)  # SIGTERM: saves, raises TrainingPreempted
```
"""
import contextlib
import os
import signal
import tempfile
import threading
from typing import Callable, Iterator, Optional

from absl import logging
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import stop_checks
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


class PreemptibleController(orbit_loop.AfterLoopController):
  """orbit's Controller that, once `stop_flag` is set (by SIGTERM), saves the
  step reached at the end of the loop (`save_final`) and raises
  `TrainingPreempted`, instead of its scheduled save.

  `save_final` writes the step's checkpoint with the checkpoint manager,
  synchronously; a trainer's controller may extend it (pre-training also
  waits for the writes in flight and exports the encoder). The other saves
  are `save_on_schedule`'s (orbit's own by default). On several workers the
  flag is ignored (one worker must never leave the loop alone: the others
  would wait in a collective): `install_stop_checks`' hook saves and stops.
  """

  def __init__(self, *args, stop_flag: Optional[threading.Event] = None,
               **kwargs):
    self._stop_flag = None
    super().__init__(*args, **kwargs)
    if not strategies.is_multi_worker(self.strategy):
      self._stop_flag = stop_flag

  def save_final(self) -> Optional[str]:
    """Saves the checkpoint of the step reached; returns its path."""
    return self.checkpoint_manager.save(
        checkpoint_number=int(self.global_step.numpy()), check_interval=False)

  def after_loop(self, check_interval: bool = True) -> bool:
    # After every loop and at the end of training: the stop, else the save.
    if self._stop_flag is not None and self._stop_flag.is_set():
      step = int(self.global_step.numpy())
      logging.warning("SIGTERM received: saving the checkpoint of step %d "
                      "(after the writes in flight) and stopping.", step)
      raise TrainingPreempted.after_save(self.save_final(), step)
    return self.save_on_schedule(check_interval)


def install_stop_checks(trainer, strategy: tf.distribute.Strategy,
                        stop_flag: Optional[threading.Event],
                        save: Callable[[], Optional[str]],
                        seconds: float = stop_checks.DEFAULT_SECONDS,
                        fixed_steps: int = 0) -> None:
  """Has `trainer` (a `runtime.orbit_loop.StopCheckingTrainer`) check for a
  stop between device calls of about `seconds` of steps (or `fixed_steps`):
  the SIGTERM flag on one host (the loop ends early; the controller saves),
  `multi_worker_preemption_hook` over `save` on several workers (called
  after the same calls on every one)."""
  trainer.stop_checks = stop_checks.StopCheckSchedule(
      seconds=seconds, fixed_steps=fixed_steps,
      agree=stop_checks.agree_across_workers(strategy))
  hook = multi_worker_preemption_hook(strategy, save, trainer.global_step)
  trainer.stop_requested = (None if hook or stop_flag is None
                            else stop_flag.is_set)
  trainer.between_steps_hooks = [hook] if hook else []

"""What both trainers hand to Model Garden's runner besides its own: the loop
length given to orbit's `Controller`, and the train actions they share.

`LoopSteps` is orbit's `steps_per_loop` as a callable: loops end at
multiples of `trainer.steps_per_loop` and `checkpoint_interval`, run as
device calls of about a second (`stop_checks`), because a SIGTERM or
TensorFlow's preemption handler is seen only between calls (one call per
loop of `steps_per_loop=1000` on the test machine's CPU let a SIGTERM wait 6
to 14 minutes; with these calls the run saved and exited 42 about 2 s after
the signal). `Checkpoints` saves at multiples of the interval through the
runner's `tf.train.CheckpointManager`, after the actions that may stop the
run (orbit's own interval save counts from its last save and runs after the
actions, so an export there would hold the next loop's weights).
`ProgressPrinter` prints one console line per loop.

Example:
```python
import tensorflow as tf
from rembert_tf.runtime import orbit_loop
step = tf.Variable(40, dtype=tf.int64)
progress = orbit_loop.ProgressPrinter(
    step, total_steps=300, accuracy_key="masked_lm_accuracy",
    accuracy_name="mlm_acc")
progress({"training_loss": 5.21, "masked_lm_accuracy": 0.11})
# step  40/300 | loss 5.2100 | mlm_acc 0.1100
progress.last_logs["global_step"]   # 40
```
"""
import time
from typing import Callable, Dict, Mapping, Optional

from absl import logging
import numpy as np
import orbit
import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.common import console
from rembert_tf.common import fileio
from rembert_tf.runtime import stop_checks

# A log line (not the console) with the step reached, at most this often,
# also inside a long loop of steps_per_loop steps.
HEARTBEAT_SECONDS = 60


class LoopSteps:
  """orbit's `steps_per_loop` as a callable of the global step: the steps to
  the next multiple of `steps_per_loop` or `checkpoint_interval`, at most
  what `schedule` allows in one device call. A call's time is measured from
  one loop's start to the next (actions and saves included: calls only get
  shorter).

  Args:
    steps_per_loop: the trainer's loop length (console line, summaries).
    checkpoint_interval: saves land on its multiples (0: none).
    schedule: `runtime.stop_checks.StopCheckSchedule`, agreed across the
      workers of a multi-worker job.
  """

  def __init__(self, steps_per_loop: int, checkpoint_interval: int = 0,
               schedule: Optional[stop_checks.StopCheckSchedule] = None):
    self._boundaries = [n for n in (steps_per_loop, checkpoint_interval) if n]
    self._schedule = schedule or stop_checks.StopCheckSchedule()
    self._last = None  # (monotonic time, step) at the previous loop's start

  def __call__(self, step) -> int:
    step, now = int(step), time.monotonic()
    if self._last is not None and step > self._last[1]:
      self._schedule.observe(step - self._last[1], now - self._last[0])
    self._last = (now, step)
    remaining = min(n - step % n for n in self._boundaries)
    return self._schedule.next_call(remaining)


def controller_with_steps(steps: LoopSteps) -> Callable[..., orbit.Controller]:
  """`controller_cls` for Model Garden's runner: orbit's Controller as the
  runner builds it, with `steps` as its `steps_per_loop`."""
  return lambda **kwargs: orbit.Controller(**dict(kwargs, steps_per_loop=steps))


class Checkpoints:
  """Train action: a checkpoint at each multiple of `interval`, on every
  worker (a save is a collective), asynchronous when `asynchronous`; then
  `after_save(step, final)` (pre-training's encoder export: the same
  weights). `save(step, final=True)` first waits for the writes in flight,
  then writes synchronously. A failed write goes through `on_failure(step,
  error)`, which returns the error to raise.

  The saves go through the runner's checkpoint manager, which exists once
  the runner (given this action) is built: `attach` hands it over, after it
  restored the run's checkpoint.
  """

  def __init__(self, interval: int, asynchronous: bool = False,
               after_save: Optional[Callable[[int, bool], None]] = None,
               on_failure: Optional[Callable[[int, Exception], Exception]] = None):
    self._interval = interval
    self._asynchronous = asynchronous
    self._after_save = after_save
    self._on_failure = on_failure
    self._manager: Optional[tf.train.CheckpointManager] = None
    self._saved_step = 0
    self.final_checkpoint: Optional[str] = None

  @property
  def manager(self) -> Optional[tf.train.CheckpointManager]:
    return self._manager

  def attach(self, manager: tf.train.CheckpointManager,
             global_step: tf.Variable) -> None:
    self._manager = manager
    self._global_step = global_step
    # The step restored (or 0) counts as saved, on every worker alike.
    self._saved_step = int(global_step.numpy())

  def __call__(self, output) -> None:
    del output
    step = int(self._global_step.numpy())
    if self._interval and step % self._interval == 0:
      self.save(step)

  def save(self, step: Optional[int] = None, final: bool = False) -> str:
    """Saves `step` (default: the step reached) unless it is saved; returns
    the checkpoint's path in the manager's directory."""
    step = int(self._global_step.numpy()) if step is None else step
    try:
      if final:
        checkpoint_layout.wait_for_writes(self._manager.checkpoint)
      if step != self._saved_step:
        self._manager.save(checkpoint_number=step, check_interval=False,
                           options=tf.train.CheckpointOptions(
                               enable_async=self._asynchronous and not final))
        self._saved_step = step
      if self._after_save is not None:
        self._after_save(step, final)
      if final:
        checkpoint_layout.wait_for_writes(self._manager.checkpoint)
    except (OSError, tf.errors.OpError) as e:
      if self._on_failure is None:
        raise
      raise self._on_failure(step, e) from None
    path = fileio.join(self._manager.directory, f"ckpt-{step}")
    if final:
      self.final_checkpoint = path
    return path

  def finish_writes(self) -> None:
    """Waits for the writes in flight; a failed one is logged, not raised
    (on the way out of a run that failed already)."""
    if self._manager is None:
      return
    try:
      checkpoint_layout.wait_for_writes(self._manager.checkpoint)
    except (OSError, tf.errors.OpError) as e:
      logging.warning("a checkpoint write in flight failed: %s", e)


class ProgressPrinter:
  """Train action: one console line per loop (`console.loop_line`), e.g.
  `step  40/300 | loss 5.2104 | mlm_acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`,
  and a log line with the step reached at most every HEARTBEAT_SECONDS.

  Args:
    global_step: the trainer's step counter.
    total_steps: the step the run trains to.
    print_fn: where the line goes.
    prefix: put before each line (e.g. `[finetune] xnli: `).
    accuracy_key: the log holding the accuracy; `accuracy_name` its short
      name on the line.
    batch_size: examples per step, for examples/s when the logs carry no
      `examples_per_second` (from the pace since the first loop).
    clock: seconds, for that pace and the ETA.
    steps_per_loop: the line comes at multiples of it and at the last step
      (orbit's loops are cut into shorter device calls: `LoopSteps`).
  """

  def __init__(self, global_step: tf.Variable, total_steps: int,
               print_fn: Callable[[str], None] = print, *, prefix: str = "",
               accuracy_key: str = "accuracy", accuracy_name: str = "acc",
               batch_size: Optional[int] = None,
               clock: Callable[[], float] = time.monotonic,
               steps_per_loop: int = 1):
    self._global_step = global_step
    self._total_steps = total_steps
    self._print = print_fn
    self._prefix = prefix
    self._accuracy_key = accuracy_key
    self._accuracy_name = accuracy_name
    self._batch_size = batch_size
    self._steps_per_loop = steps_per_loop
    self._last_heartbeat = -float("inf")
    # Paced from the first loop's end: its time includes the compilation.
    self._eta = console.Eta(total_steps, clock=clock)
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output: Mapping[str, object]):
    step = int(self._global_step.numpy())
    now = time.monotonic()
    if now - self._last_heartbeat >= HEARTBEAT_SECONDS:
      self._last_heartbeat = now
      logging.info("training: at step %d", step)
    if step % self._steps_per_loop and step < self._total_steps:
      return
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    self.last_logs = dict(logs, global_step=step)
    eta = self._eta.observe(step)
    speed = logs.get("examples_per_second")
    if speed is None and self._batch_size and self._eta.rate:
      speed = self._batch_size * self._eta.rate
    line = self._prefix + console.loop_line(
        step, self._total_steps, loss=logs.get("training_loss"),
        accuracy=logs.get(self._accuracy_key),
        accuracy_name=self._accuracy_name, examples_per_second=speed,
        learning_rate=logs.get("learning_rate"), eta_seconds=eta)
    self._print(line)
    if "gradient_norm" in logs:
      logging.info("%s | grad_norm %.3f", line, logs["gradient_norm"])
    else:
      logging.info("%s", line)

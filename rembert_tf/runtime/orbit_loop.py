"""What both trainers hand Model Garden's runner besides its own: the loop
length given to orbit's Controller, the interval saves, the console line.

Loops end at multiples of `trainer.steps_per_loop` and of the checkpoint
interval, cut into device calls of about a second (`LoopSteps`): a SIGTERM
or TensorFlow's preemption handler is seen only between calls (one call per
loop of `steps_per_loop=1000` on the test machine's CPU let a SIGTERM wait
6 to 14 minutes; with these calls the run saved and exited 42 about 2 s
after the signal). The saves are a train action (`Checkpoints`) on
the runner's CheckpointManager: orbit's own interval save counts from the
last save, so a run's first save would land on its first, one-step, call.

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
orbit_loop.LoopSteps(steps_per_loop=1000)(0)   # 1: the first call compiles
```
"""
import contextlib
import os
import sys
import time
from typing import Callable, Dict, Iterator, Mapping, Optional

from absl import logging
import numpy as np
import orbit
import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.common import console
from rembert_tf.runtime import strategies

# A device call grows at most this much over the one before it.
MAX_GROWTH = 8
# A log line (not the console) with the step reached, at most this often.
HEARTBEAT_SECONDS = 60


class LoopSteps:
  """orbit's `steps_per_loop` as a callable of the global step: the steps to
  the next multiple of `steps_per_loop` or `checkpoint_interval`, at most
  `fixed_steps` or else about `seconds` of steps. Under several workers each
  runs the mean of their proposals (one small all-reduce per call)."""

  def __init__(self, steps_per_loop: int, checkpoint_interval: int = 0,
               strategy: Optional[tf.distribute.Strategy] = None,
               seconds: float = 1.0, fixed_steps: int = 0):
    self._boundaries = [n for n in (steps_per_loop, checkpoint_interval) if n]
    self._strategy = (strategy if strategy is not None
                      and strategies.is_multi_worker(strategy) else None)
    self._seconds, self._fixed = seconds, fixed_steps
    self._proposal = fixed_steps or 1  # the first call compiles: one step
    self._last = None  # (monotonic time, step) at the previous loop's start

  def __call__(self, step) -> int:
    step, now = int(step), time.monotonic()
    if not self._fixed and self._last and step > self._last[1]:
      done = step - self._last[1]
      per_step = max(now - self._last[0], 1e-9) / done
      self._proposal = max(1, min(int(self._seconds / per_step),
                                  done * MAX_GROWTH))
    self._last = (now, step)
    remaining = min(n - step % n for n in self._boundaries)
    steps = self._proposal
    # A fixed count and the last step of a loop are alike on every worker.
    if self._strategy is not None and not self._fixed and remaining > 1:
      values = self._strategy.experimental_distribute_values_from_function(
          lambda _: tf.constant(float(self._proposal), tf.float32))
      # float32 sums of small integers are exact: equal on every worker.
      total = self._strategy.reduce(tf.distribute.ReduceOp.SUM, values,
                                    axis=None)
      steps = int(float(total) // self._strategy.num_replicas_in_sync)
    return max(1, min(steps, remaining))


def controller_with_steps(steps: LoopSteps) -> Callable[..., orbit.Controller]:
  """`controller_cls` for Model Garden's runner, `steps` its steps_per_loop."""
  return lambda **kwargs: orbit.Controller(**dict(kwargs, steps_per_loop=steps))


class Checkpoints:
  """Train action: a checkpoint at each multiple of `interval` on every
  worker, then `after_save(step, final)`; `save(final=True)` waits for the
  writes in flight and writes synchronously; a failed write raises what
  `failure(step, error)` returns. `attach` hands over the runner's manager
  once it is built (the step restored counts as saved)."""

  def __init__(self, interval: int, asynchronous: bool = False):
    self._interval = interval
    self.asynchronous = asynchronous
    self.manager: Optional[tf.train.CheckpointManager] = None

  def attach(self, manager: tf.train.CheckpointManager,
             global_step: tf.Variable) -> None:
    self.manager, self._global_step = manager, global_step
    self._saved_step = int(global_step.numpy())

  def __call__(self, output) -> None:
    del output
    if self._interval and int(self._global_step.numpy()) % self._interval == 0:
      self.save()

  def save(self, final: bool = False) -> str:
    """Saves the step reached unless saved; returns the checkpoint's path."""
    step = int(self._global_step.numpy())
    try:
      if final:
        checkpoint_integrity.wait_for_writes(self.manager.checkpoint)
      if step != self._saved_step:
        self.manager.save(checkpoint_number=step, check_interval=False,
                          options=tf.train.CheckpointOptions(
                              enable_async=self.asynchronous and not final))
        self._saved_step = step
      self.after_save(step, final)
    except (OSError, tf.errors.OpError) as e:
      raise self.failure(step, e) from None
    return os.path.join(self.manager.directory, f"ckpt-{step}")

  def after_save(self, step: int, final: bool) -> None:
    del step, final

  def failure(self, step: int, error: Exception) -> Exception:
    del step
    return error


def finish_writes(*checkpoints: tf.train.Checkpoint) -> None:
  """Waits for each checkpoint's writes in flight; a failure is logged only."""
  for checkpoint in checkpoints:
    try:
      checkpoint_integrity.wait_for_writes(checkpoint)
    except (OSError, tf.errors.OpError) as e:
      logging.warning("a checkpoint write in flight failed: %s", e)


@contextlib.contextmanager
def orbit_prints_to_log(print_fn: Callable[[str], None]
                        ) -> Iterator[Callable[[str], None]]:
  """In the block stdout is the log (orbit prints what it logs); yields
  `print_fn` writing where stdout was."""
  console_stdout = sys.stdout

  def to_console(line: str) -> None:
    with contextlib.redirect_stdout(console_stdout):
      print_fn(line)

  log = logging.get_absl_handler().python_handler.stream
  with contextlib.redirect_stdout(log):
    yield to_console


class ProgressPrinter:
  """Train action: one console line (`console.loop_line`) at each multiple
  of `steps_per_loop` and at the last step (examples/s from the logs, else
  from `batch_size` and the pace), and a log line with the step reached at
  most every HEARTBEAT_SECONDS."""

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
    if time.monotonic() - self._last_heartbeat >= HEARTBEAT_SECONDS:
      self._last_heartbeat = time.monotonic()
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
    logging.info("%s%s", line, f" | grad_norm {logs['gradient_norm']:.3f}"
                 if "gradient_norm" in logs else "")

"""The orbit training loop's pieces that pre-training and fine-tuning share.

Both trainers run Model Garden's `train_lib.OrbitExperimentRunner` (an orbit
Controller over a `base_trainer.Trainer`); orbit calls the controller's train
actions with each loop's logs. Shared here:

| piece | builds on | does |
| --- | --- | --- |
| `StopCheckingTrainer` | `official.core.base_trainer.Trainer` | a loop of `steps_per_loop` steps dispatched in device calls of about a second, with a stop check (`runtime.preemption.install_stop_checks`) after each; no per-call host read of the step |
| `ProgressPrinter` | an orbit train action | one console line per loop (`console.loop_line`) with ETA (`console.Eta`); keeps the last logs |
| `RunnerAction` | an orbit action | an action that needs the runner (its checkpoint manager, its controller): bound once the runner exists |
| `ExperimentRunner` | `train_lib.OrbitExperimentRunner` | binds its `RunnerAction`s after its checkpoint manager and controller are built |
| `AfterLoopController` | `orbit.Controller` | orbit's hook after every loop under a public name (`after_loop`, default `save_on_schedule`: orbit's scheduled save) |

Saving and stopping on SIGTERM is `runtime.preemption`'s
(`PreemptibleController`, `install_stop_checks`). This module is the only one
that touches orbit's private members (`StopCheckingTrainer.train` on
`_train_loop_fn` / `_train_iter`; `AfterLoopController` on
`_maybe_save_checkpoint` and `_checkpoint_options`);
`tests/runtime/orbit_internals_test.py` fails on the orbit / Model Garden
release where one of them changes.

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
import contextlib
import time
from typing import Callable, Dict, Iterator, List, Mapping, Optional

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
from official.core import base_trainer
from official.core import train_lib

from rembert_tf.common import console
from rembert_tf.runtime import stop_checks as stop_checks_lib

# A log line (not the console) with the step reached, at most this often,
# also inside a long loop of steps_per_loop steps.
HEARTBEAT_SECONDS = 60


class StopCheckingTrainer(base_trainer.Trainer):
  """Model Garden's Trainer with a stop check between device calls.

  orbit runs a loop of `steps_per_loop` steps as one device call; a Python
  signal handler only runs when that call returns, so with thousands of steps
  per loop a SIGTERM would wait minutes. Here the loop is dispatched in calls
  sized by `stop_checks` (`runtime.stop_checks.StopCheckSchedule`: about a
  second of steps each, or a fixed count); after each, `between_steps_hooks`
  run and the loop ends early when `stop_requested()` says so (both set by
  `runtime.preemption.install_stop_checks`). The host counts the steps
  itself: the step counter is read from the device once per loop (for its
  log line), never per call.
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.stop_checks = stop_checks_lib.StopCheckSchedule()
    self.stop_requested: Optional[Callable[[], bool]] = None
    self.between_steps_hooks: List[Callable[[], None]] = []
    self._last_heartbeat = -float("inf")

  def train(self, num_steps: tf.Tensor):
    self.train_loop_begin()
    if self._train_loop_fn is None:
      self._train_loop_fn = self.create_train_loop_fn()
    if self._train_iter is None:
      self._train_iter = tf.nest.map_structure(iter, self.train_dataset)
    remaining = int(num_steps)
    while remaining > 0:
      steps = self.stop_checks.next_call(remaining)
      started = time.monotonic()
      self._train_loop_fn(self._train_iter, tf.constant(steps, tf.int32))
      self.stop_checks.observe(steps, time.monotonic() - started)
      remaining -= steps
      self._steps_in_loop += steps
      self._log_heartbeat()
      for hook in self.between_steps_hooks:
        hook()
      if remaining and self.stop_requested and self.stop_requested():
        break
    return self.train_loop_end()

  def _log_heartbeat(self):
    """A log line with the step reached, at most every HEARTBEAT_SECONDS."""
    now = time.monotonic()
    if now - self._last_heartbeat >= HEARTBEAT_SECONDS:
      self._last_heartbeat = now
      logging.info("training: at step %d",
                   self._loop_start_step + self._steps_in_loop)

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_start_step = int(self.global_step.numpy())
    self._steps_in_loop = 0


class ProgressPrinter:
  """Train action: one console line per loop (`console.loop_line`), e.g.
  `step  40/300 | loss 5.2104 | mlm_acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`.

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
  """

  def __init__(self, global_step: tf.Variable, total_steps: int,
               print_fn: Callable[[str], None] = print, *, prefix: str = "",
               accuracy_key: str = "accuracy", accuracy_name: str = "acc",
               batch_size: Optional[int] = None,
               clock: Callable[[], float] = time.monotonic):
    self._global_step = global_step
    self._total_steps = total_steps
    self._print = print_fn
    self._prefix = prefix
    self._accuracy_key = accuracy_key
    self._accuracy_name = accuracy_name
    self._batch_size = batch_size
    # Paced from the first loop's end: its time includes the compilation.
    self._eta = console.Eta(total_steps, clock=clock)
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output: Mapping[str, object]):
    step = int(self._global_step.numpy())
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


class RunnerAction:
  """An orbit action that needs the experiment runner: `ExperimentRunner`
  calls `bind(runner)` once its checkpoint manager and controller exist,
  before the first step; `self.runner` is None until then."""

  runner: Optional[train_lib.OrbitExperimentRunner] = None

  def bind(self, runner: train_lib.OrbitExperimentRunner) -> None:
    self.runner = runner

  def __call__(self, output: Mapping[str, object]):
    raise NotImplementedError


class ExperimentRunner(train_lib.OrbitExperimentRunner):
  """Model Garden's experiment runner that binds each `RunnerAction` among
  its train and eval actions to itself once it is built (the checkpoint
  manager and the controller exist only inside the base constructor)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    for action in (tuple(self.controller.train_actions)
                   + tuple(self.controller.eval_actions)):
      if isinstance(action, RunnerAction):
        action.bind(self)


class AfterLoopController(orbit.Controller):
  """orbit's Controller whose hook after every loop (and at the end of
  training, with `check_interval=False`) is `after_loop`: subclasses override
  it, or `save_on_schedule`, never orbit's private `_maybe_save_checkpoint`."""

  def after_loop(self, check_interval: bool = True) -> bool:
    """What runs after each loop; by default orbit's scheduled save."""
    return self.save_on_schedule(check_interval)

  def save_on_schedule(self, check_interval: bool = True) -> bool:
    """orbit's own save: every `checkpoint_interval` steps, or now when
    `check_interval` is False; True when it saved."""
    return super()._maybe_save_checkpoint(check_interval=check_interval)

  @property
  def async_checkpointing(self) -> bool:
    """Whether the checkpoint manager writes in a background thread."""
    return bool(self._checkpoint_options.experimental_enable_async_checkpoint)

  @contextlib.contextmanager
  def synchronous_saves(self) -> Iterator[None]:
    """orbit's saves in the block are written before they return."""
    options = self._checkpoint_options
    self._checkpoint_options = tf.train.CheckpointOptions(enable_async=False)
    try:
      yield
    finally:
      self._checkpoint_options = options

  def _maybe_save_checkpoint(self, check_interval: bool = True):
    return self.after_loop(check_interval)

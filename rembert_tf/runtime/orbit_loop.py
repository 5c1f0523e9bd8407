"""The orbit training loop's pieces that pre-training and fine-tuning share.

Both trainers run Model Garden's `train_lib.OrbitExperimentRunner` (an orbit
Controller over a `base_trainer.Trainer`); orbit calls the controller's train
actions with each loop's logs. Shared here:

| piece | builds on | does |
| --- | --- | --- |
| `ProgressPrinter` | an orbit train action | one console line per loop (`console.loop_line`) with ETA (`console.Eta`); keeps the last logs |
| `RunnerAction` | an orbit action | an action that needs the runner (its checkpoint manager, its controller): bound once the runner exists |
| `ExperimentRunner` | `train_lib.OrbitExperimentRunner` | binds its `RunnerAction`s after its checkpoint manager and controller are built |

Saving and stopping on SIGTERM is `runtime.preemption`'s (`PreemptibleController`).

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
import tensorflow as tf
from official.core import train_lib

from rembert_tf.common import console


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

"""What runs after each loop of pre-training steps or each evaluation.

orbit calls a controller's train actions with the loop's logs (after
`steps_per_loop` steps, before that loop's checkpoint is saved) and its eval
actions with the evaluation's logs. Pre-training's:

| action | does |
| --- | --- |
| `NonFiniteLossGuard` (train) | stops with `NonFiniteLossError` on a NaN / inf loss, before the weights are saved |
| `ProgressPrinter` (train) | one console line per loop, with ETA; keeps the last logs |
| `EvalRecorder` (eval) | one console line per evaluation; keeps the last logs |

Example:
<!-- snippet: not run: a fragment: `trainer` comes from the caller's code -->
```python
from rembert_tf.pretraining import loop_actions
progress = loop_actions.ProgressPrinter(trainer.global_step, total_steps=300)
progress({"training_loss": 5.21, "masked_lm_accuracy": 0.11})
# step  40/300 | loss 5.2100 | mlm_acc 0.1100
progress.last_logs["global_step"]   # 40
```
"""
from typing import Callable, Dict, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from rembert_tf.common import console
from rembert_tf.pretraining import pretraining_errors


class NonFiniteLossGuard:
  """Train action: stops on a NaN/inf loss before the loop's weights are saved."""

  def __init__(self, global_step: tf.Variable,
               newest_checkpoint_fn: Callable[[], Optional[str]]):
    """`newest_checkpoint_fn` returns the newest complete checkpoint, after
    the writes in flight."""
    self._global_step = global_step
    self._newest_checkpoint_fn = newest_checkpoint_fn

  def __call__(self, output: Mapping[str, object]):
    loss = float(np.asarray(output.get("training_loss", 0.0)))
    if not np.isfinite(loss):
      last = self._newest_checkpoint_fn()
      raise pretraining_errors.NonFiniteLossError(
          f"training loss is {loss} at step {int(self._global_step.numpy())}; "
          f"stopped without saving these weights. The last good checkpoint is "
          f"{last or '(none yet)'}. Lower the learning rate, raise the warmup, "
          "or check the records, then run again (it resumes from there).")


class ProgressPrinter:
  """Train action: one console line per loop (`console.loop_line`), e.g.
  `step  40/300 | loss 5.2104 | mlm_acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`."""

  def __init__(self, global_step: tf.Variable, total_steps: int,
               print_fn: Callable[[str], None] = print):
    self._global_step = global_step
    self._total_steps = total_steps
    self._print = print_fn
    # Paced from the first loop's end: its time includes the compilation.
    self._eta = console.Eta(total_steps)
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output: Mapping[str, object]):
    step = int(self._global_step.numpy())
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    self.last_logs = dict(logs, global_step=step)
    line = console.loop_line(
        step, self._total_steps, loss=logs.get("training_loss"),
        accuracy=logs.get("masked_lm_accuracy"), accuracy_name="mlm_acc",
        examples_per_second=logs.get("examples_per_second"),
        learning_rate=logs.get("learning_rate"),
        eta_seconds=self._eta.observe(step))
    self._print(line)
    logging.info("%s | grad_norm %.3f", line, logs.get("gradient_norm", 0.0))


class EvalRecorder:
  """Eval action: keeps the last evaluation's metrics and prints them."""

  def __init__(self, global_step: tf.Variable,
               print_fn: Callable[[str], None] = print):
    self._global_step = global_step
    self._print = print_fn
    self.last_logs: Dict[str, float] = {}

  def __call__(self, output: Mapping[str, object]):
    logs = {k: float(np.asarray(v)) for k, v in output.items()
            if np.asarray(v).size == 1}
    self.last_logs = logs
    line = (f"eval at step {int(self._global_step.numpy())} | mlm_loss "
            f"{logs.get('lm_example_loss', float('nan')):.4f} | mlm_acc "
            f"{logs.get('masked_lm_accuracy', float('nan')):.4f}")
    self._print(line)
    logging.info(line)

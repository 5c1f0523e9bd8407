"""What runs after each loop of pre-training steps or each evaluation.

orbit calls a controller's train actions with the loop's logs (after
`steps_per_loop` steps, before that loop's checkpoint is saved) and its eval
actions with the evaluation's logs. Pre-training's (the per-loop console
line is the shared `runtime.orbit_loop.ProgressPrinter`):

| action | does |
| --- | --- |
| `NonFiniteLossGuard` (train) | stops with `NonFiniteLossError` on a NaN / inf loss, before the weights are saved |
| `EvalRecorder` (eval) | one console line per evaluation; keeps the last logs |

Example:
<!-- snippet: not run: a fragment: `trainer` comes from the caller's code -->
```python
from rembert_tf.pretraining import loop_actions
evaluations = loop_actions.EvalRecorder(trainer.global_step)
evaluations({"lm_example_loss": 5.3, "masked_lm_accuracy": 0.1})
# eval at step 40 | mlm_loss 5.3000 | mlm_acc 0.1000
evaluations.last_logs["masked_lm_accuracy"]   # 0.1
```
"""
from typing import Callable, Dict, Mapping

from absl import logging
import numpy as np
import tensorflow as tf

from rembert_tf.pretraining import pretraining_errors
from rembert_tf.runtime import orbit_loop


class NonFiniteLossGuard(orbit_loop.RunnerAction):
  """Train action: stops on a NaN/inf loss before the loop's weights are saved.

  A `runtime.orbit_loop.RunnerAction`: the runner it is bound to (the
  pre-training `training_loop.ExperimentRunner`) names the newest complete
  checkpoint, after the writes in flight."""

  def __init__(self, global_step: tf.Variable):
    self._global_step = global_step

  def __call__(self, output: Mapping[str, object]):
    loss = float(np.asarray(output.get("training_loss", 0.0)))
    if not np.isfinite(loss):
      last = (self.runner.newest_complete_checkpoint(wait=True)
              if self.runner is not None else None)
      raise pretraining_errors.NonFiniteLossError(
          f"training loss is {loss} at step {int(self._global_step.numpy())}; "
          f"stopped without saving these weights. The last good checkpoint is "
          f"{last or '(none yet)'}. Lower the learning rate, raise the warmup, "
          "or check the records, then run again (it resumes from there).")


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

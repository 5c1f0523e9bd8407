"""How many training steps a device call runs between two stop checks.

One step per call costs a host round trip per step; one call per loop of
thousands of steps lets a SIGTERM wait minutes. `StopCheckSchedule` sizes
each call to about `seconds` of steps, learned from the calls before (the
first, which compiles, runs one step; a call grows at most `MAX_GROWTH`-fold
over the previous one), or to a fixed number of steps. Under
MultiWorkerMirroredStrategy every worker must run the same calls:
`agree_across_workers` takes the mean of their proposals (one small
all-reduce per call).

Example:
```python
from rembert_tf.runtime import stop_checks
schedule = stop_checks.StopCheckSchedule(seconds=1.0)
schedule.next_call(remaining=1000)        # 1 (the first call compiles)
schedule.observe(steps=1, seconds=0.01)
schedule.next_call(remaining=999)         # 8 (at most 8x the last call)
schedule.observe(steps=8, seconds=0.08)
schedule.next_call(remaining=991)         # 64
```
"""
from typing import Callable, Optional

import tensorflow as tf

from rembert_tf.runtime import strategies

DEFAULT_SECONDS = 1.0
MAX_GROWTH = 8


class StopCheckSchedule:
  """Steps per device call: `fixed_steps` each, or about `seconds` of steps.

  Args:
    seconds: target duration of one call when `fixed_steps` is 0.
    fixed_steps: a fixed number of steps per call (0: sized by time).
    agree: maps this process's proposal to the number every worker uses
      (`agree_across_workers`); None on one host.
  """

  def __init__(self, seconds: float = DEFAULT_SECONDS, fixed_steps: int = 0,
               agree: Optional[Callable[[int], int]] = None):
    if fixed_steps < 0 or seconds <= 0:
      raise ValueError(f"stop checks: fixed_steps {fixed_steps} must be >= 0 "
                       f"and seconds {seconds} > 0.")
    self.seconds = seconds
    self.fixed_steps = fixed_steps
    self._agree = agree
    self._proposal = fixed_steps or 1

  def next_call(self, remaining: int) -> int:
    """The steps of the next call, at most `remaining` (and at least 1)."""
    steps = self._proposal
    # A fixed count and the last step of a loop are the same on every worker.
    if self._agree and not self.fixed_steps and remaining > 1:
      steps = self._agree(steps)
    return max(1, min(steps, remaining))

  def observe(self, steps: int, seconds: float) -> None:
    """Records that a call of `steps` steps took `seconds`."""
    if self.fixed_steps or steps <= 0:
      return
    per_step = max(seconds, 1e-9) / steps
    fitting = int(self.seconds / per_step)
    self._proposal = max(1, min(fitting, steps * MAX_GROWTH))


def agree_across_workers(strategy: tf.distribute.Strategy
                         ) -> Optional[Callable[[int], int]]:
  """Under multi-worker MultiWorkerMirroredStrategy: a call mapping each
  worker's proposal to the mean over all workers (the same integer on every
  one; an all-reduce every worker must join at the same point). None on one
  host, where no agreement is needed."""
  if not strategies.is_multi_worker(strategy):
    return None

  def agree(proposal: int) -> int:
    # float32 sums of small integers are exact, hence equal on every worker.
    values = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant(float(proposal), tf.float32))
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)
    return max(1, int(float(total) // strategy.num_replicas_in_sync))

  return agree

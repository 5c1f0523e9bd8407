"""The one console line of a training loop, its counts and its ETA.

Standard library only; `progress` draws long work without loops with them.

Example:
```python
from rembert_tf.common import console
print(console.loop_line(40, 300, loss=5.2104, accuracy=0.113,
                        examples_per_second=812.4, learning_rate=1e-4,
                        eta_seconds=62))
# step  40/300 | loss 5.2104 | acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02
```
"""
import math
import time
from typing import Callable, Optional


def format_duration(seconds: Optional[float]) -> str:
  """`62.4` -> `1:02`, `3723` -> `1:02:03`; unknown or infinite -> `?`."""
  if seconds is None or not math.isfinite(seconds) or seconds < 0:
    return "?"
  hours, rest = divmod(int(round(seconds)), 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_count(value: float) -> str:
  """`950`, `812.4` -> `812`, `2.5`, `12_345` -> `12.3k`, `4.5e6` -> `4.5M`."""
  for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
    if abs(value) >= threshold:
      return f"{value / threshold:.1f}{suffix}"
  if abs(value) >= 100 or float(value).is_integer():
    return f"{value:.0f}"
  return f"{value:.1f}"


def loop_line(step: int, total_steps: Optional[int] = None, *,
              loss: Optional[float] = None, accuracy: Optional[float] = None,
              accuracy_name: str = "acc",
              examples_per_second: Optional[float] = None,
              learning_rate: Optional[float] = None,
              eta_seconds: Optional[float] = None) -> str:
  """The one console line of a training loop; absent values are left out:
  `step  40/300 | loss 5.2104 | acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`."""
  width = len(str(total_steps)) if total_steps else 0
  parts = [f"step {step:>{width}d}/{total_steps}" if total_steps
           else f"step {step}"]
  if loss is not None:
    parts.append(f"loss {loss:.4f}")
  if accuracy is not None:
    parts.append(f"{accuracy_name} {accuracy:.4f}")
  if examples_per_second is not None:
    parts.append(f"{format_count(examples_per_second)} ex/s")
  if learning_rate is not None:
    parts.append(f"lr {learning_rate:.2e}")
  if eta_seconds is not None:
    parts.append(f"ETA {format_duration(eta_seconds)}")
  return " | ".join(parts)


class Eta:
  """Remaining time at the average pace since the first observation (the
  first step's compilation does not count)."""

  def __init__(self, total: Optional[float],
               clock: Callable[[], float] = time.monotonic):
    self.total, self._clock = total, clock
    self._start = None  # (time, done) of the first observation
    self.rate = None  # units per second since then

  def observe(self, done: float) -> Optional[float]:
    """Records progress `done`; the seconds left (None: unknown)."""
    now = self._clock()
    if self._start is None:
      self._start = (now, done)
      return None
    start_time, start_done = self._start
    if now <= start_time or done <= start_done:
      return None
    self.rate = (done - start_done) / (now - start_time)
    return None if self.total is None else max(self.total - done, 0) / self.rate

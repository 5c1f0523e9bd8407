"""What a person reads on the console: one line per training loop, progress bars with an ETA.

A training loop prints `loop_line`; long work without loops shows a
`progress` bar, redrawn in place on a terminal, else one line every
`interval` seconds (CI, `nohup`, a pipe). Imports neither TensorFlow nor
orbit.

Example:
```python
from rembert_tf.common import console
print(console.loop_line(40, 300, loss=5.2104, accuracy=0.113,
                        examples_per_second=812.4, learning_rate=1e-4,
                        eta_seconds=62))
# step  40/300 | loss 5.2104 | acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02
with console.progress("writing records", total=8, unit="files") as bar:
  for _ in range(8):
    bar.update(1, note="1.2M tokens")
```
"""
import math
import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional, TextIO

from absl import logging


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


def format_rate(per_second: float, unit: str) -> str:
  if per_second >= 10 or per_second == 0:
    return f"{format_count(per_second)} {unit}/s"
  return f"{per_second:.2f} {unit}/s"


def loop_line(step: int, total_steps: Optional[int] = None, *,
              loss: Optional[float] = None, accuracy: Optional[float] = None,
              accuracy_name: str = "acc",
              examples_per_second: Optional[float] = None,
              learning_rate: Optional[float] = None,
              eta_seconds: Optional[float] = None,
              extra: Optional[Mapping[str, Any]] = None) -> str:
  """The one console line of a training loop; absent values are left out:
  `step  40/300 | loss 5.2104 | acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`."""
  width = len(str(total_steps)) if total_steps else 0
  parts = [f"step {step:>{width}d}/{total_steps}" if total_steps
           else f"step {step}"]
  if loss is not None:
    parts.append(f"loss {loss:.4f}")
  if accuracy is not None:
    parts.append(f"{accuracy_name} {accuracy:.4f}")
  parts += [f"{name} {value:.4g}" if isinstance(value, float)
            else f"{name} {value}" for name, value in (extra or {}).items()]
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


class Progress:
  """A progress bar with rate and ETA on `stream` (default stderr), redrawn
  in place on a terminal, else one line every `interval` seconds (also in
  the log); a closing line with the total time. Thread-safe."""

  def __init__(self, description: str, total: Optional[int] = None,
               unit: str = "items", stream: Optional[TextIO] = None,
               interval: float = 30.0, redraw_seconds: float = 0.2,
               width: int = 24, clock: Callable[[], float] = time.monotonic,
               tty: Optional[bool] = None):
    self.description, self.total, self.unit = description, total, unit
    self.done, self.note = 0, ""
    self.stream = stream if stream is not None else sys.stderr
    if tty is None:
      tty = bool(getattr(self.stream, "isatty", None) and self.stream.isatty())
    self.is_tty, self._width, self._clock = tty, width, clock
    self._wait = redraw_seconds if tty else interval
    self._started = self._last_output = clock()
    self._closed = False
    self._lock = threading.Lock()
    self._eta = Eta(total, clock)
    self._eta.observe(0)

  def update(self, advance: int = 1, note: Optional[str] = None) -> None:
    """Counts `advance` more units; `note` (e.g. `1.2M tokens`) is shown after."""
    with self._lock:
      self.done += advance
      self.note = self.note if note is None else note
      eta = self._eta.observe(self.done)
      now = self._clock()
      if now - self._last_output < self._wait:
        return
      self._last_output = now
      parts = [f"{format_count(self.done)} {self.unit}"]
      if self.total:
        parts = [f"{min(self.done / self.total, 1.0):4.0%} "
                 f"{format_count(self.done)}/{format_count(self.total)} "
                 f"{self.unit}"]
      if self._eta.rate:
        parts.append(format_rate(self._eta.rate, self.unit))
      if self.total:
        parts.append(f"ETA {format_duration(eta)}")
      self._emit(" | ".join(parts + ([self.note] if self.note else [])), False)

  def _emit(self, status: str, final: bool) -> None:
    if self.is_tty:
      bar = ""
      if self.total:
        filled = int(self._width * min(self.done / self.total, 1.0))
        bar = "[" + "#" * filled + "." * (self._width - filled) + "] "
      self.stream.write(f"\r{self.description} {bar}{status}\x1b[K"
                        + ("\n" if final else ""))
    else:
      self.stream.write(f"{self.description}: {status}\n")
    self.stream.flush()
    logging.info("%s: %s", self.description, status)

  def close(self) -> None:
    """Writes the closing line: units, total time, average rate."""
    with self._lock:
      if self._closed:
        return
      self._closed = True
      elapsed = self._clock() - self._started
      rate = self.done / elapsed if elapsed > 0 else 0.0
      status = (f"{format_count(self.done)} {self.unit} in "
                f"{format_duration(elapsed)} ({format_rate(rate, self.unit)})")
      self._emit(status + (f" | {self.note}" if self.note else ""), True)

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> bool:
    self.close()
    return False


def progress(description: str, total: Optional[int] = None,
             unit: str = "items", **kwargs) -> Progress:
  """`with progress("converting", total=n, unit="tensors") as bar: bar.update()`."""
  return Progress(description, total=total, unit=unit, **kwargs)

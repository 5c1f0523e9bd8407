"""A progress bar with rate and ETA for long work without training loops.

Redrawn in place on a terminal, else one line every `interval` seconds (CI,
`nohup`, a pipe), each also in the log (absl); the counts and the ETA are
`console`'s.

Example:
```python
from rembert_tf.common import progress
with progress.Progress("writing records", total=8, unit="files") as bar:
  for _ in range(8):
    bar.update(1, note="1.2M tokens")
```
"""
import sys
import threading
import time
from typing import Callable, Optional, TextIO

from absl import logging

from rembert_tf.common import console


def format_rate(per_second: float, unit: str) -> str:
  if per_second >= 10 or per_second == 0:
    return f"{console.format_count(per_second)} {unit}/s"
  return f"{per_second:.2f} {unit}/s"


class Progress:
  """The bar on `stream` (default stderr), as the module doc says, and a
  closing line with the total time. Thread-safe."""

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
    self._eta = console.Eta(total, clock)
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
      parts = [f"{console.format_count(self.done)} {self.unit}"]
      if self.total:
        parts = [f"{min(self.done / self.total, 1.0):4.0%} "
                 f"{console.format_count(self.done)}/{console.format_count(self.total)} "
                 f"{self.unit}"]
      if self._eta.rate:
        parts.append(format_rate(self._eta.rate, self.unit))
      if self.total:
        parts.append(f"ETA {console.format_duration(eta)}")
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
      status = (f"{console.format_count(self.done)} {self.unit} in "
                f"{console.format_duration(elapsed)} ({format_rate(rate, self.unit)})")
      self._emit(status + (f" | {self.note}" if self.note else ""), True)

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> bool:
    self.close()
    return False


r"""Console output for people: one line per loop, a progress bar, a quiet start-up.

Every command of rembert_tf prints what a person wants to read and nothing
else:

* a training loop prints one line per loop (`loop_line`): step, loss,
  accuracy, examples/s, learning rate, ETA;
* long work without loops (records, conversion, export, sweeps) shows a
  progress bar with an ETA (`progress`); when stderr is not a
  terminal (CI, `nohup`, a pipe) the bar becomes one plain line every
  `interval` seconds;
* everything else (absl, TensorFlow's C++ and Python logs, orbit's controller
  log, Python warnings) stays off the console: TensorFlow's start-up lines
  (`quiet_tensorflow_import`), orbit's prints (`orbit_logs_to_file`); the log
  file that receives them is `rembert_tf.common.command_output`'s.
  `--verbose` (`define_verbose_flag`) shows it all on the console as well.

TensorFlow reads `TF_CPP_MIN_LOG_LEVEL` when it is imported, before flags are
parsed, so `quiet_tensorflow_import()` runs at the import of the command
modules and looks at `sys.argv` for `--verbose` itself.

This module imports neither TensorFlow nor orbit at module level: it runs
before them.

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
import contextlib
import io
import math
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, TextIO

from absl import flags
from absl import logging

VERBOSE_FLAG = "verbose"


# ---------------------------------------------------------------------------
# Formatting.
def format_duration(seconds: Optional[float]) -> str:
  """`62.4` -> `1:02`, `3723` -> `1:02:03`; unknown or infinite -> `?`."""
  if seconds is None or not math.isfinite(seconds) or seconds < 0:
    return "?"
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  if hours:
    return f"{hours}:{minutes:02d}:{secs:02d}"
  return f"{minutes}:{secs:02d}"


def format_count(value: float) -> str:
  """`950` -> `950`, `812.4` -> `812`, `2.5` -> `2.5`, `12_345` -> `12.3k`, `4.5e6` -> `4.5M`."""
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


def loop_line(step: int,
              total_steps: Optional[int] = None,
              *,
              loss: Optional[float] = None,
              accuracy: Optional[float] = None,
              accuracy_name: str = "acc",
              examples_per_second: Optional[float] = None,
              learning_rate: Optional[float] = None,
              eta_seconds: Optional[float] = None,
              extra: Optional[Mapping[str, Any]] = None) -> str:
  """The one console line of a training loop; absent values are left out.

  `step  40/300 | loss 5.2104 | acc 0.1130 | 812 ex/s | lr 1.00e-04 | ETA 1:02`
  (the step is padded to the width of the total, so lines stay aligned).
  """
  if total_steps:
    width = len(str(total_steps))
    parts = [f"step {step:>{width}d}/{total_steps}"]
  else:
    parts = [f"step {step}"]
  if loss is not None:
    parts.append(f"loss {loss:.4f}")
  if accuracy is not None:
    parts.append(f"{accuracy_name} {accuracy:.4f}")
  for name, value in (extra or {}).items():
    parts.append(f"{name} {value:.4g}" if isinstance(value, float)
                 else f"{name} {value}")
  if examples_per_second is not None:
    parts.append(f"{format_count(examples_per_second)} ex/s")
  if learning_rate is not None:
    parts.append(f"lr {learning_rate:.2e}")
  if eta_seconds is not None:
    parts.append(f"ETA {format_duration(eta_seconds)}")
  return " | ".join(parts)


class Eta:
  """Remaining time from the average pace since the first observation.

  The first observation is the reference point, so the time to compile the
  first step (or open the first file) does not inflate the estimate.

  >>> clock = iter([0.0, 10.0]).__next__
  >>> eta = Eta(total=100, clock=clock)
  >>> eta.observe(20), eta.observe(40)
  (None, 30.0)
  """

  def __init__(self, total: Optional[float], clock: Callable[[], float] = time.monotonic):
    self.total = total
    self._clock = clock
    self._start = None  # (time, done) of the first observation.
    self.rate = None  # Units per second since the first observation.

  def observe(self, done: float) -> Optional[float]:
    """Records progress `done`; returns the seconds left (None: unknown)."""
    now = self._clock()
    if self._start is None:
      self._start = (now, done)
      return None
    start_time, start_done = self._start
    if now <= start_time or done <= start_done:
      return None
    self.rate = (done - start_done) / (now - start_time)
    if self.total is None:
      return None
    return max(self.total - done, 0) / self.rate


# ---------------------------------------------------------------------------
# Progress bar.
class Progress:
  """A progress bar with rate and ETA on stderr; plain periodic lines off a TTY.

  On a terminal the bar is redrawn in place at most every `redraw_seconds`;
  elsewhere one line is written every `interval` seconds. Either way a last
  line with the total time is written by `close()` (or leaving the `with`
  block), and periodic lines also go to the log file. Thread-safe: workers'
  results may be counted from a reader thread.
  """

  def __init__(self, description: str, total: Optional[int] = None,
               unit: str = "items", stream: Optional[TextIO] = None,
               interval: float = 30.0, redraw_seconds: float = 0.2,
               width: int = 24, clock: Callable[[], float] = time.monotonic,
               tty: Optional[bool] = None):
    self.description = description
    self.total = total
    self.unit = unit
    self.done = 0
    self.note = ""
    self._stream = stream
    self._interval = interval
    self._redraw_seconds = redraw_seconds
    self._width = width
    self._clock = clock
    self._started = clock()
    self._last_output = self._started
    self._tty = tty
    self._drawn = False
    self._closed = False
    self._lock = threading.Lock()
    self._eta = Eta(total, clock)
    self._eta.observe(0)

  @property
  def stream(self) -> TextIO:
    return self._stream if self._stream is not None else sys.stderr

  @property
  def is_tty(self) -> bool:
    if self._tty is None:
      isatty = getattr(self.stream, "isatty", None)
      self._tty = bool(isatty and isatty())
    return self._tty

  def update(self, advance: int = 1, note: Optional[str] = None) -> None:
    """Counts `advance` more units; `note` (e.g. `1.2M tokens`) is shown after."""
    self.set(None, advance=advance, note=note)

  def set(self, done: Optional[int], advance: int = 0,
          note: Optional[str] = None) -> None:
    """Sets the units done (absolute), or adds `advance` when `done` is None."""
    with self._lock:
      self.done = self.done + advance if done is None else done
      if note is not None:
        self.note = note
      eta = self._eta.observe(self.done)
      now = self._clock()
      wait = self._redraw_seconds if self.is_tty else self._interval
      if now - self._last_output < wait:
        return
      self._last_output = now
      self._emit(self._status(eta), final=False)

  def _status(self, eta: Optional[float]) -> str:
    rate = self._eta.rate
    if self.total:
      share = min(self.done / self.total, 1.0)
      counts = (f"{share:4.0%} {format_count(self.done)}/"
                f"{format_count(self.total)} {self.unit}")
    else:
      counts = f"{format_count(self.done)} {self.unit}"
    parts = [counts]
    if rate:
      parts.append(format_rate(rate, self.unit))
    if self.total:
      parts.append(f"ETA {format_duration(eta)}")
    if self.note:
      parts.append(self.note)
    return " | ".join(parts)

  def _bar(self) -> str:
    if not self.total:
      return ""
    filled = int(self._width * min(self.done / self.total, 1.0))
    return "[" + "#" * filled + "." * (self._width - filled) + "] "

  def _emit(self, status: str, final: bool) -> None:
    if self.is_tty:
      line = f"{self.description} {self._bar()}{status}"
      end = "\n" if final else ""
      self.stream.write("\r" + line + "\x1b[K" + end)
      self._drawn = not final
    else:
      line = f"{self.description}: {status}"
      self.stream.write(line + "\n")
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
      if self.note:
        status += f" | {self.note}"
      self._emit(status, final=True)

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> bool:
    self.close()
    return False


def progress(description: str, total: Optional[int] = None,
             unit: str = "items", **kwargs) -> Progress:
  """`with progress("converting", total=n, unit="tensors") as bar: bar.update()`."""
  return Progress(description, total=total, unit=unit, **kwargs)


# ---------------------------------------------------------------------------
# Quiet start-up: what stays off the console.
def verbose_requested(argv: Optional[Iterable[str]] = None) -> bool:
  """True when the command line asks for `--verbose` (before flags are parsed)."""
  argv = sys.argv if argv is None else argv
  return any(a in ("--verbose", "--verbose=true", "--verbose=True",
                   "--verbose=1") for a in argv)


def quiet_tensorflow_import(argv: Optional[Iterable[str]] = None) -> None:
  """Hides TensorFlow's import-time INFO/WARNING lines unless `--verbose`.

  (oneDNN, cpu_feature_guard, "Could not find cuda drivers"); an explicit
  `TF_CPP_MIN_LOG_LEVEL` in the environment wins. Call before TF is imported.
  """
  if not verbose_requested(argv):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def define_verbose_flag() -> None:
  """Defines `--verbose` once per process (every command shares it)."""
  if VERBOSE_FLAG not in flags.FLAGS:
    flags.DEFINE_bool(VERBOSE_FLAG, False, "Show every log line on the console "
                      "(absl, TensorFlow, orbit); by default they go to the "
                      "log file only.")


class _WithoutOrbitPrints(io.TextIOBase):
  """A stdout that drops what orbit's controller module prints (it logs the
  same line first) and passes everything else on to the stream it replaced."""

  def __init__(self, stream: TextIO):
    super().__init__()
    self._stream = stream

  def write(self, text: str) -> int:
    # `print` is a builtin: the frame above `write` is the one that printed.
    caller = sys._getframe(1).f_code.co_filename  # pylint: disable=protected-access
    if caller.replace("\\", "/").endswith("orbit/controller.py"):
      return len(text)
    return self._stream.write(text)

  def flush(self) -> None:
    self._stream.flush()


@contextlib.contextmanager
def orbit_logs_to_file():
  """orbit's controller logs every line and prints it as well; in the block
  its lines go to the log only (the console has the trainer's own lines)."""
  with contextlib.redirect_stdout(_WithoutOrbitPrints(sys.stdout)):
    yield

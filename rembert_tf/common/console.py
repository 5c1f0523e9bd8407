r"""Console output for people: one line per loop, a progress bar, full logs in a file.

Every command of rembert_tf prints what a person wants to read and nothing
else:

* a training loop prints one line per loop (`loop_line`): step, loss,
  accuracy, examples/s, learning rate, ETA;
* long work without loops (records, conversion, export, sweeps) shows a
  progress bar with an ETA (`progress`, `track`); when stderr is not a
  terminal (CI, `nohup`, a pipe) the bar becomes one plain line every
  `interval` seconds;
* everything else (absl, TensorFlow's C++ and Python logs, orbit's controller
  log, Python warnings) goes to a log file (`start_command_output`), copied
  into `OUTPUT_DIR/logs/` when the command ends; `--verbose` shows it all on
  the console as well.

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
for line in console.track(["a", "b"], "reading", unit="files"):
  pass
```
"""
import contextlib
import io
import math
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, TextIO

from absl import flags
from absl import logging

VERBOSE_FLAG = "verbose"
LOG_SUBDIR = "logs"
# Where a command's log is written while it runs (it is copied into
# OUTPUT_DIR/logs/ at the end: outputs are written atomically, so nothing may
# appear in OUTPUT_DIR before the command's own output does).
LOG_TMP_DIR = os.path.join(tempfile.gettempdir(), "rembert_tf-logs")


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


def track(items: Iterable[Any], description: str, total: Optional[int] = None,
          unit: str = "items", **kwargs) -> Iterator[Any]:
  """Yields `items`, counting each one on a progress bar."""
  if total is None and hasattr(items, "__len__"):
    total = len(items)
  with Progress(description, total=total, unit=unit, **kwargs) as bar:
    for item in items:
      yield item
      bar.update(1)


# ---------------------------------------------------------------------------
# Quiet start-up and the log file.
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


@contextlib.contextmanager
def orbit_logs_to_file():
  """orbit's controller prints every log line as well as logging it; this
  keeps the log (the file) and drops the print (the console).

  orbit has no option for it: its module-level `_log` is replaced while the
  block runs.
  """
  try:
    from orbit import controller  # pylint: disable=g-import-not-at-top
  except ImportError:
    yield
    return
  original = getattr(controller, "_log", None)
  if original is None:
    yield
    return
  controller._log = logging.info  # pylint: disable=protected-access
  try:
    yield
  finally:
    controller._log = original  # pylint: disable=protected-access


def remove_old_logs(max_age_days: float = 7.0) -> None:
  """Removes logs of failed or refused runs older than `max_age_days` from
  LOG_TMP_DIR (a successful run's log is moved to its output directory)."""
  cutoff = time.time() - max_age_days * 86400
  try:
    names = os.listdir(LOG_TMP_DIR)
  except OSError:
    return
  for name in names:
    path = os.path.join(LOG_TMP_DIR, name)
    try:
      if name.endswith(".log") and os.path.getmtime(path) < cutoff:
        os.remove(path)
    except OSError:
      pass  # Another process removed it, or it is not ours to remove.


def _exit_code(code: Any) -> int:
  if code is None:
    return 0
  if isinstance(code, bool):
    return int(code)
  if isinstance(code, int):
    return code
  return 1  # sys.exit("message")


class CommandOutput:
  """The console and log file of one command run (see `start_command_output`)."""

  def __init__(self, program: str, output_dir: Optional[str], verbose: bool,
               keep_log_exit_codes: Iterable[int] = (0,),
               keep_log_when: Optional[Callable[[int, str], bool]] = None):
    self.program = program
    self.output_dir = output_dir
    self.verbose = verbose
    self.keep_log_exit_codes = tuple(keep_log_exit_codes)
    self.keep_log_when = keep_log_when
    self.label = ""  # tells apart the logs of a job's processes, e.g. worker1
    self.stamp = time.strftime("%Y%m%d-%H%M%S")
    self.log_path: Optional[str] = None  # Where the log is being written.
    self.final_log_path: Optional[str] = None  # Where it ends up.
    self._log_file = None
    self._terminal_stderr = None
    self._finished = False

  @property
  def log_name(self) -> str:
    label = f"-{self.label}" if self.label else ""
    return f"{self.program}-{self.stamp}{label}.log"

  def keeps_log(self, exit_code: int) -> bool:
    """Whether the log of a run that ended with `exit_code` goes to
    OUTPUT_DIR/logs/."""
    if not self.output_dir:
      return False
    return exit_code in self.keep_log_exit_codes or bool(
        self.keep_log_when and self.keep_log_when(exit_code, self.output_dir))

  def start(self) -> "CommandOutput":
    os.makedirs(LOG_TMP_DIR, exist_ok=True)
    remove_old_logs()
    self.log_path = os.path.join(LOG_TMP_DIR,
                                 f"{self.program}-{self.stamp}-{os.getpid()}.log")
    # A local temporary file (never a user path); copied to OUTPUT_DIR/logs
    # through fileio when the run keeps its output.
    self._log_file = io.open(self.log_path, "a", encoding="utf-8",  # pylint: disable=consider-using-with
                             buffering=1)
    self._log_file.write(f"{self.program} started {time.ctime()}\n"
                         f"command line: {' '.join(sys.argv)}\n")
    self._route_absl_to_file()
    if not self.verbose:
      self._route_fd2_to_file()
    threading.excepthook = _log_thread_exception
    self.flags_parsed()
    return self

  def flags_parsed(self, output_dir: Optional[str] = None) -> None:
    """After flag parsing: the output directory, and which log lines the
    console still shows (errors; everything with --verbose)."""
    if output_dir is not None:
      self.output_dir = output_dir
    if self.verbose:
      flags.FLAGS.alsologtostderr = True
    else:
      logging.set_stderrthreshold(logging.ERROR)

  def _route_absl_to_file(self) -> None:
    """absl (and through it TensorFlow's Python logs, orbit, warnings) -> file."""
    import logging as std_logging  # pylint: disable=g-import-not-at-top
    logging.use_absl_handler()  # On the root logger (app.run does it too).
    handler = logging.get_absl_handler().python_handler
    handler.stream = self._log_file
    # Before flags are parsed absl writes every record to stderr. A command
    # parses them right after this (app.run), or never (argparse commands):
    # either way the defaults hold until then.
    if not flags.FLAGS.is_parsed():
      flags.FLAGS.mark_as_parsed()
    logging.set_verbosity(logging.INFO)
    std_logging.captureWarnings(True)

  def _route_fd2_to_file(self) -> None:
    """TensorFlow's C++ runtime writes straight to file descriptor 2 (cuInit,
    XLA, oneDNN): point that descriptor at the log file, and Python's
    `sys.stderr` (errors, tracebacks, progress bars) at the terminal."""
    try:
      sys.stderr.flush()
      terminal_fd = os.dup(2)
    except (OSError, ValueError):
      return
    log_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    self._terminal_stderr = io.TextIOWrapper(
        io.FileIO(terminal_fd, "w", closefd=True),
        encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
        errors="backslashreplace", line_buffering=True)
    sys.stderr = self._terminal_stderr

  def finish(self, exit_code: int) -> Optional[str]:
    """Copies the log to OUTPUT_DIR/logs/ when the run kept its output.

    Returns the final log path (None when the log stays in LOG_TMP_DIR).
    """
    if self._finished:
      return self.final_log_path
    self._finished = True
    if self._log_file is None:
      return None
    self._log_file.write(f"{self.program} ended {time.ctime()} "
                         f"(exit code {exit_code})\n")
    self._log_file.flush()
    if not self.keeps_log(exit_code):
      return None
    from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
    try:
      if not fileio.isdir(self.output_dir):
        return None
      target_dir = fileio.join(self.output_dir, LOG_SUBDIR)
      fileio.makedirs(target_dir)
      target = fileio.join(target_dir, self.log_name)
      fileio.copy(self.log_path, target, overwrite=True)
      os.remove(self.log_path)
    except OSError as e:
      print(f"{self.program}: the log stays at {self.log_path} (copying it to "
            f"{self.output_dir} failed: {e})", file=sys.stderr, flush=True)
      return None
    self.final_log_path = target
    print(f"{self.program}: full log: {target}", file=sys.stderr, flush=True)
    return target


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
  """A background thread's traceback goes to the log (a warning), not the
  console: the command reports what failed in its own one line (e.g.
  TensorFlow's cluster watcher threads fail once a peer worker is gone)."""
  if args.exc_type is SystemExit:
    return
  logging.warning("thread %s ended with an error",
                  args.thread.name if args.thread else "?",
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def start_command_output(program: str, output_dir: Optional[str] = None,
                         verbose: Optional[bool] = None,
                         keep_log_exit_codes: Iterable[int] = (0,),
                         keep_log_when: Optional[Callable[[int, str], bool]]
                         = None) -> CommandOutput:
  """Sends absl/TF/orbit logs to a log file; the console keeps only stdout,
  errors and progress. Call once per process (a command's `run()` does it;
  library calls and tests do not), before absl parses the flags: libraries
  run start-up callbacks right after parsing (Model Garden counts the GPUs,
  which logs cuInit on a machine without one). `verbose=None` looks for
  `--verbose` in `sys.argv`; call `flags_parsed(output_dir)` once parsed.

  The log is written under LOG_TMP_DIR while the command runs, and copied to
  `output_dir/logs/PROGRAM-TIME.log` when it ends with an exit code in
  `keep_log_exit_codes`, or when `keep_log_when(exit_code, output_dir)` says
  so (by default a refused or failed run writes nothing into `output_dir`).
  Without `output_dir` the log stays in LOG_TMP_DIR.
  """
  global _current
  if verbose is None:
    verbose = verbose_requested()
  output = CommandOutput(program, output_dir, verbose, keep_log_exit_codes,
                         keep_log_when)
  _current = output
  return output.start()


_current: Optional[CommandOutput] = None


def set_output_dir(path: str) -> None:
  """Names the directory whose `logs/` receives this command's log, for a
  command that chooses it only inside `main` (e.g. a default with the time).
  Does nothing outside a command (library calls, tests)."""
  if _current is not None:
    _current.output_dir = path


def set_log_label(label: str) -> None:
  """Adds `-LABEL` to this command's log name (e.g. `worker1`: the processes
  of one job, started in the same second, keep one log each). Does nothing
  outside a command."""
  if _current is not None:
    _current.label = label


def run_with_command_output(main: Callable[[Any], Any], argv: Any,
                            output: CommandOutput) -> Any:
  """Calls `main(argv)` and finishes `output` with its exit code."""
  code = 1
  try:
    result = main(argv)
    code = _exit_code(result)
    return result
  except SystemExit as e:
    code = _exit_code(e.code)
    raise
  finally:
    output.finish(code)



def run_and_exit_now(main: Callable[[Any], Any], argv: Any,
                     output: CommandOutput) -> None:
  """Calls `main(argv)`, finishes `output` with its exit code, and ends the
  process at once (`os._exit`), on every path: done, an error, SystemExit.

  A command whose work is complete when `main` returns (a training run whose
  last checkpoint is written) skips the interpreter's teardown: with a
  tf.distribute strategy and datasets alive it takes seconds, and objects
  finalised during it (TensorFlow's checkpoint objects) log into a log file
  already closed ("--- Logging error --- ... I/O operation on closed file").
  An unexpected exception keeps its traceback, on the console and in the log.
  """
  try:
    code = _exit_code(main(argv))
  except SystemExit as e:
    code = _exit_code(e.code)
  except BaseException:  # pylint: disable=broad-except
    logging.exception("%s failed", output.program)
    traceback.print_exc()
    code = 1
  output.finish(code)
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  logging.flush()
  os._exit(code)  # pylint: disable=protected-access

"""The log file of a command run: every log line, kept with the command's output.

Everything a person does not read on the console (absl, TensorFlow's C++ and
Python logs, orbit's controller log, Python warnings) goes to a log file
(`start_command_output`), copied to the command's log directory when it
ends; with `--verbose` the console shows it as well. What the console shows
(loop lines, progress bars, a quiet start-up) is `rembert_tf.common.console`'s.

Where the log goes is one rule (`log_dir_for`): `--log_dir` when given;
else beside an artefact (`OUTPUT.logs/` for a SavedModel, a Hugging Face
folder, a keras-hub preset, a corpus, records: what a user uploads or serves
holds only what its format defines); else inside a run directory
(`MODEL_DIR/logs/`, a fine-tuning `OUTPUT_DIR/logs/`).

A run that fails or is refused writes nothing beside or into `OUTPUT_DIR`:
its log stays under LOG_TMP_DIR (removed after a week, `remove_old_logs`),
or goes to `--log_dir` when one is given.

This module imports neither TensorFlow nor orbit: it runs before them. Builds
on absl's logging handler (its stream becomes the log file) and `os.dup2`
for TensorFlow's C++ logs, which write to file descriptor 2 directly.

Example (what `rembert_tf.cli.harness` does for a command):
```python
from rembert_tf.common import command_output

def main(argv):
  print("result")                    # the console
  return 0

output = command_output.start_command_output("rembert-x", "out")
command_output.run_with_command_output(main, [], output)
# out/logs/rembert-x-TIME.log holds the absl and TensorFlow lines
print(command_output.log_dir_for("export/rembert", artefact=True))
# export/rembert.logs
```
"""
import io
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Iterable, Optional

from absl import flags
from absl import logging

from rembert_tf.common import console

LOG_SUBDIR = "logs"  # inside a run directory
ARTEFACT_LOG_SUFFIX = ".logs"  # beside an artefact: OUTPUT + ".logs"
LOG_DIR_FLAG = "log_dir"
# Where a command's log is written while it runs (it is copied to its log
# directory at the end: outputs are written atomically, so nothing may
# appear there before the command's own output does).
LOG_TMP_DIR = os.path.join(tempfile.gettempdir(), "rembert_tf-logs")


def log_dir_for(output_dir: str, artefact: bool,
                log_dir: Optional[str] = None) -> str:
  """Where a command writing `output_dir` keeps its log: `log_dir` when
  given; beside an artefact (`OUTPUT.logs`: the artefact holds only what its
  format defines); inside a run directory (`OUTPUT/logs`)."""
  if log_dir:
    return log_dir
  output_dir = output_dir.rstrip("/")
  if artefact:
    return output_dir + ARTEFACT_LOG_SUFFIX
  return output_dir + "/" + LOG_SUBDIR


def define_log_dir_flag() -> None:
  """Defines `--log_dir` once per process (every command shares it)."""
  if LOG_DIR_FLAG not in flags.FLAGS:
    flags.DEFINE_string(LOG_DIR_FLAG, None, "Directory for this command's log "
                        "file, kept on every exit (default: beside an artefact "
                        "output, OUTPUT.logs/, or inside a run directory, "
                        "MODEL_DIR/logs/, on success).")


def remove_old_logs(max_age_days: float = 7.0) -> None:
  """Removes logs of failed or refused runs older than `max_age_days` from
  LOG_TMP_DIR (a successful run's log is moved to its log directory)."""
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
               keep_log_when: Optional[Callable[[int, str], bool]] = None,
               artefact: bool = False):
    self.program = program
    self.output_dir = output_dir
    self.artefact = artefact  # the log goes beside output_dir, not inside
    self.log_dir: Optional[str] = None  # --log_dir: overrides both
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
    """Whether the log of a run that ended with `exit_code` goes to its log
    directory (always with --log_dir: nothing of the output is touched)."""
    if self.log_dir:
      return True
    if not self.output_dir:
      return False
    return exit_code in self.keep_log_exit_codes or bool(
        self.keep_log_when and self.keep_log_when(exit_code, self.output_dir))

  def start(self) -> "CommandOutput":
    os.makedirs(LOG_TMP_DIR, exist_ok=True)
    remove_old_logs()
    self.log_path = os.path.join(LOG_TMP_DIR,
                                 f"{self.program}-{self.stamp}-{os.getpid()}.log")
    # A local temporary file (never a user path); copied to the log directory
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

  def flags_parsed(self, output_dir: Optional[str] = None,
                   log_dir: Optional[str] = None) -> None:
    """After flag parsing: the output directory, `--log_dir`, and which log
    lines the console still shows (errors; everything with --verbose)."""
    if output_dir is not None:
      self.output_dir = output_dir
    if log_dir:
      self.log_dir = log_dir
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
    # parses them right after this (app.run): the defaults hold until then.
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
    """Copies the log to its log directory (`log_dir_for`) when the run kept
    its output, or to --log_dir.

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
    target_dir = log_dir_for(self.output_dir or "", self.artefact, self.log_dir)
    try:
      if not self.log_dir and not fileio.isdir(self.output_dir):
        return None
      fileio.makedirs(target_dir)
      target = fileio.join(target_dir, self.log_name)
      fileio.copy(self.log_path, target, overwrite=True)
      os.remove(self.log_path)
    except OSError as e:
      print(f"{self.program}: the log stays at {self.log_path} (copying it to "
            f"{target_dir} failed: {e})", file=sys.stderr, flush=True)
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
                         = None, artefact: bool = False) -> CommandOutput:
  """Sends absl/TF/orbit logs to a log file; the console keeps only stdout,
  errors and progress. Call once per process (a command's `run()` does it;
  library calls and tests do not), before absl parses the flags: libraries
  run start-up callbacks right after parsing (Model Garden counts the GPUs,
  which logs cuInit on a machine without one). `verbose=None` looks for
  `--verbose` in `sys.argv`; call `flags_parsed(output_dir)` once parsed.

  The log is written under LOG_TMP_DIR while the command runs, and copied to
  `log_dir_for(output_dir, artefact)/PROGRAM-TIME.log` (`OUTPUT.logs/` for an
  `artefact`, `OUTPUT/logs/` otherwise) when it ends with an exit code in
  `keep_log_exit_codes`, or when `keep_log_when(exit_code, output_dir)` says
  so (by default a refused or failed run writes nothing there). Without
  `output_dir` the log stays in LOG_TMP_DIR; a `--log_dir` given to
  `flags_parsed` receives it on every exit.
  """
  global _current
  if verbose is None:
    verbose = console.verbose_requested()
  output = CommandOutput(program, output_dir, verbose, keep_log_exit_codes,
                         keep_log_when, artefact)
  _current = output
  return output.start()


_current: Optional[CommandOutput] = None


def set_output_dir(path: str) -> None:
  """Names the output directory that decides where this command's log goes, for a
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

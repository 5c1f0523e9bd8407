"""How every command runs: absl flags and `--help`, one-line errors, the log file.

Builds on absl (`app.run`, its flags and validators, its logging handler,
whose stream becomes the log file) and `os.dup2` for TensorFlow's C++ logs;
imports neither TensorFlow nor orbit. A refused flag is one line
`PROG: error: ...`, exit 2 for the command line itself, 1 for a value out of
bounds or refused by `require`. The log is written under LOG_TMP_DIR and
copied, when the run kept its output, to `log_dir_for`.
"""
import contextlib
import io
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging

from rembert_tf.common import errors

# Where a command's log is written while it runs: nothing may appear beside or
# in an output before the output itself does.
LOG_TMP_DIR = os.path.join(tempfile.gettempdir(), "rembert_tf-logs")
_HELP_FLAGS = ("help", "?", "helpshort", "helpfull", "helpxml")
# How absl names a refused value, of a flag or of a validator's flag.
_REFUSED = re.compile(r"flag --([\w.-]+)=(.*?): (.*)$")


def verbose_requested(argv: Optional[Sequence[str]] = None) -> bool:
  """`--verbose` on the command line (read before flags are parsed)."""
  return any(a in ("--verbose", "--verbose=true", "--verbose=True",
                   "--verbose=1") for a in (sys.argv if argv is None else argv))


def quiet_tensorflow_import(argv: Optional[Sequence[str]] = None) -> None:
  """Hides TensorFlow's import-time lines unless `--verbose`; call before it
  loads (an explicit TF_CPP_MIN_LOG_LEVEL wins)."""
  if not verbose_requested(argv):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def require(name: str, check: Callable, why: str) -> None:
  """The flag `name`, when given, must pass `check`; `why` says what to give."""
  flags.register_validator(name, lambda value: value is None or check(value),
                           message=f"{why}.")


def _refused_value(flag, text: str, detail: str) -> Tuple[int, str]:
  """(exit code, line): 2 for a value absl's parser cannot read, 1 for one
  outside its bounds or refused by a `require` check."""
  parser = flag.parser
  low, high = (getattr(parser, "lower_bound", None),
               getattr(parser, "upper_bound", None))
  bounds = (f"in [{low:g}, {high:g}]" if low is not None and high is not None
            else f"at least {low:g}" if low is not None
            else f"at most {high:g}" if high is not None else "")
  convert = getattr(parser, "convert", None)  # numbers only
  if convert is None:
    if isinstance(flag.value, list) and text == str(flag.value):
      text = ",".join(map(str, flag.value))  # a validator shows the list
    return errors.EXIT_USAGE, f"--{flag.name} {text}: {detail}"
  try:
    value = convert(text)
  except (TypeError, ValueError):
    kind = "an integer" if parser.flag_type() == "int" else "a number"
    return (errors.EXIT_USAGE,
            f"--{flag.name} {text}: not {kind}; give {kind} {bounds}".strip()
            + ".")
  if bounds and parser.is_outside_bounds(value):
    return errors.EXIT_ERROR, f"--{flag.name} {text}: must be {bounds}."
  return errors.EXIT_ERROR, f"--{flag.name} {text}: {detail}"


def explain(error: flags.Error, program: str = "",
            flag_values: flags.FlagValues = flags.FLAGS) -> Tuple[int, str]:
  """(exit code, one line) for an error absl raised while parsing flags; a
  usage error names `program --help` when `program` is given."""
  refused = [found.groups() for found in map(_REFUSED.match,
                                             str(error).splitlines())
             if found and found.group(1) in flag_values]
  # Only a required flag's validator (absl raises its errors outside the
  # parser's `except`) refuses a flag that has no value.
  missing = [f"--{name}" for name, _, _ in refused
             if error.__context__ is None and flag_values[name].value is None]
  if refused and not missing:
    name, text, detail = refused[0]
    return _refused_value(flag_values[name], text, detail)
  line = (f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
          "required" if missing else errors.one_line(error))
  return errors.EXIT_USAGE, line + (f" (see {program} --help)" if program else "")


def _home_expanded(value):
  """A leading `~` or `~user`, as the shell expands it unless glued to its
  flag (`--output_dir=~/c`); a folder named `~` is never what a user meant."""
  if isinstance(value, str) and re.match(r"^~[\w.-]*(?=/|$)", value):
    return os.path.expanduser(value)
  if isinstance(value, list):
    return [_home_expanded(v) for v in value]
  return value


def expand_home_in_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  for name in flag_values:
    expanded = _home_expanded(flag_values[name].value)
    if expanded != flag_values[name].value:
      flag_values[name].value = expanded


def parse_flags(program: str, argv: Sequence[str],
                rename_flags: Optional[Callable] = None) -> List[str]:
  """absl's `FLAGS(argv)` with the house's exit codes: 0 after `--help`; a
  refused flag is one line `PROGRAM: error: ...` (exit 1 or 2).
  `rename_flags(args, program)` first renames the flags before a `--`."""
  end = argv.index("--") if "--" in argv else len(argv)
  if rename_flags:
    argv = [argv[0], *rename_flags(argv[1:end], program), *argv[end:]]
  try:
    args = flags.FLAGS(argv)
  except flags.Error as e:
    code, line = explain(e, program)
    print(f"{program}: error: {line}", file=sys.stderr, flush=True)
    sys.exit(code)
  except SystemExit as e:  # absl's help flags exit 1 once printed
    if e.code == 1 and any(a.lstrip("-").split("=")[0] in _HELP_FLAGS
                           for a in argv[1:end] if a.startswith("-")):
      sys.exit(errors.EXIT_OK)
    raise
  expand_home_in_flags()
  return args


def log_dir_for(output_dir: str, artefact: bool,
                log_dir: Optional[str] = None) -> str:
  """`log_dir` when given; beside an artefact (`OUTPUT.logs`: an artefact
  holds only what its format defines); else `OUTPUT/logs`."""
  return log_dir or output_dir.rstrip("/") + (".logs" if artefact else "/logs")


def remove_old_logs() -> None:
  """Removes the logs of failed or refused runs older than a week."""
  cutoff = time.time() - 7 * 86400
  with contextlib.suppress(OSError):
    for name in os.listdir(LOG_TMP_DIR):
      path = os.path.join(LOG_TMP_DIR, name)
      with contextlib.suppress(OSError):  # another process removed it
        if name.endswith(".log") and os.path.getmtime(path) < cutoff:
          os.remove(path)


class CommandLog:
  """The log file of one command run. `keep_log(exit_code, output_dir)` says
  which runs keep it (default: exit code 0)."""

  def __init__(self, program: str, output_dir: Optional[str] = None,
               verbose: Optional[bool] = None, artefact: bool = False,
               keep_log: Optional[Callable[[int, str], bool]] = None):
    self.program, self.output_dir, self.artefact = program, output_dir, artefact
    self.verbose = verbose_requested() if verbose is None else verbose
    self.keep_log = keep_log or (lambda code, output_dir: code == 0)
    self.log_dir: Optional[str] = None  # --log_dir: kept on every exit
    self.label = ""  # tells the logs of one job's processes apart
    self.stamp = time.strftime("%Y%m%d-%H%M%S")
    self.log_path = os.path.join(
        LOG_TMP_DIR, f"{program}-{self.stamp}-{os.getpid()}.log")
    self.file = None

  @property
  def log_name(self) -> str:
    label = f"-{self.label}" if self.label else ""
    return f"{self.program}-{self.stamp}{label}.log"

  def start(self) -> "CommandLog":
    """Makes this the process's log, before absl parses the flags: absl
    (TensorFlow's Python logs, orbit, warnings) and, unless verbose, file
    descriptor 2 (TensorFlow's C++ logs) go to the file; `sys.stderr` stays
    the terminal."""
    import logging as std_logging  # pylint: disable=g-import-not-at-top
    _current[:] = [self]
    os.makedirs(LOG_TMP_DIR, exist_ok=True)
    remove_old_logs()
    self.file = io.open(self.log_path, "a", encoding="utf-8", buffering=1)  # pylint: disable=consider-using-with
    self.file.write(f"{self.program} started {time.ctime()}\n"
                    f"command line: {' '.join(sys.argv)}\n")
    logging.use_absl_handler()
    logging.get_absl_handler().python_handler.stream = self.file
    if not flags.FLAGS.is_parsed():  # absl logs to stderr until parsed
      flags.FLAGS.mark_as_parsed()
    logging.set_verbosity(logging.INFO)
    std_logging.captureWarnings(True)
    if not self.verbose:
      with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
        terminal = os.dup(2)
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(terminal, "w", closefd=True), line_buffering=True,
            encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
            errors="backslashreplace")
    threading.excepthook = _log_thread_exception
    self.flags_parsed()
    return self

  def flags_parsed(self, output_dir: Optional[str] = None,
                   log_dir: Optional[str] = None) -> None:
    """The output directory and `--log_dir` once known."""
    self.output_dir = output_dir if output_dir is not None else self.output_dir
    self.log_dir = log_dir or self.log_dir
    if self.verbose:
      flags.FLAGS.alsologtostderr = True
    else:
      logging.set_stderrthreshold(logging.ERROR)

  def finish(self, exit_code: int) -> Optional[str]:
    """Copies the log to `log_dir_for` when the run kept its output (always
    to --log_dir); returns where it went (None: it stays in LOG_TMP_DIR)."""
    self.file.write(f"{self.program} ended {time.ctime()} "
                    f"(exit code {exit_code})\n")
    self.file.flush()
    if not self.log_dir and not (
        self.output_dir and self.keep_log(exit_code, self.output_dir)):
      return None
    from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
    target_dir = log_dir_for(self.output_dir or "", self.artefact, self.log_dir)
    if not self.log_dir and not fileio.isdir(self.output_dir):
      return None
    try:
      fileio.makedirs(target_dir)
      target = fileio.join(target_dir, self.log_name)
      fileio.copy(self.log_path, target)
      os.remove(self.log_path)
    except OSError as e:
      print(f"{self.program}: the log stays at {self.log_path} (copying it to "
            f"{target_dir} failed: {e})", file=sys.stderr, flush=True)
      return None
    print(f"{self.program}: full log: {target}", file=sys.stderr, flush=True)
    return target


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
  """A background thread's traceback goes to the log: the command says what
  failed in its own line."""
  if args.exc_type is not SystemExit:
    logging.warning("thread %s ended with an error",
                    args.thread.name if args.thread else "?",
                    exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


_current: List[CommandLog] = []


def set_log_label(label: str) -> None:
  """Adds `-LABEL` to this command's log name (one log per process of a
  job)."""
  for log in _current:
    log.label = label


def run_logged(main: Callable, argv: Any, log: CommandLog,
               exit_now: bool = False) -> Any:
  """Calls `main(argv)` and finishes `log` with its exit code; with
  `exit_now` the process then ends at once (the interpreter's teardown of a
  tf.distribute run takes seconds and logs into a closed file)."""
  code = 1
  try:
    result = main(argv)
    code = result if isinstance(result, int) else 0
    return result
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else int(e.code is not None)
    raise
  except BaseException:  # pylint: disable=broad-except
    if not exit_now:
      raise
    logging.exception("%s failed", log.program)
    traceback.print_exc()
  finally:
    log.finish(code)
    if exit_now:
      for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
          stream.flush()
      logging.flush()
      os._exit(code)  # pylint: disable=protected-access


def run(main: Callable, doc: str, program: str,
        output_dir_flag: Optional[str] = None, artefact: bool = False,
        keep_log: Optional[Callable[[int, str], bool]] = None,
        exit_without_teardown: bool = False,
        required: Sequence[str] = (),
        rename_flags: Optional[Callable] = None) -> None:
  """Parses absl flags (`parse_flags`) and runs `main` as console script
  `program`, with its log file (`artefact`: the output is something a user
  uploads or serves). The `required` flags are marked here: importing a
  command module must not constrain the flags of another command run in the
  same process."""
  flags.mark_flags_as_required(list(required))
  if sys.modules.get("__main__") is not None:  # absl's --help prints its doc
    sys.modules["__main__"].__doc__ = doc
  sys.argv[0] = program  # absl's --help heading
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False, "Show every log line on the console "
                      "(absl, TensorFlow, orbit); by default they go to the "
                      "log file only.")
  # absl's --help lists the flags of sys.argv[0]'s module: the command's
  # (`--log_dir` is absl.logging's, read here as the log's directory).
  for flag in (flags.FLAGS.get_key_flags_for_module(main.__module__)
               + [flags.FLAGS["verbose"], flags.FLAGS["log_dir"]]):
    flags.FLAGS.register_key_flag_for_module(program, flag)
  log = CommandLog(program, artefact=artefact, keep_log=keep_log).start()

  def logged_main(argv):
    log.flags_parsed(
        flags.FLAGS[output_dir_flag].value if output_dir_flag else None,
        flags.FLAGS["log_dir"].value)
    return run_logged(main, argv, log, exit_now=exit_without_teardown)

  app.run(logged_main,
          flags_parser=lambda argv: parse_flags(program, argv, rename_flags))

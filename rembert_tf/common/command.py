r"""How every command runs: absl flags and `--help`, one-line errors, the log file.

Builds on absl (`app.run`, its flags and bounds, its logging handler whose
stream becomes the log file) and `os.dup2` for TensorFlow's C++ logs, which
write to file descriptor 2. Imports neither TensorFlow nor orbit: it runs
before them. A command module defines its flags (TensorFlow loads inside
`main`, so `--help` answers at once) and its `run()` calls `command.run`:

* `--help` exits 0 and prints the command's docstring as written; a usage
  error is one line `PROG: error: ...`, exit 2; a value outside its absl
  bounds or a `require` check, one line, exit 1; a deprecated flag name works
  and says so (`command_names.DEPRECATED_FLAGS`); a leading `~` is the home;
* errors of `main` are one line, exit 1 (`errors.command`);
* the log (absl, TensorFlow, orbit, warnings) is written under LOG_TMP_DIR and
  moved, when the command ends, to `log_dir_for`: `--log_dir`, else beside an
  artefact (`OUTPUT.logs/`), else into a run directory (`OUTPUT/logs/`), when
  the run kept its output; `--verbose` shows it on the console too (which
  otherwise has the command's own lines, `rembert_tf.common.console`).

Example (a command module, `rembert_tf/cli/NAME.py`):

    from absl import flags
    from rembert_tf.common import command
    flags.DEFINE_string("output_dir", None, "Where the output goes.")

    def main(argv):
      ...  # imports TensorFlow here

    def run():
      command.run(main, __doc__, output_dir_flag="output_dir", artefact=True)
"""
import ast
import contextlib
import io
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging

from rembert_tf.common import command_names
from rembert_tf.common import errors

# Where a command's log is written while it runs: nothing may appear beside or
# in an output before the output itself does.
LOG_TMP_DIR = os.path.join(tempfile.gettempdir(), "rembert_tf-logs")
_HELP_FLAGS = frozenset({"help", "?", "helpshort", "helpfull", "helpxml"})


# --- Start-up and names -------------------------------------------------------
def verbose_requested(argv: Optional[Sequence[str]] = None) -> bool:
  """`--verbose` on the command line (read before flags are parsed)."""
  return any(a in ("--verbose", "--verbose=true", "--verbose=True",
                   "--verbose=1") for a in (sys.argv if argv is None else argv))


def quiet_tensorflow_import(argv: Optional[Sequence[str]] = None) -> None:
  """Hides TensorFlow's import-time lines unless `--verbose`; call before it
  loads (an explicit TF_CPP_MIN_LOG_LEVEL wins)."""
  if not verbose_requested(argv):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _command_module(main: Callable) -> str:
  """`main`'s module, also when it runs as `__main__` (`python -m`, a path)."""
  module = main.__module__
  if module != "__main__":
    return module
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  if spec is not None and command_names.console_script(spec.name):
    return spec.name
  parts = os.path.splitext(os.path.abspath(sys.argv[0]))[0].split(os.sep)
  if "rembert_tf" in parts:
    return ".".join(parts[len(parts) - parts[::-1].index("rembert_tf") - 1:])
  return ".".join(parts[-2:] if parts[-1] == "__main__" else parts[-1:])


def program_name(main: Callable) -> str:
  """The console script of `main`'s command: `rembert-convert` for
  `rembert_tf.cli.convert_checkpoint`, however it is started."""
  module = _command_module(main)
  name = [part for part in module.split(".") if part != "__main__"][-1]
  return (command_names.console_script(module)
          or "rembert-" + name.replace("_", "-"))


# --- Flags --------------------------------------------------------------------
def require(name: str, check: Callable, why: str,
            flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """The flag `name`, when given, must pass `check`; `why` says what to give."""
  flags.register_validator(name, lambda value: value is None or check(value),
                           message=f"{why}.", flag_values=flag_values)


def require_above(name: str, limit: float,
                  flag_values: flags.FlagValues = flags.FLAGS) -> None:
  require(name, lambda value: value > limit, f"must be above {limit:g}",
          flag_values)


# absl's refusal of one flag's value: `flag --NAME=VALUE: DETAIL`.
_REFUSED = re.compile(r"flag --([\w.-]+)=(.*?): (.*)$")
_MISSING = re.compile(r"Flag --(\w+) must have a value other than None")


def _range_text(parser) -> str:
  low = getattr(parser, "lower_bound", None)
  high = getattr(parser, "upper_bound", None)
  if low is not None and high is not None:
    return f"in [{low:g}, {high:g}]"
  if low is not None:
    return f"at least {low:g}"
  return f"at most {high:g}" if high is not None else ""


def _refused_value(flag, text: str, detail: str) -> Tuple[int, str]:
  """(exit code, line): 2 for a value of the wrong type or format, 1 for one
  outside its range or refused by a `require` check."""
  parser = flag.parser
  kind = {"int": "an integer", "float": "a number"}.get(parser.flag_type(),
                                                         parser.flag_type())
  bounds = _range_text(parser)
  convert = getattr(parser, "convert", None)
  try:
    value = convert(text) if convert else parser.parse(text)
    if text.startswith("[") and not convert:  # absl shows a list's repr
      value = ast.literal_eval(text)
  except (TypeError, ValueError):
    return (errors.EXIT_USAGE,
            f"--{flag.name} {text}: not {kind}; give {kind} {bounds}".strip()
            + ".")
  if bounds and parser.is_outside_bounds(value):
    return errors.EXIT_ERROR, f"--{flag.name} {text}: must be {bounds}."
  if convert:
    return errors.EXIT_ERROR, f"--{flag.name} {text}: {detail}"
  if isinstance(value, list) and text.startswith("["):
    text = ",".join(value)
  return errors.EXIT_USAGE, f"--{flag.name} {text}: {detail}"


def explain(error: flags.Error, program: str = "",
            flag_values: flags.FlagValues = flags.FLAGS) -> Tuple[int, str]:
  """(exit code, one line) for an error absl raised while parsing flags; a
  usage error names `program --help` when `program` is given."""
  missing = _MISSING.findall(str(error))
  found = _REFUSED.match((str(error).strip().splitlines() or [""])[0])
  if found and found.group(1) in flag_values and not missing:
    return _refused_value(flag_values[found.group(1)], *found.groups()[1:])
  if missing:
    line = (f"{', '.join('--' + name for name in missing)} "
            f"{'is' if len(missing) == 1 else 'are'} required")
  else:
    line = errors.one_line(error)
  return errors.EXIT_USAGE, line + (f" (see {program} --help)" if program else "")


def _home_expanded(value):
  """A leading `~` or `~user`, as the shell expands it unless glued to its
  flag (`--output_dir=~/c`); a folder named `~` is never what a user meant."""
  if isinstance(value, str) and re.match(r"^~[\w.-]*(?=/|$)", value):
    return os.path.expanduser(value)
  if isinstance(value, list):
    expanded = [_home_expanded(v) for v in value]
    return value if expanded == value else expanded
  return value


def expand_home_in_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  for name in flag_values:
    value = flag_values[name].value
    expanded = _home_expanded(value)
    if expanded is not value:
      flag_values[name].value = expanded


def _deprecated(module: str) -> Mapping[str, str]:
  return command_names.DEPRECATED_FLAGS.get(module.rpartition(".")[2], {})


def _say_deprecated(program: str, old: str, new: str) -> None:
  print(f"{program}: --{old} is deprecated; use --{new}.", file=sys.stderr,
        flush=True)


def define_aliases(module: str, program: str) -> None:
  """The deprecated names of `module`'s flags as absl aliases (`--noNAME`
  too), listed under `program` in --help."""
  for old, new in _deprecated(module).items():
    if old not in flags.FLAGS and new in flags.FLAGS:
      flags.DEFINE_alias(old, new, module_name=program)
      flags.FLAGS[old].help = f"Deprecated: use --{new}."


def current_flag_names(module: str, args: Sequence[str],
                       program: str) -> List[str]:
  """`args` (flags of `module`'s command) with each deprecated name replaced
  by the agreed one, and one line on stderr for each."""
  renamed, current = _deprecated(module), []
  for arg in args:
    dashes = len(arg) - len(arg.lstrip("-"))
    name, equals, value = arg[dashes:].partition("=")
    no = "no" if name.startswith("no") and name[2:] in renamed else ""
    old = name[len(no):]
    if dashes and old in renamed:
      _say_deprecated(program, name, no + renamed[old])
      arg = f"{arg[:dashes]}{no}{renamed[old]}{equals}{value}"
    current.append(arg)
  return current


def parse_flags(program: str, argv: Sequence[str], module: str = "") -> List[str]:
  """absl's `FLAGS(argv)` with the house's exit codes: 0 after `--help`;
  a refused flag is one line `PROGRAM: error: ...` (exit 1 or 2)."""
  try:
    args = flags.FLAGS(list(argv))
  except flags.Error as e:
    code, line = explain(e, program)
    print(f"{program}: error: {line}", file=sys.stderr, flush=True)
    sys.exit(code)
  except SystemExit as e:  # absl's help flags exit 1 once printed
    asked = [a for a in argv[1:argv.index("--") if "--" in argv else None]
             if a.startswith("-") and a.lstrip("-").split("=")[0] in _HELP_FLAGS]
    if e.code == 1 and asked:
      sys.exit(errors.EXIT_OK)
    raise
  expand_home_in_flags()
  for old, new in _deprecated(module).items():
    if old in flags.FLAGS and flags.FLAGS[old].present:
      _say_deprecated(program, old, new)
  return args


# --- The log file -------------------------------------------------------------
def log_dir_for(output_dir: str, artefact: bool,
                log_dir: Optional[str] = None) -> str:
  """`log_dir` when given; beside an artefact (`OUTPUT.logs`: it holds only
  what its format defines); inside a run directory (`OUTPUT/logs`)."""
  if log_dir:
    return log_dir
  return output_dir.rstrip("/") + (".logs" if artefact else "/logs")


def remove_old_logs(max_age_days: float = 7.0) -> None:
  """Removes the logs of failed or refused runs older than a week."""
  cutoff = time.time() - max_age_days * 86400
  with contextlib.suppress(OSError):
    for name in os.listdir(LOG_TMP_DIR):
      path = os.path.join(LOG_TMP_DIR, name)
      with contextlib.suppress(OSError):  # another process removed it
        if name.endswith(".log") and os.path.getmtime(path) < cutoff:
          os.remove(path)


class CommandLog:
  """The log file of one command run (`start_log`)."""

  def __init__(self, program: str, output_dir: Optional[str] = None,
               verbose: bool = False, artefact: bool = False,
               keep_log: Optional[Callable[[int, str], bool]] = None):
    self.program, self.output_dir, self.verbose = program, output_dir, verbose
    self.artefact = artefact  # the log goes beside output_dir, not inside
    self.keep_log = keep_log or (lambda code, output_dir: code == 0)
    self.log_dir: Optional[str] = None  # --log_dir: kept on every exit
    self.label = ""  # tells the logs of one job's processes apart
    self.stamp = time.strftime("%Y%m%d-%H%M%S")
    self.log_path = os.path.join(
        LOG_TMP_DIR, f"{program}-{self.stamp}-{os.getpid()}.log")
    self.final_log_path: Optional[str] = None
    self.file = None
    self._finished = False

  @property
  def log_name(self) -> str:
    return f"{self.program}-{self.stamp}{'-' + self.label if self.label else ''}.log"

  def start(self) -> "CommandLog":
    """absl (TensorFlow's Python logs, orbit, warnings) and, unless verbose,
    file descriptor 2 (TensorFlow's C++ logs) go to the file; `sys.stderr`
    stays the terminal."""
    import logging as std_logging  # pylint: disable=g-import-not-at-top
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
    """The output directory and `--log_dir` once known; the console keeps
    absl's errors (everything with --verbose)."""
    self.output_dir = output_dir if output_dir is not None else self.output_dir
    self.log_dir = log_dir or self.log_dir
    if self.verbose:
      flags.FLAGS.alsologtostderr = True
    else:
      logging.set_stderrthreshold(logging.ERROR)

  def finish(self, exit_code: int) -> Optional[str]:
    """Copies the log to `log_dir_for` when the run kept its output (always
    to --log_dir); returns where it went (None: it stays in LOG_TMP_DIR)."""
    if self._finished or self.file is None:
      return self.final_log_path
    self._finished = True
    self.file.write(f"{self.program} ended {time.ctime()} "
                    f"(exit code {exit_code})\n")
    self.file.flush()
    if not self.log_dir and not (
        self.output_dir and self.keep_log(exit_code, self.output_dir)):
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
  """A background thread's traceback goes to the log: the command says what
  failed in its own line (TensorFlow's watcher threads fail once a peer
  worker is gone)."""
  if args.exc_type is not SystemExit:
    logging.warning("thread %s ended with an error",
                    args.thread.name if args.thread else "?",
                    exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


_current: Optional[CommandLog] = None


def start_log(program: str, output_dir: Optional[str] = None,
              verbose: Optional[bool] = None, artefact: bool = False,
              keep_log: Optional[Callable[[int, str], bool]] = None
              ) -> CommandLog:
  """Starts the log of this process's command, before absl parses the flags
  (Model Garden's start-up callbacks log right after). `keep_log(exit_code,
  output_dir)` says which runs keep their log (default: exit code 0)."""
  global _current
  verbose = verbose_requested() if verbose is None else verbose
  _current = CommandLog(program, output_dir, verbose, artefact, keep_log)
  return _current.start()


def set_log_label(label: str) -> None:
  """Adds `-LABEL` to this command's log name (`worker1`: one log per process
  of a job); nothing outside a command."""
  if _current is not None:
    _current.label = label


def _exit_code(code: Any) -> int:
  if code is None or isinstance(code, (bool, int)):
    return int(code or 0)
  return 1  # sys.exit("message")


def run_logged(main: Callable, argv: Any, log: CommandLog,
               exit_now: bool = False) -> Any:
  """Calls `main(argv)` and finishes `log` with its exit code. With
  `exit_now` the process then ends at once (`os._exit`): the interpreter's
  teardown of a tf.distribute run takes seconds and logs into a closed file."""
  code = 1
  try:
    result = main(argv)
    code = _exit_code(result)
    return result
  except SystemExit as e:
    code = _exit_code(e.code)
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


def run(main: Callable, doc: str, program: Optional[str] = None,
        output_dir_flag: Optional[str] = None, artefact: bool = False,
        keep_log: Optional[Callable[[int, str], bool]] = None,
        exit_without_teardown: bool = False,
        required: Sequence[str] = ()) -> None:
  """Parses absl flags and runs `main` under the console script's name, with
  its log file (`start_log`; `artefact`: the output is something a user
  uploads or serves, its log goes beside it). The `required` flags are marked
  here, not where they are defined: importing a command module must not
  constrain the flags of another command run in the same process."""
  flags.mark_flags_as_required(list(required))
  main_module = sys.modules.get("__main__")
  if main_module is not None:  # absl's --help prints __main__'s docstring
    main_module.__doc__ = doc
  module = _command_module(main)
  program = program or program_name(main)
  sys.argv[0] = program  # absl's --help heading
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False, "Show every log line on the console "
                      "(absl, TensorFlow, orbit); by default they go to the "
                      "log file only.")
  if "log_dir" not in flags.FLAGS:
    flags.DEFINE_string("log_dir", None, "Directory for this command's log "
                        "file, kept on every exit (default: beside an artefact "
                        "output, OUTPUT.logs/, or inside a run directory, "
                        "MODEL_DIR/logs/, on success).")
  # absl's --help lists the flags of sys.argv[0]'s module: the command's.
  for flag in (flags.FLAGS.get_key_flags_for_module(main.__module__)
               + [flags.FLAGS["verbose"], flags.FLAGS["log_dir"]]):
    flags.FLAGS.register_key_flag_for_module(program, flag)
  define_aliases(module, program)
  log = start_log(program, artefact=artefact, keep_log=keep_log)

  def logged_main(argv):
    log.flags_parsed(
        flags.FLAGS[output_dir_flag].value if output_dir_flag else None,
        flags.FLAGS["log_dir"].value)
    return run_logged(main, argv, log, exit_now=exit_without_teardown)

  app.run(logged_main,
          flags_parser=lambda argv: parse_flags(program, argv, module))

"""How every command runs: flags, `--help`, the log file, one-line errors.

Each command module of `rembert_tf.cli` defines its absl flags and
`main(argv)`, and its `run()` calls `run_command` here. Importing this module
does nothing but define functions: a command module quiets TensorFlow's
start-up itself (`console.quiet_tensorflow_import()`, before the imports that
load TensorFlow), and `--verbose` is defined when a command runs.

Every command parses with absl: `--help` exits 0 and prints the docstring
as written (keep it a raw string, so that a `\\` ending a line of an example
reaches the console); a usage error (an unknown flag, a missing required
flag, a value absl cannot parse) is one line naming the console script, exit
code 2. A command module defines its flags without importing TensorFlow or
Model Garden (they load inside `main`), so that `--help` answers at once.

Example (a command module, `rembert_tf/cli/NAME.py`):

    from absl import flags
    from rembert_tf.cli import harness
    flags.DEFINE_string("output_dir", None, "Where the output goes.")

    def main(argv):
      ...  # imports TensorFlow here

    def run():
      harness.run_command(main, __doc__, output_dir_flag="output_dir")
"""
import os
import re
import sys
from typing import Callable, Iterable, Optional

from absl import app
from absl import flags

from rembert_tf.cli import command_names
from rembert_tf.cli import flag_checks
from rembert_tf.cli import flag_names
from rembert_tf.common import command_output
from rembert_tf.common import console
from rembert_tf.common import errors

# absl's help flags (`-?` is --help's short name); absl exits 1 after them.
_HELP_FLAGS = frozenset({"help", "?", "helpshort", "helpfull", "helpxml"})


def _list_flags_in_help(main: Callable) -> None:
  """absl's `--help` lists the flags of the script being run (`sys.argv[0]`);
  a console script or tools/ wrapper defines none, so the command module's
  flags and `--verbose` are listed under the script's name."""
  command_flags = flags.FLAGS.get_key_flags_for_module(main.__module__)
  for flag in command_flags + [flags.FLAGS[console.VERBOSE_FLAG],
                               flags.FLAGS[command_output.LOG_DIR_FLAG]]:
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def program_name(main: Callable) -> str:
  """The console script of `main`'s command (`command_names`), whichever way
  it runs: `rembert_tf.cli.convert_checkpoint` -> `rembert-convert`; under
  `python -m rembert_tf.demo` (module `__main__`) -> `rembert-demo`."""
  module = command_module(main)
  name = command_names.console_script(module)
  if name:
    return name
  name = [part for part in module.split(".") if part != "__main__"][-1]
  return "rembert-" + name.replace("_", "-")


def command_module(main: Callable) -> str:
  """The dotted name of `main`'s module, also when it runs as `__main__`."""
  module = main.__module__
  if module == "__main__":  # python -m PACKAGE / MODULE, or a script
    module = _main_module_name()
  return module


def _main_module_name() -> str:
  """The dotted name of the module run as `__main__`: its spec under
  `python -m`, else read from the script's path (`.../rembert_tf/train.py`)."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  if spec is not None and command_names.console_script(spec.name):
    return spec.name
  parts = os.path.splitext(os.path.abspath(sys.argv[0]))[0].split(os.sep)
  if "rembert_tf" in parts:
    return ".".join(parts[len(parts) - parts[::-1].index("rembert_tf") - 1:])
  return ".".join(parts[-2:] if parts[-1] == "__main__" else parts[-1:])


def _asks_for_help(args) -> bool:
  for arg in args:
    if arg == "--":
      return False
    if arg.startswith("-") and arg.lstrip("-").split("=")[0] in _HELP_FLAGS:
      return True
  return False


def _usage_error(error: Exception) -> str:
  """absl's message, with its required-flag lines (`flag --x=None: Flag --x
  must have a value other than None.`) said as the flags to give."""
  missing = re.findall(r"Flag --(\w+) must have a value other than None",
                       str(error))
  if missing:
    return (f"{', '.join('--' + name for name in missing)} "
            f"{'is' if len(missing) == 1 else 'are'} required")
  return errors.one_line(error)


def flag_parser(program: str, module: str = "") -> Callable:
  """absl's flag parsing with the house's exit codes: 0 after `--help`; 2 and
  one line `PROGRAM: error: ...` for a usage error; one line for each
  deprecated flag name of `module`'s command given (`flag_names`)."""
  def parse(argv):
    try:
      args = flags.FLAGS(argv)
      flag_checks.expand_home_in_flags()
      flag_names.report_aliases(module, program)
      return args
    except flags.Error as e:
      # A refused value (type, range) is flag_checks' one line: exit 1 for a
      # value out of range, 2 for one absl cannot parse.
      if flag_checks.is_refused_value(e):
        code, line = flag_checks.explain(e)
      else:
        code, line = errors.EXIT_USAGE, f"{_usage_error(e)} (see {program} --help)"
      print(f"{program}: error: {line}", file=sys.stderr, flush=True)
      sys.exit(code)
    except SystemExit as e:  # absl's help flags exit 1 once printed
      if e.code == 1 and _asks_for_help(argv[1:]):
        sys.exit(errors.EXIT_OK)
      raise
  return parse


def run_command(main: Callable, doc: str, program: Optional[str] = None,
                output_dir_flag: Optional[str] = None,
                keep_log_exit_codes: Iterable[int] = (0,),
                keep_log_when: Optional[Callable[[int, str], bool]] = None,
                exit_without_teardown: bool = False,
                output_is_artefact: bool = False) -> None:
  """Parses absl flags and runs `main`; `--help` shows the command's docstring.

  absl prints the `__main__` module's docstring as the usage text; under a
  console script or a tools/ wrapper `__main__` is the wrapper, so the
  command module's docstring is put there.

  Logs go to a file named after `program` (the console-script name; by
  default derived from the command module) that ends in `--log_dir` when
  given, else beside the output when it is an artefact a user uploads or
  serves (`output_is_artefact`: `<value of --output_dir_flag>.logs/`), else
  in `<value of --output_dir_flag>/logs/` (see
  `command_output.log_dir_for`; a command that picks its directory inside
  `main` calls `command_output.set_output_dir`).
  `keep_log_when(exit_code, output_dir)` keeps the log of further exit codes.
  With `exit_without_teardown` the process ends as soon as the log is
  finished (`command_output.run_and_exit_now`).
  """
  main_module = sys.modules.get("__main__")
  if main_module is not None:
    main_module.__doc__ = doc
  program = program or program_name(main)
  # absl names the program by sys.argv[0] (the flags' heading under --help):
  # the console script, not the path of a wrapper or of a module under -m.
  sys.argv[0] = program
  console.define_verbose_flag()
  command_output.define_log_dir_flag()
  _list_flags_in_help(main)
  flag_names.define_aliases(command_module(main), program)
  output = command_output.start_command_output(
      program, keep_log_exit_codes=keep_log_exit_codes,
      keep_log_when=keep_log_when, artefact=output_is_artefact)

  def main_with_log_file(argv):
    output.flags_parsed(
        flags.FLAGS[output_dir_flag].value if output_dir_flag else None,
        flags.FLAGS[command_output.LOG_DIR_FLAG].value)
    if exit_without_teardown:
      command_output.run_and_exit_now(main, argv, output)
    return command_output.run_with_command_output(main, argv, output)

  app.run(main_with_log_file,
          flags_parser=flag_parser(program, command_module(main)))

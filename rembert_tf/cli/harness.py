"""How every command runs: flags, `--help`, the log file, one-line errors.

Each command module of `rembert_tf.cli` defines its absl flags and
`main(argv)`, and its `run()` calls `run_command` here. Importing this module
does nothing but define functions: a command module quiets TensorFlow's
start-up itself (`console.quiet_tensorflow_import()`, before the imports that
load TensorFlow), and `--verbose` is defined when a command runs.

Example (a command module):
```python
from absl import flags
from absl import app
from absl import flags

from rembert_tf.common import console
console.quiet_tensorflow_import()  # before anything imports TensorFlow
from rembert_tf.cli import harness

flags.DEFINE_string("output_dir", None, "Where the output goes.")

def main(argv):
  ...

def run():
  harness.run_command(main, __doc__, output_dir_flag="output_dir")
```
"""
import os
import sys
from typing import Callable, Iterable, Optional

from absl import app
from absl import flags

from rembert_tf.common import command_output
from rembert_tf.common import console


def _list_flags_in_help(main: Callable) -> None:
  """absl's `--help` lists the flags of the script being run (`sys.argv[0]`);
  a console script or tools/ wrapper defines none, so the command module's
  flags and `--verbose` are listed under the script's name."""
  command_flags = flags.FLAGS.get_key_flags_for_module(main.__module__)
  for flag in command_flags + [flags.FLAGS[console.VERBOSE_FLAG],
                               flags.FLAGS[command_output.LOG_DIR_FLAG]]:
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def program_name(main: Callable) -> str:
  """`rembert_tf.cli.param_table` -> `rembert-param-table`; under
  `python -m rembert_tf.demo` (module `__main__`, script demo/__main__.py) ->
  `rembert-demo`."""
  parts = [p for p in main.__module__.split(".") if p != "__main__"]
  if parts:
    name = parts[-1]
  else:  # python -m PACKAGE (PACKAGE/__main__.py) or python -m MODULE.
    script = os.path.abspath(sys.argv[0])
    name = os.path.splitext(os.path.basename(script))[0]
    if name == "__main__":
      name = os.path.basename(os.path.dirname(script))
  return "rembert-" + name.replace("_", "-")


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
  console.define_verbose_flag()
  command_output.define_log_dir_flag()
  _list_flags_in_help(main)
  output = command_output.start_command_output(
      program or program_name(main), keep_log_exit_codes=keep_log_exit_codes,
      keep_log_when=keep_log_when, artefact=output_is_artefact)

  def main_with_log_file(argv):
    output.flags_parsed(
        flags.FLAGS[output_dir_flag].value if output_dir_flag else None,
        flags.FLAGS[command_output.LOG_DIR_FLAG].value)
    if exit_without_teardown:
      command_output.run_and_exit_now(main, argv, output)
    return command_output.run_with_command_output(main, argv, output)

  app.run(main_with_log_file)


def run_argparse_command(main: Callable, build_parser: Callable, prog: str
                         ) -> None:
  """`run_command` for a command whose flags are argparse (not absl) flags.

  The ablation suite's flags carry lists of flags for the runs it makes
  (`--finetune_flags=--strategy=tpu,...`), which absl would read as its own.
  Its parser must define `--output_dir` and `--verbose`.
  """
  argv = sys.argv[1:]
  args, _ = build_parser().parse_known_args(argv)
  # absl's log handler (TensorFlow, orbit) routes to the log file only once
  # absl's own flags are parsed.
  flags.FLAGS([prog])
  output = command_output.start_command_output(prog, args.output_dir,
                                               verbose=args.verbose)
  sys.exit(command_output.run_with_command_output(main, argv, output))

"""Command-line front ends: one module per command, each with `main(argv)` and `run()`.

`tools/NAME.py` and the console scripts (`rembert-*`, see setup.py) call `run()`.
"""
import sys


def run_command(main, doc: str) -> None:
  """Parses absl flags and runs `main`; `--help` shows the command's docstring.

  absl prints the `__main__` module's docstring as the usage text; under a
  console script or a tools/ wrapper `__main__` is the wrapper, so the
  command module's docstring is put there.
  """
  from absl import app  # pylint: disable=g-import-not-at-top
  main_module = sys.modules.get("__main__")
  if main_module is not None:
    main_module.__doc__ = doc
  app.run(main)

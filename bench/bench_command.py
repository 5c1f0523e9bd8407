"""How an absl bench script runs: `run(main)` is `app.run(main)` with `--help` a success.

absl's `--help` (also `-?`, `--helpshort`, `--helpfull`) prints the usage and
exits with code 1; a bench asked for its flags prints the same usage (the
script's docstring and its flags) and exits with 0.

Example (the end of a bench script):
```python
if __name__ == "__main__":
  bench_command.run(main)
```
"""
import sys

from absl import app

_SHORT_HELP = ("--help", "-?", "--helpshort")
_FULL_HELP = ("--helpfull",)


def run(main) -> None:
  """Runs `main` under absl, or prints the usage when help is asked for."""
  asked = [a for a in sys.argv[1:] if a in _SHORT_HELP + _FULL_HELP]
  if asked:
    app.usage(shorthelp=asked[0] in _SHORT_HELP, writeto_stdout=True)
    if asked[0] in _SHORT_HELP:
      print("\nTry --helpfull to get a list of all flags.")
    sys.exit(0)
  app.run(main)


if __name__ == "__main__":
  print(__doc__)

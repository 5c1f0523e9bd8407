"""The project's error base classes, its exit codes and the one line a command prints for an error.

Every error a user can cause derives from `RemBertError`; `command` turns it,
an operating-system error on a user path or TensorFlow's file-system error
into one line `PROG: error: MESSAGE`, exit code 1, no traceback. A message
names the file, the field and the fix.

Example:
```python
from rembert_tf.common import errors

@errors.command("rembert-train")
def main(argv):
  raise errors.InputError("/data/metadata.json: field `seq_length` is 128, "
                          "the experiment says 512; set "
                          "task.train_data.seq_length=128.")
# main([]) prints one line on stderr and exits with code 1.
```
"""
import functools
import sys
from typing import Callable, Sequence

from absl import logging

# Exit codes shared by the commands (docs/errors.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # the command line itself (command.parse_flags)
EXIT_NON_FINITE_LOSS = 3
EXIT_PREEMPTED = 42
EXIT_INTERRUPTED = 130


class RemBertError(Exception):
  """Base class of every error a user of rembert_tf can cause."""


class UsageError(RemBertError, ValueError):
  """A flag or argument has a value the command cannot use."""


class InputError(RemBertError, ValueError):
  """An input file is missing, unreadable or not in the expected format."""


class OutputExistsError(RemBertError, FileExistsError):
  """The output exists and `--overwrite` was not given."""


# What gin appends to an error raised inside a gin-configurable function
# (Model Garden's trainer builders): where it passed, not what went wrong.
_GIN_CALL_NOTE = "\n  In call to configurable "


def one_line(error: BaseException) -> str:
  """The error's message folded onto one line."""
  text = str(error) or type(error).__name__
  if isinstance(error, OSError) and error.filename and error.strerror:
    text = f"{error.filename}: {error.strerror}"
  return " ".join(text.split(_GIN_CALL_NOTE)[0].split())


def user_error_types() -> tuple:
  """The exception types a command reports as one line (not a traceback):
  TensorFlow's file-system errors only once TensorFlow is loaded (importing
  it here would print its start-up lines)."""
  tf = sys.modules.get("tensorflow")
  if tf is None or not hasattr(tf, "errors"):
    return RemBertError, OSError
  return (RemBertError, OSError, tf.errors.NotFoundError,
          tf.errors.PermissionDeniedError, tf.errors.ResourceExhaustedError,
          tf.errors.DataLossError)


def report(prog: str, error: BaseException) -> None:
  """The one console line of an error; the command's log file gets it too."""
  line = f"{prog}: error: {one_line(error)}"
  print(line, file=sys.stderr, flush=True)
  logging.info(line)


def command(prog: str) -> Callable:
  """Decorates a command's `main(argv)`: a user error is one line, exit 1; a
  bug keeps its traceback; Ctrl-C exits 130."""
  def decorate(main: Callable[[Sequence[str]], int]):
    @functools.wraps(main)
    def wrapped(argv):
      try:
        return main(argv)
      except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)
      except user_error_types() as e:  # pylint: disable=catching-non-exception
        report(prog, e)
        sys.exit(EXIT_ERROR)
    return wrapped
  return decorate

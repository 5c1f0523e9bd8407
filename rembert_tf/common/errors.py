"""The project's error base class and the one way a command reports an error.

Every error a user can cause derives from `RemBertError`, so each command
catches one type and prints one line: `PROG: error: MESSAGE`, exit code 1, no
traceback. A message names the file, the field and the fix. Most are
`ValueError`s as well (`ConfigError(RemBertError, ValueError)`), so library
callers that catch `ValueError` catch them too.

Operating-system errors on user paths (a full disk, a missing directory, a
permission) are reported the same way: their message names the path.

Example:
```python
from rembert_tf.common import errors

class RecordsError(errors.RemBertError, ValueError):
  '''Pre-training records do not match the model.'''

@errors.command("rembert-train")
def main(argv):
  raise RecordsError("/data/metadata.json: field `seq_length` is 128, the "
                     "experiment says 512; set task.train_data.seq_length=128.")
# main([]) prints one line on stderr and exits with code 1.
```
"""
import functools
import sys
from typing import Callable, Sequence

from absl import logging

# Exit codes shared by the commands (documented in docs/errors.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # absl could not parse the command line (command.parse_flags)
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
# (Model Garden's `train_utils.create_trainer`, `base_trainer.Trainer`, which
# build the input pipelines): where it passed, not what went wrong.
_GIN_CALL_NOTE = "\n  In call to configurable "


def one_line(error: BaseException) -> str:
  """The error's message folded onto one line."""
  text = str(error) or type(error).__name__
  if isinstance(error, OSError) and error.filename and error.strerror:
    text = f"{error.filename}: {error.strerror}"
  return " ".join(text.split(_GIN_CALL_NOTE)[0].split())


def user_error_types() -> tuple:
  """The exception types a command reports as one line (not a traceback)."""
  types = [RemBertError, OSError]
  # TensorFlow's own file-system errors (gs:// permission, not found). Only
  # when TensorFlow is loaded: a command that never imported it cannot have
  # raised them, and importing it here would print its start-up lines.
  tf = sys.modules.get("tensorflow")
  if tf is not None and hasattr(tf, "errors"):
    types += [tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
              tf.errors.ResourceExhaustedError, tf.errors.DataLossError]
  return tuple(types)


def report(prog: str, error: BaseException) -> None:
  """The one console line of an error; the command's log file gets it too."""
  line = f"{prog}: error: {one_line(error)}"
  print(line, file=sys.stderr, flush=True)
  logging.info(line)


def command(prog: str) -> Callable:
  """Decorates a command's `main(argv)`: user errors become one line, exit 1.

  Anything else (a bug) keeps its traceback. KeyboardInterrupt exits 130.
  """
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

"""Worker processes that end the command on a worker's error and never respawn one.

Builds on `concurrent.futures.ProcessPoolExecutor` with the `spawn` start
method: a worker's exception is re-raised in the parent (a user error stays
one line, exit 1), and a worker that dies breaks the pool at once with one
`WorkerError`. A spawned worker re-runs the script that started the pool;
where that script has no `if __name__ == "__main__":` guard, the worker's
error reaches the parent as one line saying to add it.

Example:
```python
from rembert_tf.common import worker_pool

with worker_pool.pool(2, "records") as pool:
  print(sorted(pool.map(abs, [-2, 1, -3])))     # [1, 2, 3]
```
"""
import concurrent.futures
import contextlib
import multiprocessing
import os
import sys
import tempfile
from typing import Callable, Iterator, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import fileio

# Set in the parent while its pool starts workers: the file a worker writes
# the one line of an error it raised while re-running the parent's script.
WORKER_ERRORS_ENV = "REMBERT_TF_WORKER_ERRORS"


class WorkerError(errors.RemBertError, RuntimeError):
  """A worker process ended without a result (killed, or the script re-ran)."""


def guard_message(what: str, cause: str) -> str:
  return (f"{what}: a worker process re-ran the calling script and failed "
          f"({cause}). Worker processes re-import the script that starts them: "
          "put the script's calls under `if __name__ == \"__main__\":`, or pass "
          "num_workers=1.")


def re_running_main() -> bool:
  """True in a worker of `pool` while it re-runs the parent's script."""
  return bool(os.environ.get(WORKER_ERRORS_ENV)) and getattr(
      multiprocessing.current_process(), "_inheriting", False)


def _report_re_run_error(kind, value, traceback):
  """A worker's excepthook while it re-runs the parent's script: one line to
  the parent, no traceback (the parent reports it)."""
  del kind, traceback
  try:
    with fileio.open_file(os.environ[WORKER_ERRORS_ENV], "a") as f:
      f.write(errors.one_line(value) + "\n")
  except OSError:
    pass


def watch_re_run() -> None:
  """Installed when rembert_tf is imported: only acts in a pool's worker
  while it re-runs the parent's script."""
  if re_running_main():
    sys.excepthook = _report_re_run_error


@contextlib.contextmanager
def pool(num_workers: int, what: str,
         initializer: Optional[Callable] = None,
         initargs: Sequence = ()) -> Iterator[concurrent.futures.Executor]:
  """A `spawn` process pool; a dead worker raises one `WorkerError`."""
  with tempfile.TemporaryDirectory(prefix="rembert_tf-workers-") as scratch:
    error_file = fileio.join(scratch, "errors.txt")
    previous = os.environ.get(WORKER_ERRORS_ENV)
    os.environ[WORKER_ERRORS_ENV] = error_file
    try:
      with concurrent.futures.ProcessPoolExecutor(
          num_workers, mp_context=multiprocessing.get_context("spawn"),
          initializer=initializer, initargs=tuple(initargs)) as executor:
        try:
          yield executor
        except concurrent.futures.process.BrokenProcessPool:
          executor.shutdown(wait=False, cancel_futures=True)
          raise WorkerError(_broken_message(what, error_file)) from None
    finally:
      if previous is None:
        os.environ.pop(WORKER_ERRORS_ENV, None)
      else:
        os.environ[WORKER_ERRORS_ENV] = previous


def _broken_message(what: str, error_file: str) -> str:
  if fileio.exists(error_file):
    causes = [line for line in fileio.read_text(error_file).splitlines() if line]
    if causes:
      return guard_message(what, causes[0])
  return (f"{what}: a worker process ended without a result (killed, or out of "
          "memory); run again with fewer workers, or num_workers=1 to see "
          "its error.")

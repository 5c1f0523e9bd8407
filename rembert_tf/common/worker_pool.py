"""Worker processes that end the command on a worker's error and never respawn one.

Builds on `concurrent.futures.ProcessPoolExecutor` (`spawn`): a worker's
exception is re-raised in the parent, and a worker that dies breaks the pool
at once with one `WorkerError`. A worker re-running a calling script without
an `if __name__ == "__main__":` guard stops at the first command it reaches
(`outputs.writes_output`); the parent's line says to add the guard.

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
import tempfile
from typing import Callable, Iterator, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs


class WorkerError(errors.RemBertError, RuntimeError):
  """A worker process ended without a result (killed, or the script re-ran)."""


@contextlib.contextmanager
def pool(num_workers: int, what: str,
         initializer: Optional[Callable] = None,
         initargs: Sequence = ()) -> Iterator[concurrent.futures.Executor]:
  """A `spawn` process pool; a dead worker raises one `WorkerError`."""
  with tempfile.TemporaryDirectory(prefix="rembert_tf-workers-") as scratch:
    error_file = os.path.join(scratch, "errors.txt")
    previous = os.environ.get(outputs.WORKER_ERRORS_ENV)
    os.environ[outputs.WORKER_ERRORS_ENV] = error_file
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
        os.environ.pop(outputs.WORKER_ERRORS_ENV, None)
      else:
        os.environ[outputs.WORKER_ERRORS_ENV] = previous


def _broken_message(what: str, error_file: str) -> str:
  with contextlib.suppress(OSError):
    with fileio.open_file(error_file) as f:
      cause = f.readline().strip()
    if cause:
      return (f"{what}: a worker process re-ran the calling script and failed "
              f"({cause}). Worker processes re-import the script that starts "
              "them: put the script's calls under `if __name__ == "
              "\"__main__\":`, or pass num_workers=1.")
  return (f"{what}: a worker process ended without a result (killed, or out of "
          "memory); run again with fewer workers, or num_workers=1 to see "
          "its error.")

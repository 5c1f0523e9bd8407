"""Outputs written under a temporary name and moved into place when complete.

Builds on `rembert_tf.common.fileio` and `output_lock` (one writer per
output), locally and on object stores alike: the output is built in
`.NAME.tmp-TAG`; an old one (only with --overwrite) goes to `.NAME.old-TAG`,
the marker `.NAME.into-TAG` says the new one is complete, then it moves in
(`swap_in`). The next writer (`taking_output`) finishes a run killed at any
point, even half-way through an object-by-object move: with the marker the
new output moves in, without it the old one moves back.

Example:
```python
from rembert_tf.common import fileio
from rembert_tf.common import outputs
with outputs.atomic_directory("ram://demo/export", overwrite=True) as tmp:
  fileio.write_text(fileio.join(tmp, "README"), "complete\\n")
assert fileio.exists("ram://demo/export/README")
```
"""
import contextlib
import functools
import inspect
import multiprocessing
import os
import sys
from typing import Callable, Iterator, List, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock

PathLike = fileio.PathLike
_OLD, _INTO = ".old-", ".into-"
# Set by `worker_pool.pool` while its workers run: the file a worker writes
# one line to when it re-runs its parent's script and reaches a command.
WORKER_ERRORS_ENV = "REMBERT_TF_WORKER_ERRORS"


@contextlib.contextmanager
def taking_output(path: PathLike) -> Iterator[str]:
  """`output_lock.writing_output(path)`, having first finished a swap a
  killed run left and removed the temporaries of writers that are gone."""
  with output_lock.writing_output(path) as path:
    recover_interrupted_swap(path)
    yield path


def writes_output(argument: str) -> Callable:
  """Runs the decorated function in `taking_output(<its argument>)`; a call
  where that argument is None takes no lock."""
  def decorate(function: Callable) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
      if getattr(multiprocessing.current_process(), "_inheriting", False):
        _end_re_run(function.__name__)
      path = signature.bind(*args, **kwargs).arguments.get(argument)
      with contextlib.nullcontext() if path is None else taking_output(path):
        return function(*args, **kwargs)
    return wrapped
  return decorate


def _end_re_run(name: str) -> None:
  """A spawned worker re-running its parent's script (no `__main__` guard)
  has reached a command: it writes nothing and ends quietly, after one line
  to its pool (`worker_pool`), which reports it."""
  with contextlib.suppress(KeyError, OSError):
    with fileio.open_file(os.environ[WORKER_ERRORS_ENV], "a") as f:
      f.write(f"{name} was called again inside a worker process\n")
  sys.exit(errors.EXIT_ERROR)


def refuse_existing(paths: Sequence[str], overwrite: bool) -> None:
  """`errors.OutputExistsError` naming the first of `paths` that exists,
  unless `overwrite`."""
  for path in [] if overwrite else paths:
    if fileio.exists(path):
      raise errors.OutputExistsError(
          f"{path} already exists; choose another output or pass --overwrite "
          "to replace it (the old output stays until the new one is "
          "complete).")


@contextlib.contextmanager
def atomic_directory(path: PathLike, overwrite: bool = False) -> Iterator[str]:
  """Yields a temporary directory that becomes `path` when the block completes,
  under the output's lock; an old `path` (only with `overwrite`, else
  errors.OutputExistsError) stays until then. On an exception the temporary
  directory is removed and `path` is untouched."""
  path = fileio.as_str(path).rstrip("/")
  if fileio.temporaries_dir(path) == path:
    raise errors.UsageError(
        f"{path} is the root of a bucket, which cannot be swapped whole; "
        f"write the output into a folder of it (e.g. {path}/output).")
  with taking_output(path):
    refuse_existing([path], overwrite)
    with staging(path) as tmp:
      yield tmp
    swap_in(path, tmp)  # A full disk: named by writing_output.


@contextlib.contextmanager
def staging(path: str) -> Iterator[str]:
  """A new temporary directory beside `path`, removed when the block fails."""
  tmp = fileio.temporary_path(path)
  fileio.makedirs(tmp)
  try:
    yield tmp
  except BaseException as e:
    fileio.rmtree(tmp)
    if fileio.is_disk_full(e):  # TensorFlow's file-system error as well
      raise fileio.disk_full_error(path, e) from None
    raise


def _companion(path: str, tag: str, of: str = fileio.TEMPORARY_TAG) -> str:
  """`.NAME{tag}OWNER` beside `.NAME{of}OWNER` (`.tmp-`, `.old-`, `.into-`)."""
  head, _, owner = fileio.basename(path).rpartition(of)
  return fileio.join(fileio.dirname(path), head + tag + owner)


def _move(src: str, dst: str) -> None:
  """Moves `src` to `dst`, or finishes such a move that was cut short."""
  if not fileio.exists(src):
    return
  if fileio.isdir(src) and (fileio.exists(dst) or fileio.is_remote(src)
                            or fileio.is_remote(dst)):
    _merge_tree(src, dst)
    return
  if fileio.dirname(dst):
    fileio.makedirs(fileio.dirname(dst))
  fileio.rename(src, dst)


def _merge_tree(src: str, dst: str) -> None:
  """Moves every file of `src` to the same place under `dst`, then drops
  `src`: how an object store moves a directory, and how a move cut short
  half-way is finished."""
  for relative in fileio.files_under(src):
    fileio.makedirs(fileio.dirname(fileio.join(dst, relative)))
    fileio.rename(fileio.join(src, relative), fileio.join(dst, relative))
  fileio.makedirs(dst)
  fileio.rmtree(src)


def swap_in(target: str, tmp: str, old_names: Optional[Sequence[str]] = None,
            new_names: Optional[Sequence[str]] = None) -> None:
  """Moves the complete new output in `tmp` (a `fileio.temporary_path`) into
  place, as the module doc says: the whole directory `target`, or its members
  `new_names` replacing `old_names`. An error on the way finishes or undoes
  the swap at once; a kill leaves it to the next writer."""
  old, marker = _companion(tmp, _OLD), _companion(tmp, _INTO)
  if old_names is None:
    aside, into = [(target, old)], [(tmp, target)]
  else:
    aside = [(fileio.join(target, n), fileio.join(old, n)) for n in old_names]
    into = [(fileio.join(tmp, n), fileio.join(target, n)) for n in new_names]
  try:
    for src, dst in aside:
      _move(src, dst)
    with fileio.open_file(marker, "w") as f:
      f.write("the new output is complete and the old one aside\n")
    for src, dst in into:
      _move(src, dst)
    fileio.rmtree(old)
    fileio.rmtree(tmp)
    fileio.remove(marker)
  except Exception:
    with contextlib.suppress(Exception):  # Best effort; else the next writer.
      _finish(target, tmp)
    raise


def _finish(target: str, tmp: str) -> None:
  """Completes (with the marker) or undoes the swap of `tmp` into `target`."""
  old, marker = _companion(tmp, _OLD), _companion(tmp, _INTO)
  if fileio.exists(marker):
    _move(tmp, target)
    fileio.rmtree(old)
    fileio.remove(marker)
  else:
    _move(old, target)
    fileio.rmtree(tmp)


def _finish_or_say(target: str, tmp: str, done: str) -> None:
  try:
    _finish(target, tmp)
  except Exception as e:  # pylint: disable=broad-except
    raise errors.InputError(
        f"{target}: a run killed while replacing it left its old files in "
        f"{_companion(tmp, _OLD)} and its new ones in {tmp}; finishing that "
        f"failed ({errors.one_line(e)}). Fix that and run again, or move the "
        "files back by hand.") from None
  print(f"{target}: {done}", file=sys.stderr, flush=True)


def _beside(root: str, tag: str) -> List[str]:
  parent = fileio.temporaries_dir(root)
  prefix = f".{fileio.basename(root)}{tag}"
  if not fileio.isdir(parent or "."):
    return []
  return sorted(fileio.join(parent, n) for n in fileio.listdir(parent or ".")
                if n.startswith(prefix))


def recover_interrupted_swap(root: PathLike, target: Optional[PathLike] = None
                             ) -> None:
  """Finishes the swaps into `target` (default `root`) that killed runs left
  beside `root` (under the output's lock, so no live writer's), then removes
  the temporaries of writers that are gone. Each repair prints one line on
  stderr; several old copies without a marker are refused (InputError)."""
  root = fileio.as_str(root).rstrip("/")
  target = fileio.as_str(target or root).rstrip("/")
  as_tmp = lambda path, tag: _companion(path, fileio.TEMPORARY_TAG, of=tag)
  for marker in _beside(root, _INTO):
    _finish_or_say(target, as_tmp(marker, _INTO), "finished the replacement a "
                   "killed run had begun (the new output is in place).")
  copies = _beside(root, _OLD)
  if len(copies) > 1:
    state = "is incomplete" if fileio.exists(target) else "is missing"
    raise errors.InputError(
        f"{target} {state} and {len(copies)} copies moved aside by killed "
        f"runs are beside it ({', '.join(copies)}); move the one to keep to "
        f"{target}, remove the others, and run again.")
  for copy_path in copies:
    _finish_or_say(target, as_tmp(copy_path, _OLD),
                   f"restored from {copy_path}, where a killed run had moved it.")
  remove_stale_temporaries(root, lock_of=target)


def remove_stale_temporaries(path: PathLike,
                             lock_of: Optional[PathLike] = None) -> List[str]:
  """Removes the `.NAME.tmp-*` beside `path` whose writer is gone
  (`owner_is_running` on output `lock_of`, default `path`); returns them."""
  path = fileio.as_str(path).rstrip("/")
  prefix = f".{fileio.basename(path)}{fileio.TEMPORARY_TAG}"
  removed = []
  for stale in _beside(path, fileio.TEMPORARY_TAG):
    writer = fileio.basename(stale)[len(prefix):].rsplit("-", 1)[0]
    if not output_lock.owner_is_running(writer, lock_of or path):
      fileio.rmtree(stale)
      removed.append(stale)
  return removed

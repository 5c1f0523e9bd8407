"""File I/O on user paths, on any TensorFlow filesystem: local, `gs://`, `ram://`, ...

Every module of rembert_tf that reads or writes a path a user gave goes through
this module. `pathlib`, `open` and `shutil` do not understand `gs://bucket/x`
(pathlib turns `gs://b/x` into the local path `gs:/b/x`), so a path with a
scheme (`scheme://...`) goes through `tf.io.gfile`, imported only then. Local
files are read, written, listed and renamed with the operating system directly:
the record-creation workers, which only do that, stay free of TensorFlow (its
import costs seconds per process and is not fork-safe). Existence checks and
tree removal go through `tf.io.gfile` for every path (one implementation of
their semantics; only parent processes call them).

Writes are atomic: a file is written under a temporary name in its own
directory (`.NAME.tmp-PID@HOST-XXXX`, naming its writer) and renamed over the
final name when complete; a directory is built under a temporary sibling and
swapped in when complete (`atomic_directory`). An output is written by one
run at a time (`writing_output`: the lock of `output_lock`). The swap is
journaled (`swap_in`): a run killed at any point of it, even half-way through
a directory that Cloud Storage renames object by object, leaves the old or
the new output whole, and the next writer finishes or undoes it before
anything else. Temporaries of writers that are gone are removed by
`remove_stale_temporaries`; those of a live process are kept.

Example:
```python
from rembert_tf.common import fileio
fileio.write_json("ram://demo/run/params.json", {"steps": 10})
assert fileio.read_json("ram://demo/run/params.json") == {"steps": 10}
with fileio.atomic_directory("ram://demo/export", overwrite=True) as tmp:
  fileio.write_text(fileio.join(tmp, "README"), "complete\\n")
assert fileio.exists("ram://demo/export/README")
```
"""
import contextlib
import functools
import glob as glob_lib
import hashlib
import inspect
import io
import json
import os
import posixpath
import secrets
import sys
import tempfile
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import yaml

from rembert_tf.common import errors
from rembert_tf.common import output_lock

PathLike = Union[str, os.PathLike]

_TMP_TAG = ".tmp-"
_OLD_TAG = ".old-"
_SWAP_TAG = ".swap-"
_JOURNAL_SUFFIX, _MARKER_SUFFIX = ".json", ".into"


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _gfile_errors():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.errors.OpError


def as_str(path: PathLike) -> str:
  return os.fspath(path)


def is_remote(path: PathLike) -> bool:
  """True for `scheme://...` paths (gs://, ram://, hdfs://, s3://)."""
  return "://" in as_str(path)


def join(path: PathLike, *parts: str) -> str:
  """Joins path parts; keeps a `scheme://` prefix intact."""
  path = as_str(path)
  if is_remote(path):
    return posixpath.join(path, *[as_str(p) for p in parts])
  return os.path.join(path, *[as_str(p) for p in parts])


def dirname(path: PathLike) -> str:
  path = as_str(path).rstrip("/") or "/"
  if is_remote(path):
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest)}"
  return os.path.dirname(path)


def basename(path: PathLike) -> str:
  path = as_str(path).rstrip("/")
  return posixpath.basename(path) if is_remote(path) else os.path.basename(path)


def exists(path: PathLike) -> bool:
  path = as_str(path)
  return _gfile().exists(path)


def isdir(path: PathLike) -> bool:
  path = as_str(path)
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: PathLike) -> bool:
  path = as_str(path)
  if is_remote(path):
    return exists(path) and not isdir(path)
  return os.path.isfile(path)


def makedirs(path: PathLike) -> None:
  """Creates a directory and its parents (the user's umask applies)."""
  path = as_str(path)
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def glob(pattern: PathLike) -> List[str]:
  """Sorted matches; `**` matches any depth on local paths."""
  pattern = as_str(pattern)
  if is_remote(pattern):
    return sorted(_gfile().glob(pattern))
  return sorted(glob_lib.glob(pattern, recursive=True))


def listdir(path: PathLike) -> List[str]:
  path = as_str(path)
  names = _gfile().listdir(path) if is_remote(path) else os.listdir(path)
  return sorted(n.rstrip("/") for n in names)


def size(path: PathLike) -> int:
  path = as_str(path)
  return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def remove(path: PathLike) -> None:
  path = as_str(path)
  if is_remote(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: PathLike) -> None:
  """Removes a directory tree (or a file); a missing path is fine."""
  path = as_str(path)
  if not exists(path):
    return
  if not isdir(path):
    remove(path)
    return
  try:
    _gfile().rmtree(path)
  except _gfile_errors():
    if is_remote(path):  # a local tree is removed best effort
      raise


def rename(src: PathLike, dst: PathLike, overwrite: bool = False) -> None:
  """Renames a file or directory; `overwrite` replaces an existing file."""
  src, dst = as_str(src), as_str(dst)
  if (is_remote(src) or is_remote(dst)) and isdir(src):
    _rename_tree(src, dst)
    return
  if not overwrite and exists(dst):
    raise FileExistsError(17, "File exists", dst)
  _rename_one(src, dst, overwrite)


def _rename_one(src: str, dst: str, overwrite: bool) -> None:
  """The one physical rename (a file, an object, a local directory)."""
  if is_remote(src) or is_remote(dst):
    _gfile().rename(src, dst, overwrite=overwrite)
  elif overwrite:
    os.replace(src, dst)
  else:
    os.rename(src, dst)


def _files_under(root: str) -> List[str]:
  """Paths of the files under directory `root`, relative to it."""
  walk = _gfile().walk if is_remote(root) else os.walk
  found = []
  for parent, _, files in walk(root):
    relative = parent[len(root):].lstrip("/")
    found += [posixpath.join(relative, f) if relative else f for f in files]
  return sorted(found)


def _rename_tree(src: str, dst: str) -> None:
  # Object stores have no directories: a directory rename moves each file
  # (Cloud Storage does the same server-side; some filesystems, ram:// among
  # them, would only rename the directory marker and lose the files).
  if exists(dst):
    raise FileExistsError(17, "File exists", dst)
  _merge_tree(src, dst)


def _merge_tree(src: str, dst: str) -> None:
  """Moves every file of `src` to the same place under `dst`, then drops `src`."""
  for relative in _files_under(src):
    target = join(dst, relative)
    makedirs(dirname(target))
    _rename_one(join(src, relative), target, True)
  makedirs(dst)
  rmtree(src)


def copy(src: PathLike, dst: PathLike, overwrite: bool = False) -> None:
  """Copies a file, atomically at `dst` (temporary name, then rename)."""
  src, dst = as_str(src), as_str(dst)
  if exists(dst) and not overwrite:
    raise FileExistsError(17, "File exists", dst)
  with atomic_write(dst, "wb") as out, open_file(src, "rb") as inp:
    while True:
      block = inp.read(1 << 24)
      if not block:
        break
      out.write(block)


def open_file(path: PathLike, mode: str = "r"):
  """Opens a file for reading or writing (not atomic: see `atomic_write`)."""
  path = as_str(path)
  if is_remote(path):
    return _gfile().GFile(path, mode)
  if "b" in mode:
    return io.open(path, mode)
  return io.open(path, mode, encoding="utf-8")


def read_bytes(path: PathLike) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def read_text(path: PathLike) -> str:
  data = read_bytes(path)
  return data.decode("utf-8")


def read_json(path: PathLike) -> Any:
  return json.loads(read_text(path))


def read_yaml(path: PathLike) -> Any:
  return yaml.safe_load(read_text(path))


def temporary_path(path: PathLike, tag: str = _TMP_TAG) -> str:
  """`.NAME.tmp-PID@HOST-XXXX` beside `path`: a name that says who writes it."""
  path = as_str(path).rstrip("/")
  name = f".{basename(path)}{tag}{output_lock.owner_tag()}-{secrets.token_hex(4)}"
  return join(_beside(path), name)


def _beside(path: str) -> str:
  """Where the temporaries of `path` go: its directory (a bucket: itself)."""
  parent = dirname(path)
  return path if parent.endswith("://") else parent


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w") -> Iterator[Any]:
  """Yields a file object; the file appears at `path` only when complete.

  On an exception (a full disk, a kill signal turned into an exception) the
  temporary file is removed and `path` keeps its old content.
  """
  path = as_str(path)
  parent = dirname(path)
  if parent:
    makedirs(parent)
  tmp = temporary_path(path)
  try:
    with open_file(tmp, mode) as f:
      yield f
    rename(tmp, path, overwrite=True)
  except BaseException:
    if exists(tmp):
      remove(tmp)
    raise


def write_bytes(path: PathLike, data: bytes) -> None:
  with atomic_write(path, "wb") as f:
    f.write(data)


def write_text(path: PathLike, text: str) -> None:
  write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, value: Any, indent: int = 2) -> None:
  write_text(path, json.dumps(value, indent=indent, sort_keys=True) + "\n")


def write_yaml(path: PathLike, value: Any) -> None:
  write_text(path, yaml.safe_dump(value, sort_keys=False))


def sha256(path: PathLike) -> str:
  """Hex sha256 of a file's bytes, read in blocks."""
  digest = hashlib.sha256()
  with open_file(path, "rb") as f:
    while True:
      block = f.read(1 << 22)
      if not block:
        break
      digest.update(block)
  return digest.hexdigest()


# --- Outputs: one writer, swapped in by a journaled move ---------------------


def _siblings(path: str, tag: str) -> List[str]:
  """The `.NAME{tag}*` entries beside `path`."""
  parent, prefix = _beside(path), f".{basename(path)}{tag}"
  if not isdir(parent or "."):
    return []
  return [join(parent, n) for n in listdir(parent or ".") if n.startswith(prefix)]


def remove_stale_temporaries(path: PathLike,
                             lock_of: Optional[PathLike] = None) -> List[str]:
  """Removes the `.NAME.tmp-*` siblings of `path` whose writer is gone.

  A temporary's name carries its writer (`PID@HOST`): it is kept while that
  process runs on this host or, from another host, while that writer holds
  a live lock on output `lock_of` (default `path`). Copies of an old output
  (`.NAME.old-*`) are never removed here: see `recover_interrupted_swap`.
  Returns what it removed.
  """
  path = as_str(path).rstrip("/")
  prefix = f".{basename(path)}{_TMP_TAG}"
  removed = []
  for stale in _siblings(path, _TMP_TAG):
    writer = basename(stale)[len(prefix):].rsplit("-", 1)[0]
    if not output_lock.owner_is_running(writer, lock_of or path):
      rmtree(stale)
      removed.append(stale)
  return removed


@contextlib.contextmanager
def writing_output(path: PathLike) -> Iterator[str]:
  """Holds the lock of output `path` and first finishes an interrupted swap.

  Every command that writes `path` runs in this block: a second run is
  refused with `output_lock.OutputLockedError` naming the first, and a swap
  that a killed run left half-way is completed or rolled back
  (`recover_interrupted_swap`) before anything looks at `path`. Nests.
  Raises errors.InputError when a parent of `path` is a file.
  """
  path = as_str(path).rstrip("/")
  check_output_location(path)
  with output_lock.hold(path) as taken:
    if taken:
      recover_interrupted_swap(path)
    yield path


def writes_output(argument: str) -> Callable:
  """Runs the decorated function in `writing_output(<its argument>)`.

  `argument` names the parameter that holds the output path; a call where
  it is None writes no output and takes no lock.
  """
  def decorate(function: Callable) -> Callable:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
      path = signature.bind(*args, **kwargs).arguments.get(argument)
      if path is None:
        return function(*args, **kwargs)
      with writing_output(path):
        return function(*args, **kwargs)
    return wrapped
  return decorate


@contextlib.contextmanager
def atomic_directory(path: PathLike, overwrite: bool = False) -> Iterator[str]:
  """Yields a temporary directory that becomes `path` when the block completes.

  Holds the output's lock (`writing_output`). The old `path` (with
  `overwrite`) is moved aside only after the new content is complete, and
  removed once the new one is in place (`swap_in`). On an exception the
  temporary directory is removed and `path` is untouched. Raises
  `errors.OutputExistsError` when `path` exists and `overwrite` is false,
  and `errors.InputError` when a parent of `path` is a file.
  """
  path = as_str(path).rstrip("/")
  with writing_output(path):
    remove_stale_temporaries(path)
    if exists(path) and not overwrite:
      raise errors.OutputExistsError(
          f"{path} already exists; choose another output or pass --overwrite "
          "to replace it (the old output stays until the new one is complete).")
    tmp = temporary_path(path)
    makedirs(tmp)
    try:
      yield tmp
    except BaseException:
      rmtree(tmp)
      raise
    old = temporary_path(path, _OLD_TAG)
    swap_in(path, aside=[(path, old)] if exists(path) else [],
            into=[(tmp, path)], new=[tmp],
            old=[old] + _siblings(path, _OLD_TAG))


def swap_in(path: PathLike, *, aside: Sequence[Tuple[str, str]],
            into: Sequence[Tuple[str, str]], new: Sequence[str] = (),
            old: Sequence[str] = ()) -> None:
  """Replaces output `path` by moves that a kill at any point cannot lose.

  `aside` moves (src, dst) take the old output out of the way, `into` moves
  bring the complete new one in; `new` (temporaries of the new output) and
  `old` (copies of the old one) are removed at the end. First a journal
  `.NAME.swap-*` beside `path` lists every move; once the old output is
  wholly aside a marker `.NAME.swap-*.into` is written. A swap cut short is
  finished by the next writer of `path` (`recover_interrupted_swap`): moved
  back without the marker, completed with it. All paths lie under the
  directory of `path`.
  """
  path = as_str(path).rstrip("/")
  journal = temporary_path(path, _SWAP_TAG) + _JOURNAL_SUFFIX
  parent = dirname(journal)
  relative = lambda p: _relative(p, parent)
  record = {"output": basename(path),
            "aside": [[relative(s), relative(d)] for s, d in aside],
            "into": [[relative(s), relative(d)] for s, d in into],
            "new": [relative(p) for p in new], "old": [relative(p) for p in old]}
  try:
    with open_file(journal, "w") as f:  # Whole, or unreadable: nothing moved.
      f.write(json.dumps(record, indent=1) + "\n")
  except Exception:
    for temporary in new:
      rmtree(temporary)
    raise
  try:
    for src, dst in aside:
      _move(src, dst)
    with open_file(_marker_of(journal), "w") as f:
      f.write("the old output is aside\n")  # (ram:// drops empty files)
    _complete_swap(journal)
  except Exception:
    with contextlib.suppress(Exception):  # Best effort; else the next run.
      _complete_swap(journal)
    raise


def _marker_of(journal: str) -> str:
  return journal[:-len(_JOURNAL_SUFFIX)] + _MARKER_SUFFIX


def _relative(path: str, parent: str) -> str:
  if not parent:
    return path
  if not path.startswith(parent.rstrip("/") + "/"):
    raise ValueError(f"internal: {path} is not under {parent}")
  return path[len(parent.rstrip("/")) + 1:]


def _move(src: str, dst: str) -> None:
  """Moves `src` to `dst`, or finishes such a move that was cut short."""
  if not exists(src):
    return
  if isdir(src) and exists(dst):  # A tree moved object by object, half-way.
    _merge_tree(src, dst)
    return
  if dirname(dst):
    makedirs(dirname(dst))
  rename(src, dst, overwrite=True)


def _complete_swap(journal: str) -> Optional[str]:
  """Finishes the swap of `journal`; returns "new" or "old" (what is in place).

  With the marker every `into` move is (re)done; without it every `aside`
  move is undone. Then the journal's temporaries go, and the old copies too
  when the new output is in place (after a roll-back, only emptied ones).
  """
  parent, marker = dirname(journal), _marker_of(journal)
  try:
    record = json.loads(read_text(journal))
  except (ValueError, OSError):
    record = None  # Cut short while written: nothing was moved.
  full = lambda p: join(parent, p) if parent else p
  outcome = None
  if record is not None and exists(marker):
    for src, dst in record["into"]:
      _move(full(src), full(dst))
    for leftover in record["new"] + record["old"]:
      rmtree(full(leftover))
    outcome = "new"
  elif record is not None:
    for src, dst in reversed(record["aside"]):
      _move(full(dst), full(src))
    for leftover in record["new"]:
      rmtree(full(leftover))
    for copy_path in map(full, record["old"]):
      if isdir(copy_path) and not _files_under(copy_path):
        rmtree(copy_path)
    outcome = "old"
  if exists(marker):
    remove(marker)
  remove(journal)
  return outcome


def recover_interrupted_swap(path: PathLike) -> None:
  """Puts `path` back in one piece after a writer was killed while swapping.

  Runs under the output's lock (`writing_output`), so no live writer's swap
  is touched. Each journal `.NAME.swap-*` is finished (`_complete_swap`). An
  old copy with no journal (`.NAME.old-*`) while `path` is missing is moved
  back when it is the only one; several are refused (errors.InputError
  naming them). Each repair prints one line on stderr.
  """
  path = as_str(path).rstrip("/")
  for journal in _siblings(path, _SWAP_TAG):
    if not journal.endswith(_JOURNAL_SUFFIX):
      continue  # A marker: its journal is finished below.
    try:
      outcome = _complete_swap(journal)
    except Exception as e:  # pylint: disable=broad-except
      raise errors.InputError(
          f"{path}: a run killed while replacing it left {journal}, which "
          f"lists where every file of the old and the new output is; "
          f"finishing it failed ({errors.one_line(e)}). Fix that and run "
          "again, or move the files back by hand.") from None
    if outcome:
      state = ("the new output is in place" if outcome == "new"
               else "the state before it is back")
      _say(f"{path}: finished the replacement a killed run had begun "
           f"({state}).")
  copies = _siblings(path, _OLD_TAG)
  if not copies or exists(path):
    return
  if len(copies) > 1:
    raise errors.InputError(
        f"{path} is missing and {len(copies)} copies moved aside by killed "
        f"runs are beside it ({', '.join(copies)}); move the one to keep to "
        f"{path}, remove the others, and run again.")
  rename(copies[0], path)
  _say(f"{path}: restored from {copies[0]}, where a killed run had moved it.")


def _say(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


def check_output_location(path: PathLike) -> None:
  """Raises `errors.InputError` when a parent of `path` is an existing file."""
  parent = dirname(as_str(path).rstrip("/"))
  while parent and parent not in ("/", ".") and not parent.endswith("://"):
    if exists(parent):
      if not isdir(parent):
        raise errors.InputError(
            f"{path}: {parent} is a file, not a directory; choose an output "
            "path under a directory.")
      return
    parent = dirname(parent)


@contextlib.contextmanager
def local_copy(path: PathLike) -> Iterator[str]:
  """A local file path with `path`'s content (the path itself when local).

  For libraries that take only local files (SentencePiece, safetensors
  memory-mapping): a remote file is copied into a temporary local directory
  for the duration of the block.
  """
  path = as_str(path)
  if not is_remote(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="rembert_tf-") as tmp:
    local = os.path.join(tmp, basename(path))
    _gfile().copy(path, local, overwrite=True)
    yield local

"""File I/O on user paths, on any TensorFlow filesystem: local, `gs://`, `ram://`, ...

Builds on `tf.io.gfile`, imported only for a `scheme://` path (pathlib, open and
shutil turn `gs://b/x` into the local `gs:/b/x`); local files go through the
operating system, so the record-creation workers stay free of TensorFlow.
Existence checks and tree removal use `tf.io.gfile` for every path. A file is
written under `.NAME.tmp-PID@HOST-XXXX` (naming its writer) and renamed into
place when complete; whole outputs are swapped in by `common.outputs`.

Example:
```python
from rembert_tf.common import fileio
fileio.write_json("ram://demo/run/params.json", {"steps": 10})
assert fileio.read_json("ram://demo/run/params.json") == {"steps": 10}
```
"""
import contextlib
import errno
import glob as glob_lib
import hashlib
import io
import json
import os
import posixpath
import re
import secrets
import socket
import tempfile
from typing import Any, Iterator, List, Optional, Tuple, Union

import yaml

from rembert_tf.common import errors

PathLike = Union[str, os.PathLike]

TEMPORARY_TAG = ".tmp-"


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


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


def real_path(path: PathLike) -> str:
  """The path two names of one file share: symbolic links resolved
  (`os.path.realpath`) for a local path; `.`, `..` and doubled or trailing
  slashes removed for a `scheme://` path (object stores have no links)."""
  path = as_str(path)
  if is_remote(path):
    scheme, rest = path.split("://", 1)
    rest = posixpath.normpath(rest) if rest.strip("/") else ""
    return f"{scheme}://{rest}"
  return os.path.realpath(path)


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


def _literal_parts_escaped(pattern: str) -> str:
  """`pattern` with each part that names an existing file or folder as
  written escaped: `runs/[v2]/*.txt` is the folder `[v2]`, not a class."""
  parts = pattern.split(os.sep)
  for i, part in enumerate(parts):
    if glob_lib.has_magic(part) and os.path.lexists(os.sep.join(parts[:i + 1])):
      parts[i] = glob_lib.escape(part)
  return os.sep.join(parts)


def glob(pattern: PathLike) -> List[str]:
  """Sorted matches; `**` matches any depth on local paths. A path that
  exists as written matches itself, glob characters (`[v2]`) and all."""
  pattern = as_str(pattern)
  if is_remote(pattern):
    matched = sorted(_gfile().glob(pattern))
    return matched or ([pattern] if glob_lib.has_magic(pattern) and
                       exists(pattern) else [])
  return sorted(glob_lib.glob(_literal_parts_escaped(pattern), recursive=True))


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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.io.gfile.rmtree(path)
  except tf.errors.OpError:
    if is_remote(path):  # a local tree is removed best effort
      raise


def rename(src: PathLike, dst: PathLike) -> None:
  """Renames a file (replacing one at `dst`) or a directory. Object stores
  have no directories: one is moved file by file, as Cloud Storage does (a
  rename of ram://'s directory marker would lose the files)."""
  src, dst = as_str(src), as_str(dst)
  if (is_remote(src) or is_remote(dst)) and isdir(src):
    merge_tree(src, dst)
  else:
    _rename_one(src, dst, True)


def _rename_one(src: str, dst: str, overwrite: bool) -> None:
  """The one physical rename (a file, an object, a local directory)."""
  if is_remote(src) or is_remote(dst):
    _gfile().rename(src, dst, overwrite=overwrite)
  else:
    (os.replace if overwrite else os.rename)(src, dst)


def files_under(root: str) -> List[str]:
  """Paths of the files under directory `root`, relative to it."""
  walk = _gfile().walk if is_remote(root) else os.walk
  found = []
  for parent, _, files in walk(root):
    relative = parent[len(root):].lstrip("/")
    found += [posixpath.join(relative, f) if relative else f for f in files]
  return sorted(found)


def merge_tree(src: str, dst: str) -> None:
  """Moves every file of `src` to the same place under `dst`, then drops `src`."""
  for relative in files_under(src):
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
  return read_bytes(path).decode("utf-8")


def utf8_problem(path: PathLike) -> str:
  """Where a file stops being UTF-8, for the line that refuses it: its line,
  and the byte offset in the file and in that line (a reader that decodes
  line by line or in chunks knows neither)."""
  data = read_bytes(path)
  try:
    data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    column = e.start - (data.rfind(b"\n", 0, e.start) + 1)
    return (f"{as_str(path)}:{line}: not UTF-8 text ({e.reason} at byte "
            f"{e.start} of the file, byte {column} of line {line}); save the "
            "file as UTF-8")
  return f"{as_str(path)} is UTF-8 text"


def read_json(path: PathLike) -> Any:
  return json.loads(read_text(path))


def read_yaml(path: PathLike) -> Any:
  return yaml.safe_load(read_text(path))


# This host, as temporary and lock names carry it.
HOST = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"


def owner_tag() -> str:
  """`PID@HOST` of this process: what temporary and lock names carry."""
  return f"{os.getpid()}@{HOST}"


def parse_owner(tag: str) -> Optional[Tuple[int, str]]:
  """(pid, host) of an `owner_tag()`, or None for another kind of name."""
  pid, sep, host = tag.partition("@")
  return (int(pid), host) if sep and pid.isdigit() and host else None


def temporary_path(path: PathLike) -> str:
  """`.NAME.tmp-PID@HOST-XXXX` beside `path`: a name that says who writes it."""
  path = as_str(path).rstrip("/")
  name = f".{basename(path)}{TEMPORARY_TAG}{owner_tag()}-{secrets.token_hex(4)}"
  return join(temporaries_dir(path), name)


def temporaries_dir(path: str) -> str:
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
    rename(tmp, path)
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


def is_disk_full(error: BaseException) -> bool:
  """A full disk or an exhausted quota: errno ENOSPC / EDQUOT, or
  TensorFlow's file-system error saying so."""
  if isinstance(error, OSError):
    return error.errno in (errno.ENOSPC, errno.EDQUOT)
  text = str(error)
  return any(s in text for s in ("No space left on device",
                                 "Disk quota exceeded"))


def disk_full_error(output: PathLike, error: BaseException
                    ) -> errors.InputError:
  """The one line for a write that ran out of space: the output, not the
  temporary file the error names, and the fix."""
  reason = ("disk quota exceeded" if "quota" in str(error).lower() or
            getattr(error, "errno", None) == errno.EDQUOT
            else "no space left on the device")
  return errors.InputError(
      f"{as_str(output)}: writing it failed: {reason}. Nothing was written "
      "(its temporary files are removed; an existing output is kept). Free "
      f"space where {as_str(output)} goes, or choose an output on another "
      "disk, then run again.")


def _refuse_broken_link(path: str, output: str) -> None:
  """A symbolic link that leads nowhere (a loop, a missing target) cannot be
  written through nor replaced by a rename."""
  if not is_remote(path) and os.path.islink(path) and not _resolves(path):
    where = path if path == output else f"{output}: {path}"
    raise errors.InputError(
        f"{where} is a symbolic link that leads nowhere (a loop or a missing "
        f"target: {os.readlink(path)}); remove it or choose another output "
        "path.")


def _resolves(link: str) -> bool:
  """Whether a local symbolic link leads to something (stat follows it)."""
  try:
    os.stat(link)
  except OSError:
    return False
  return True


def check_output_location(path: PathLike) -> None:
  """Raises `errors.InputError` when a parent of `path` is an existing file,
  or `path` or a parent is a symbolic link that leads nowhere."""
  path = as_str(path).rstrip("/")
  _refuse_broken_link(path, path)
  parent = dirname(path)
  while parent and parent not in ("/", ".") and not parent.endswith("://"):
    _refuse_broken_link(parent, path)
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

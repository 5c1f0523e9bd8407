"""File I/O on user paths, on any TensorFlow filesystem: local, `gs://`, `ram://`, ...

A `scheme://` path goes through `tf.io.gfile`, imported only then; a local
one through the operating system, so that a process that never sees a bucket
(a record-writing worker, the demo corpus) does not load TensorFlow, and
outputs get the user's umask. A file is written under `.NAME.tmp-PID@HOST-XXXX` and
renamed into place when complete (`atomic_write`).

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
import json
import os
import posixpath
import re
import secrets
import shutil
import socket
from typing import Any, Iterator, List, Optional, Tuple, Union

from rembert_tf.common import errors

PathLike = Union[str, os.PathLike]
TEMPORARY_TAG = ".tmp-"
# This host, as temporary and lock names carry it.
HOST = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "localhost"


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def as_str(path: PathLike) -> str:
  return os.fspath(path)


def is_remote(path: PathLike) -> bool:
  """True for `scheme://...` paths (gs://, ram://, hdfs://, s3://)."""
  return "://" in as_str(path)


def join(path: PathLike, *parts: PathLike) -> str:
  return posixpath.join(as_str(path), *map(as_str, parts))


def dirname(path: PathLike) -> str:
  """The parent; `gs://` for a bucket `gs://b`."""
  path = as_str(path).rstrip("/") or "/"
  scheme, sep, rest = path.partition("://")
  if not sep:
    return os.path.dirname(path)
  return f"{scheme}://{posixpath.dirname(rest)}"


def basename(path: PathLike) -> str:
  return posixpath.basename(as_str(path).rstrip("/"))


def real_path(path: PathLike) -> str:
  """The path two names of one file share: symbolic links resolved locally;
  `.`, `..` and doubled or trailing slashes removed for a `scheme://` path."""
  path = as_str(path)
  if not is_remote(path):
    return os.path.realpath(path)
  scheme, _, rest = path.partition("://")
  return f"{scheme}://{posixpath.normpath(rest) if rest.strip('/') else ''}"


def exists(path: PathLike) -> bool:
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: PathLike) -> bool:
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path: PathLike) -> bool:
  if is_remote(path):
    return exists(path) and not isdir(path)
  return os.path.isfile(path)


def makedirs(path: PathLike) -> None:
  """Creates a directory and its parents (the user's umask applies)."""
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def glob(pattern: PathLike) -> List[str]:
  """Sorted matches; `**` matches any depth on local paths. A part that
  exists as written matches itself: `runs [v2]/*.txt` is the folder `[v2]`."""
  pattern = as_str(pattern)
  if is_remote(pattern):
    matched = sorted(_gfile().glob(pattern))
    literal = glob_lib.has_magic(pattern) and exists(pattern)
    return matched or ([pattern] if literal else [])
  parts = pattern.split("/")
  for i, part in enumerate(parts):
    if glob_lib.has_magic(part) and os.path.lexists("/".join(parts[:i + 1])):
      parts[i] = glob_lib.escape(part)
  return sorted(glob_lib.glob("/".join(parts), recursive=True))


def listdir(path: PathLike) -> List[str]:
  names = _gfile().listdir(path) if is_remote(path) else os.listdir(path)
  return sorted(n.rstrip("/") for n in names)


def size(path: PathLike) -> int:
  return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def remove(path: PathLike) -> None:
  if is_remote(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: PathLike) -> None:
  """Removes a directory tree, a file or a link; a missing path is fine."""
  if not exists(path):
    return
  if not isdir(path) or os.path.islink(path):
    remove(path)
  elif is_remote(path):
    _gfile().rmtree(path)
  else:
    shutil.rmtree(path, ignore_errors=True)


def rename(src: PathLike, dst: PathLike) -> None:
  """Renames a file or an object (replacing one at `dst`), or a local
  directory."""
  src, dst = as_str(src), as_str(dst)
  if is_remote(src) or is_remote(dst):
    _gfile().rename(src, dst, overwrite=True)
  else:
    os.replace(src, dst)


def files_under(root: str) -> List[str]:
  """Paths of the files under directory `root`, relative to it."""
  walk = _gfile().walk if is_remote(root) else os.walk
  found = []
  for parent, _, files in walk(root):
    relative = parent[len(root):].strip("/")
    found += [posixpath.join(relative, f) for f in files]
  return sorted(found)


def open_file(path: PathLike, mode: str = "r"):
  """Opens a file (writing to it is not atomic: see `atomic_write`)."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  return open(path, mode, encoding=None if "b" in mode else "utf-8")  # pylint: disable=consider-using-with


def read_bytes(path: PathLike) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def read_text(path: PathLike) -> str:
  return read_bytes(path).decode("utf-8")


def read_json(path: PathLike) -> Any:
  return json.loads(read_text(path))


def utf8_problem(path: PathLike) -> str:
  """Where a file stops being UTF-8 (line, byte offsets), for the line that
  refuses it."""
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


def owner_tag() -> str:
  """`PID@HOST` of this process: what temporary and lock names carry."""
  return f"{os.getpid()}@{HOST}"


def parse_owner(tag: str) -> Optional[Tuple[int, str]]:
  """(pid, host) of an `owner_tag()`, or None for another kind of name."""
  pid, sep, host = tag.partition("@")
  return (int(pid), host) if sep and pid.isdigit() and host else None


def temporaries_dir(path: str) -> str:
  """Where the temporaries of `path` go: its directory (a bucket: itself)."""
  parent = dirname(path)
  return path if parent.endswith("://") else parent


def temporary_path(path: PathLike, tag: str = TEMPORARY_TAG) -> str:
  """`.NAME.tmp-PID@HOST-XXXX` (or another `tag`) beside `path`: a name that
  says who writes it."""
  path = as_str(path).rstrip("/")
  name = f".{basename(path)}{tag}{owner_tag()}-{secrets.token_hex(4)}"
  return join(temporaries_dir(path), name)


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w") -> Iterator[Any]:
  """Yields a file object; the file appears at `path` only when complete. On
  an exception the temporary file goes and `path` keeps its old content."""
  if dirname(path):
    makedirs(dirname(path))
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


def write_json(path: PathLike, value: Any) -> None:
  write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def copy(src: PathLike, dst: PathLike) -> None:
  """Copies a file over `dst`, atomically."""
  with atomic_write(dst, "wb") as out, open_file(src, "rb") as inp:
    shutil.copyfileobj(inp, out, 1 << 24)


def sha256(path: PathLike) -> str:
  """Hex sha256 of a file's bytes, read in blocks."""
  digest = hashlib.sha256()
  with open_file(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 22), b""):
      digest.update(block)
  return digest.hexdigest()


def is_disk_full(error: BaseException) -> bool:
  """A full disk or an exhausted quota: ENOSPC / EDQUOT, or TensorFlow's
  file-system error saying so."""
  if isinstance(error, OSError):
    return error.errno in (errno.ENOSPC, errno.EDQUOT)
  return any(s in str(error) for s in ("No space left on device",
                                       "Disk quota exceeded"))


def disk_full_error(output: PathLike, error: BaseException
                    ) -> errors.InputError:
  """The one line for a write that ran out of space: it names the output,
  not the temporary file."""
  quota = ("quota" in str(error).lower()
           or getattr(error, "errno", None) == errno.EDQUOT)
  reason = "disk quota exceeded" if quota else "no space left on the device"
  return errors.InputError(
      f"{as_str(output)}: writing it failed: {reason}. Nothing was written "
      "(its temporary files are removed; an existing output is kept). Free "
      f"space where {as_str(output)} goes, or choose an output on another "
      "disk, then run again.")


def check_output_location(path: PathLike) -> None:
  """errors.InputError when a parent of `path` is a file, or `path` or a
  parent is a symbolic link that leads nowhere (a loop, a missing target)."""
  output = as_str(path).rstrip("/")
  path = output
  while path and path not in ("/", ".") and not path.endswith("://"):
    if os.path.islink(path) and not exists(path):
      where = path if path == output else f"{output}: {path}"
      raise errors.InputError(
          f"{where} is a symbolic link that leads nowhere (a loop or a "
          f"missing target: {os.readlink(path)}); remove it or choose another "
          "output path.")
    if path != output and exists(path):
      if not isdir(path):
        raise errors.InputError(
            f"{output}: {path} is a file, not a directory; choose an output "
            "path under a directory.")
      return
    path = dirname(path)

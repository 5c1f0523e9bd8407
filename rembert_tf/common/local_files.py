"""Local files for libraries that read or write only local paths (SentencePiece, safetensors, h5py).

Builds on `fileio` and `output_lock.pid_running`: `local_copy` gives a
`scheme://` file's content as a local file; `local_scratch_dir` a folder under
TMPDIR named for its run (`PID@HOST`), which the next run removes once that
run is gone.

Example:
```python
from rembert_tf.common import fileio
from rembert_tf.common import local_files
fileio.write_text("ram://demo/notes.txt", "kept\\n")
with local_files.local_copy("ram://demo/notes.txt") as local:
  assert fileio.read_text(local) == "kept\\n"
```
"""
import contextlib
import os
import tempfile
from typing import Iterator

from rembert_tf.common import fileio
from rembert_tf.common import output_lock


@contextlib.contextmanager
def local_copy(path: fileio.PathLike) -> Iterator[str]:
  """A local file with `path`'s content (the path itself when local)."""
  path = fileio.as_str(path)
  if not fileio.is_remote(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="rembert_tf-") as tmp:
    local = os.path.join(tmp, fileio.basename(path))
    fileio.copy(path, local)
    yield local


@contextlib.contextmanager
def local_scratch_dir(prefix: str) -> Iterator[str]:
  """A local temporary directory `PREFIX<owner tag>-XXXX` (under TMPDIR);
  those of ended runs go first."""
  root = tempfile.gettempdir()
  for name in os.listdir(root):
    owner = (fileio.parse_owner(name[len(prefix):].rsplit("-", 1)[0])
             if name.startswith(prefix) else None)  # TMPDIR has others' too
    if owner and owner[1] == fileio.HOST and not output_lock.pid_running(owner[0]):
      fileio.rmtree(os.path.join(root, name))
  path = tempfile.mkdtemp(prefix=f"{prefix}{fileio.owner_tag()}-", dir=root)
  try:
    yield path
  finally:
    fileio.rmtree(path)

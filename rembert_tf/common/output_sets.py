"""Members of a directory replaced as one set: the old set or the new, never a mix.

Builds on `rembert_tf.common.outputs` (its lock, staging directory and swap),
for outputs that share a directory with files they do not own.
"""
import contextlib
from typing import Iterator, Sequence

from rembert_tf.common import fileio
from rembert_tf.common import outputs


@contextlib.contextmanager
def atomic_file_set(directory: fileio.PathLike, names: Sequence[str],
                    overwrite: bool = False) -> Iterator[str]:
  """Yields a staging directory; the members `names` (paths relative to
  `directory`, files or folders) written there replace those of `directory`
  as one set when the block completes: a kill or a full disk leaves the old
  set or the new one, never a mix. An old member the new set lacks goes with
  the old set; other files of `directory` are kept. Holds its lock; raises
  errors.OutputExistsError naming an existing member unless `overwrite`."""
  directory = fileio.as_str(directory).rstrip("/")
  with outputs.taking_output(directory):
    outputs.refuse_existing([fileio.join(directory, n) for n in names],
                            overwrite)
    with outputs.staging(directory) as tmp:
      yield tmp
    outputs.swap_in(directory, tmp, names, names)


def refuse_existing_members(directory: fileio.PathLike, names: Sequence[str],
                            overwrite: bool) -> None:
  """`outputs.refuse_existing` for the members of a file set of `directory`, checked
  under its lock (a replacement a killed run left is finished first)."""
  directory = fileio.as_str(directory).rstrip("/")
  if overwrite or not fileio.isdir(directory):
    return
  with outputs.taking_output(directory):
    outputs.refuse_existing([fileio.join(directory, n) for n in names],
                            overwrite)

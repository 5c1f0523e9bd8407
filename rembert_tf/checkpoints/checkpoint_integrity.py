"""Whether a TensorFlow checkpoint is whole, found without reading its tensors.

A save or copy cut short leaves a tensor bundle (`P.index` and
`P.data-0000K-of-0000N`) that TensorFlow fails on half-way, or a `checkpoint`
state file naming a step whose files are gone. `problem(P)` opens the index
with TensorFlow's checkpoint reader and compares the bytes its tensors need
with the data files' sizes: it says what is missing or short, or None.
`newest_intact(DIR)` walks a directory's checkpoints down from the one its
`checkpoint` file names to the first intact one (`tf.train.get_checkpoint_state`).

Example:
```python
from rembert_tf.checkpoints import checkpoint_integrity
checkpoint_integrity.problem("run/ckpt-40")
# 'ckpt-40.data-00000-of-00001 has 46126 of its 92252 bytes'
prefix, skipped = checkpoint_integrity.newest_intact("run")
# 'run/ckpt-30', [('run/ckpt-40', 'ckpt-40.data-00000-of-00001 has ...')]
```
"""
import re
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio

_STEP = re.compile(r"^(.*)-(\d+)$")
_SHARDS = re.compile(r"\.data-\d{5}-of-(\d{5})$")
_LOOKS = 5  # looks at a state file that changes while its checkpoints are read


def data_bytes(reader) -> Tuple[int, bool]:
  """(bytes a checkpoint's data files hold, whether exact), from TensorFlow's
  reader of its index: each tensor's elements; a string tensor (small: the
  object graph) is read, and holds its strings, a varint length each and a
  crc32c; one that cannot be read (a file cut short) counts its least."""
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  total, exact = 0, True
  for key, shape in shapes.items():
    count = int(np.prod(shape, dtype=np.int64))
    if dtypes[key] != tf.string:
      total += count * dtypes[key].size
      continue
    try:
      strings = np.asarray(reader.get_tensor(key), dtype=object).reshape(-1)
      total += 4 + sum(len(s) + (max(len(s).bit_length(), 1) + 6) // 7
                       for s in strings)
    except (tf.errors.OpError, ValueError, IndexError):  # a short read
      total, exact = total + 4 + count, False
  return total, exact


def problem(prefix) -> Optional[str]:
  """What keeps checkpoint `prefix` from being read whole, or None.

  Reads the index with TensorFlow's checkpoint reader, the string tensors
  and the data files' sizes, not the other tensors.
  """
  prefix = fileio.as_str(prefix)
  name = fileio.basename(prefix)
  data = fileio.glob(prefix + ".data-*")
  if not fileio.exists(prefix + ".index"):
    return f"{name}.index is missing" if data else "none of its files exists"
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, ValueError) as e:
    return f"{name}.index is unreadable ({errors.one_line(e)[:200]})"
  names = {fileio.basename(path) for path in data}
  num_shards = max((int(m.group(1)) for m in map(_SHARDS.search, names) if m),
                   default=1)
  for shard in range(num_shards):
    shard_name = f"{name}.data-{shard:05d}-of-{num_shards:05d}"
    if shard_name not in names:
      return f"{shard_name} is missing"
  where = (fileio.basename(data[0]) if num_shards == 1
           else f"the {num_shards} data files of {name}")
  have = sum(fileio.size(path) for path in data)
  needed, exact = data_bytes(reader)
  if have < needed or not exact:
    return f"{where} has {have} of its {needed}{'' if exact else '+'} bytes"
  return None


def step_of(prefix: str) -> Optional[int]:
  """The number after the last `-` of a prefix (`ckpt-40` -> 40), or None."""
  match = _STEP.match(fileio.basename(prefix))
  return int(match.group(2)) if match else None


def _candidates(directory: str) -> List[str]:
  """The prefixes a directory's `checkpoint` file names, plus older ones of
  the same name on disk, newest first (the named one first on a tie)."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None or not state.model_checkpoint_path:
    return []
  named = state.model_checkpoint_path
  # A state file copied from elsewhere may name absolute paths of there.
  local = lambda p: fileio.join(directory, fileio.basename(p))
  prefixes = {local(p) for p in state.all_model_checkpoint_paths}
  prefixes.add(local(named))
  match, named_step = _STEP.match(fileio.basename(named)), step_of(named)
  if match:
    for index in fileio.glob(fileio.join(directory, f"{match.group(1)}-*.index")):
      prefix = index[:-len(".index")]
      step = step_of(prefix)
      if step is not None and step <= named_step:
        prefixes.add(prefix)
  named = local(named)
  return sorted(prefixes, key=lambda p: (step_of(p) or -1, p == named),
                reverse=True)


def newest_intact(directory) -> Tuple[Optional[str], List[Tuple[str, str]]]:
  """(newest intact checkpoint or None, [(newer prefix, its problem)]).

  Starts at the checkpoint the directory's `checkpoint` file names and goes
  down by step; (None, []) when there is no `checkpoint` file.
  """
  directory = fileio.as_str(directory).rstrip("/")
  # A trainer rotating its checkpoints (max_to_keep) may delete every one
  # the state file named while they are being looked at: when the state file
  # changed meanwhile, look again at the checkpoints it names now.
  for _ in range(_LOOKS):
    state = _state_text(directory)
    skipped = []
    for prefix in _candidates(directory):
      why = problem(prefix)
      if why is None:
        return prefix, skipped
      skipped.append((prefix, why))
    if _state_text(directory) == state:
      break
  return None, skipped


def _state_text(directory: str) -> Optional[str]:
  """The content of a directory's `checkpoint` state file (None: none)."""
  try:
    return fileio.read_text(fileio.join(directory, "checkpoint"))
  except (OSError, tf.errors.OpError):
    return None

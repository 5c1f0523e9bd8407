"""Whether a TensorFlow checkpoint is whole, found without reading its tensors.

A save or copy cut short leaves a tensor bundle (`P.index` and
`P.data-0000K-of-0000N`) that TensorFlow fails on half-way, or a `checkpoint`
state file naming a step whose files are gone. `problem(P)` reads the index
alone and the data shards' sizes: it says what is missing or short, or None.
`newest_intact(DIR)` walks a directory's checkpoints down from the one its
`checkpoint` file names to the first intact one. The index is LevelDB's
SSTable as TensorFlow writes it (`tensorflow/core/lib/io/table*`), each
value a `BundleEntryProto` (`tensor_bundle.proto`).

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
import struct
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from tensorflow.core.protobuf import tensor_bundle_pb2

from rembert_tf.common import fileio

_TABLE_MAGIC = 0xdb4775248b80fb57
_FOOTER_BYTES = 48
_BLOCK_TRAILER_BYTES = 5       # compression type (1 byte) + crc32c (4 bytes)
_UNCOMPRESSED = 0
_STEP = re.compile(r"^(.*)-(\d+)$")
_LOOKS = 5  # looks at a state file that changes while its checkpoints are read


class _UnreadableIndex(ValueError):
  pass


def _varint(data: bytes, position: int) -> Tuple[int, int]:
  value = shift = 0
  while True:
    if position >= len(data):
      raise _UnreadableIndex("cut short")
    byte = data[position]
    position += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, position


def _block_handle(data: bytes, position: int) -> Tuple[Tuple[int, int], int]:
  offset, position = _varint(data, position)
  size, position = _varint(data, position)
  return (offset, size), position


def _block_entries(data: bytes, handle: Tuple[int, int]):
  """(key, value) of one table block; None when the block is compressed."""
  offset, size = handle
  if offset + size + _BLOCK_TRAILER_BYTES > len(data) or size < 4:
    raise _UnreadableIndex("a block lies past the end of the file")
  if data[offset + size] != _UNCOMPRESSED:
    return None
  block = data[offset:offset + size]
  (restarts,) = struct.unpack("<I", block[-4:])
  end = len(block) - 4 - 4 * restarts
  entries, position, key = [], 0, b""
  while 0 <= position < end:
    shared, position = _varint(block, position)
    unshared, position = _varint(block, position)
    value_size, position = _varint(block, position)
    key = key[:shared] + block[position:position + unshared]
    position += unshared
    entries.append((key, block[position:position + value_size]))
    position += value_size
  return entries


def data_extents(index: bytes) -> Optional[Tuple[int, Dict[int, int]]]:
  """(number of data shards, {shard: bytes its tensors need}) of an index
  file's content; None when its blocks are compressed (not checked then).

  Raises:
    ValueError: when the content is not a checkpoint index.
  """
  if len(index) < _FOOTER_BYTES or struct.unpack(
      "<Q", index[-8:])[0] != _TABLE_MAGIC:
    raise _UnreadableIndex("not a checkpoint index, or cut short")
  footer = index[-_FOOTER_BYTES:]
  _, position = _block_handle(footer, 0)          # the meta-index block
  index_block, _ = _block_handle(footer, position)
  blocks = _block_entries(index, index_block)
  if blocks is None:
    return None
  num_shards, needed = 1, {}
  for _, handle_bytes in blocks:
    entries = _block_entries(index, _block_handle(handle_bytes, 0)[0])
    if entries is None:
      return None
    for key, value in entries:
      if not key:
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
        num_shards = header.num_shards
        continue
      entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
      end = entry.offset + entry.size
      needed[entry.shard_id] = max(needed.get(entry.shard_id, 0), end)
  return num_shards, needed


def _data_file(prefix: str, shard: int, num_shards: int) -> str:
  return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def problem(prefix) -> Optional[str]:
  """What keeps checkpoint `prefix` from being read whole, or None.

  Reads the index and the data shards' sizes, not the tensors.
  """
  prefix = fileio.as_str(prefix)
  name = fileio.basename(prefix)
  index = prefix + ".index"
  if not fileio.exists(index):
    if not fileio.glob(prefix + ".data-*"):
      return "none of its files exists"
    return f"{name}.index is missing"
  try:
    extents = data_extents(fileio.read_bytes(index))
  except (ValueError, struct.error) as e:
    return f"{name}.index is unreadable ({e})"
  if extents is None:  # Compressed index blocks: the shards must exist.
    return (None if fileio.glob(prefix + ".data-*")
            else f"the data files of {name} are missing")
  num_shards, needed = extents
  for shard in range(num_shards):
    data = _data_file(prefix, shard, num_shards)
    if not fileio.exists(data):
      return f"{fileio.basename(data)} is missing"
    have = fileio.size(data)
    if have < needed.get(shard, 0):
      return (f"{fileio.basename(data)} has {have} of its "
              f"{needed[shard]} bytes")
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

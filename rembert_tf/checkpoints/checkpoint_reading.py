"""Reading many tensors of a checkpoint in few RestoreV2 calls, in bounded memory.

`CheckpointReader.read` asks TensorFlow's `RestoreV2` op for consecutive runs of
tensors whose sizes add up to at most `BATCH_BYTES` (a larger tensor comes
alone): the checkpoint is opened once per run, not once per tensor (on gs://
a network round trip each), and no more than one run is in memory beside
what the caller keeps. Tensors come back in the order asked for, as stored.
Builds on TensorFlow's checkpoint reader (names, shapes, dtypes) and
`RestoreV2`, on every TensorFlow filesystem.

Example:
<!-- snippet: not run: a fragment: `checkpoint_reading` comes from the caller's code -->
```python
reader = checkpoint_reading.CheckpointReader("gs://bucket/rembert/model.ckpt")
for name, value in reader.read(["bert/pooler/dense/kernel",
                                "bert/pooler/dense/bias"]):
  print(name, value.shape)          # tf.Tensors, in the order asked for
```
"""
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

# The most bytes one RestoreV2 call reads (unless one tensor is larger): no
# more than the released model's largest tensors (the input embedding, 256
# MB), which are held whole anyway; 0 reads one tensor per call.
BATCH_BYTES = 256 << 20


def tensor_bytes(shape: Sequence[int], dtype: tf.DType) -> int:
  """Bytes of a stored tensor (strings count as 0: their size is unknown
  before reading, and checkpoints hold only small ones)."""
  if dtype == tf.string:
    return 0
  return int(np.prod(shape, dtype=np.int64)) * tf.as_dtype(dtype).size


def plan_batches(keys: Sequence[str], sizes: Dict[str, int],
                 max_bytes: int) -> List[List[str]]:
  """`keys` cut into consecutive runs of at most `max_bytes` (a key larger
  than that alone)."""
  batches, batch, used = [], [], 0
  for key in keys:
    size = sizes[key]
    if batch and used + size > max_bytes:
      batches.append(batch)
      batch, used = [], 0
    batch.append(key)
    used += size
  if batch:
    batches.append(batch)
  return batches


class CheckpointReader:
  """A checkpoint's index, and batched reads of its tensors.

  Opening reads the index only (names, shapes, dtypes), never tensor data.
  Raises what `tf.compat.v1.train.NewCheckpointReader` raises for a path that
  is not a checkpoint (tf.errors.OpError, ValueError).
  """

  def __init__(self, prefix: str):
    # NewCheckpointReader, not load_checkpoint: the latter takes a prefix for
    # a directory on filesystems (ram://) that call any prefix one.
    self._reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    self.prefix = prefix
    self.shapes: Dict[str, List[int]] = self._reader.get_variable_to_shape_map()
    self.dtypes: Dict[str, tf.DType] = self._reader.get_variable_to_dtype_map()

  def get_tensor(self, key: str):
    """One tensor, read alone (as a numpy value)."""
    return self._reader.get_tensor(key)

  def read(self, keys: Iterable[str], max_batch_bytes: Optional[int] = None
           ) -> Iterator[Tuple[str, tf.Tensor]]:
    """(key, tensor) for each key, in order, in RestoreV2 calls of at most
    `max_batch_bytes` (default `BATCH_BYTES`). A batch is dropped once its
    last tensor is handed out: the caller's copies are all that outlive it."""
    keys = list(keys)
    sizes = {key: tensor_bytes(self.shapes[key], self.dtypes[key])
             for key in keys}
    budget = BATCH_BYTES if max_batch_bytes is None else max_batch_bytes
    for batch in plan_batches(keys, sizes, budget):
      values = list(tf.raw_ops.RestoreV2(
          prefix=self.prefix, tensor_names=batch,
          shape_and_slices=[""] * len(batch),
          dtypes=[self.dtypes[key] for key in batch]))
      values.reverse()  # popped from the end, first key first
      for key in batch:
        yield key, values.pop()

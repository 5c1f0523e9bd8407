"""Reading a checkpoint in few RestoreV2 calls, in bounded memory, and a model's node of it.

`CheckpointReader.read` asks TensorFlow's `RestoreV2` op for consecutive runs
of tensors of at most `BATCH_BYTES` in all (a larger tensor alone): one
opening per run, not per tensor (on gs:// a round trip each), and one run in
memory beside what the caller keeps. `read_node` finds a model's node in an
object-based checkpoint's `TrackableObjectGraph` by its children, wherever
the writer put it, and reads only that subtree, batch by batch
(`tf.train.Checkpoint.read` would hold a second copy of the weights). Builds
on TensorFlow's checkpoint reader and `RestoreV2`, on every filesystem.

Example:
<!-- snippet: not run: a fragment: `checkpoint_reading` comes from the caller's code -->
```python
reader = checkpoint_reading.CheckpointReader("gs://bucket/rembert/model.ckpt")
for name, value in reader.read(["bert/pooler/dense/kernel",
                                "bert/pooler/dense/bias"]):
  print(name, value.shape)          # tf.Tensors, in the order asked for
```
"""
import collections
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from rembert_tf.checkpoints import checkpoint_layout

# The most bytes one RestoreV2 call reads (unless one tensor is larger): no
# more than the released model's largest tensors (the input embedding, 256
# MB), which are held whole anyway; 0 reads one tensor per call.
BATCH_BYTES = 256 << 20


def tensor_bytes(shape: Sequence[int], dtype: tf.DType) -> int:
  """Bytes of a stored tensor (strings, small and of unknown size, count 0)."""
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
  """A checkpoint's index (names, shapes, dtypes; opening reads no tensor),
  and batched reads of its tensors."""

  def __init__(self, prefix: str):
    # NewCheckpointReader, not load_checkpoint: the latter takes a prefix for
    # a directory on filesystems (ram://) that call any prefix one.
    self._reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    self.prefix = prefix
    self.shapes: Dict[str, List[int]] = self._reader.get_variable_to_shape_map()
    self.dtypes: Dict[str, tf.DType] = self._reader.get_variable_to_dtype_map()

  def get_tensor(self, key: str):  # a numpy value
    return self._reader.get_tensor(key)

  def read(self, keys: Iterable[str], max_batch_bytes: Optional[int] = None
           ) -> Iterator[Tuple[str, tf.Tensor]]:
    """(key, tensor) for each key, in order, in RestoreV2 calls of at most
    `max_batch_bytes` (default `BATCH_BYTES`); a batch is dropped once handed out."""
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


def object_graph(prefix: str):
  """(CheckpointReader, TrackableObjectGraph) of an object-based checkpoint."""
  try:
    reader = CheckpointReader(prefix)
    graph_bytes = reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH")
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise checkpoint_layout.CheckpointError(
        f"{prefix}: not a readable TF2 object-based checkpoint "
        f"({' '.join(str(e).split())[:200]}).") from None
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(graph_bytes)
  return reader, graph


def find_node(graph, children_wanted: frozenset
              ) -> Optional[Tuple[int, Tuple[str, ...]]]:
  """(node id, child names from the root) of the shallowest node with
  `children_wanted` among its children (breadth first)."""
  queue, seen = collections.deque([(0, ())]), {0}
  while queue:
    node_id, path = queue.popleft()
    children = graph.nodes[node_id].children
    if children_wanted <= {c.local_name for c in children}:
      return node_id, path
    for child in children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append((child.node_id, path + (child.local_name,)))
  return None


def _checkpoint_keys(graph, node_id: int, model) -> dict:
  """id(variable) -> (variable, checkpoint key), walking graph and model together."""
  keys, stack, seen = {}, [(node_id, model)], set()
  while stack:
    node_id, obj = stack.pop()
    if node_id in seen:
      continue
    seen.add(node_id)
    node = graph.nodes[node_id]
    if isinstance(obj, tf.Variable):
      keys.update({id(obj): (obj, a.checkpoint_key) for a in node.attributes
                   if a.name == "VARIABLE_VALUE"})
      continue
    children = obj._trackable_children()  # pylint: disable=protected-access
    stack.extend((child.node_id, children[child.local_name])
                 for child in node.children if child.local_name in children)
  return keys


def read_node(model, prefix: str, children_wanted: frozenset,
              what: str) -> None:
  """Reads the `what` node of checkpoint `prefix` (the shallowest with
  `children_wanted`) into `model`, in batches assigned in place; nothing
  outside it (optimizer slots, other models) is read."""
  reader, graph = object_graph(prefix)
  found = find_node(graph, children_wanted)
  if found is None:
    raise checkpoint_layout.CheckpointError(
        f"{prefix}: no {what} in the checkpoint's object graph.")
  checkpoint_layout.announce_fallback(prefix)
  node_id, path = found
  keys = _checkpoint_keys(graph, node_id, model)
  shapes = reader.shapes
  missing = [v.name for v in model.variables if id(v) not in keys]
  missing += [v.name for v, k in keys.values() if k not in shapes]
  problems = ([f"{len(missing)} variable(s) missing: {', '.join(missing[:8])}"]
              if missing else [])
  problems += [f"wrong shape: {v.name}: checkpoint {shapes[k]}, model "
               f"{v.shape.as_list()}" for v, k in keys.values()
               if k in shapes and list(shapes[k]) != v.shape.as_list()][:8]
  where = "/".join(path) or "<root>"
  if problems:
    raise checkpoint_layout.CheckpointError(
        f"{prefix}: the {what} at {where} does not match the model config ("
        + "; ".join(problems) + "). Use the model config the checkpoint was "
        "written with.")
  variable_of = {key: variable for variable, key in keys.values()}
  for key, value in reader.read(sorted(variable_of)):
    variable_of[key].assign(tf.cast(value, variable_of[key].dtype))
    del value  # nothing holds it while the next batch is read
  logging.info("Read the %s from %s (at %s)", what, prefix, where)

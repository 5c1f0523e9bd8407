"""Runs a per-replica function over numpy arrays in fixed-size batches under a tf.distribute strategy.

Rows are cut into global batches of one size (the last padded to the replica
count times a power of two, so a TPU compiles few shapes), run with
`strategy.run` in one `tf.function`, and returned in row order.

Example:
```python
import numpy as np, tensorflow as tf
from rembert_tf.retrieval import replica_batches
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
out = replica_batches.map_batches(
    strategy, lambda x: {"twice": 2 * x["v"]}, {"v": np.arange(10.0)},
    global_batch_size=4)
out["twice"]        # array([0., 2., ..., 18.])
```
"""
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf

Arrays = Dict[str, np.ndarray]


def replica_batch_size(global_batch_size: int, strategy) -> int:
  """Rows per replica; the global batch must split evenly."""
  replicas = strategy.num_replicas_in_sync
  if global_batch_size < replicas or global_batch_size % replicas:
    raise ValueError(f"batch size {global_batch_size} must be a positive "
                     f"multiple of the {replicas} replicas.")
  return global_batch_size // replicas


class BatchMapper:
  """`mapper(arrays)` -> outputs, with one traced step reused for every call;
  `per_replica_fn` keeps the leading dimension."""

  def __init__(self, strategy, per_replica_fn: Callable,
               global_batch_size: int, jit_compile: bool = False):
    replica_batch_size(global_batch_size, strategy)   # checks the size
    self._strategy = strategy
    self.global_batch_size = global_batch_size
    replica_fn = (tf.function(per_replica_fn, jit_compile=True)
                  if jit_compile else per_replica_fn)

    @tf.function
    def step(inputs):
      return strategy.run(replica_fn, args=(inputs,))
    self._step = step

  def _distribute(self, batch: Arrays, size: int):
    per_replica = size // self._strategy.num_replicas_in_sync

    def value_fn(context):
      start = context.replica_id_in_sync_group * per_replica
      return {k: tf.constant(v[start:start + per_replica])
              for k, v in batch.items()}
    return self._strategy.experimental_distribute_values_from_function(value_fn)

  def _to_host(self, outputs) -> Arrays:
    return {k: np.concatenate([np.asarray(local) for local in
                               self._strategy.experimental_local_results(v)])
            for k, v in outputs.items()}

  def batch_sizes(self, rows: int):
    """The global batch sizes that cover `rows` rows: full ones, then the tail."""
    size, replicas = self.global_batch_size, self._strategy.num_replicas_in_sync
    sizes = [size] * (rows // size)
    rest = rows - sum(sizes)
    if rest:
      tail = replicas
      while tail < rest:
        tail *= 2
      sizes.append(min(tail, size))
    return sizes

  def __call__(self, arrays: Arrays,
               on_batch: Optional[Callable[[int], None]] = None) -> Arrays:
    """Outputs for every row of `arrays` (all with the same first dimension)."""
    rows = len(next(iter(arrays.values())))
    collected, pending, start = [], None, 0
    for size in self.batch_sizes(rows):
      batch = {k: v[start:start + size] for k, v in arrays.items()}
      missing = size - len(next(iter(batch.values())))
      if missing:   # the tail: zero rows up to its static size
        batch = {k: np.concatenate([v, np.zeros((missing,) + v.shape[1:],
                                                v.dtype)])
                 for k, v in batch.items()}
      outputs = self._step(self._distribute(batch, size))
      if pending is not None:   # converted while the device runs `outputs`
        collected.append(self._to_host(pending))
      pending = outputs
      if on_batch:
        on_batch(size - missing)
      start += size
    if pending is not None:
      collected.append(self._to_host(pending))
    if not collected:
      return {}
    return {k: np.concatenate([c[k] for c in collected])[:rows]
            for k in collected[0]}


def map_batches(strategy, per_replica_fn: Callable, arrays: Arrays,
                global_batch_size: int, jit_compile: bool = False) -> Arrays:
  """One-off `BatchMapper(...)(arrays)`."""
  return BatchMapper(strategy, per_replica_fn, global_batch_size,
                     jit_compile)(arrays)

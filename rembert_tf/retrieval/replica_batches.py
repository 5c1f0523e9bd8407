"""Runs a per-replica function over numpy arrays in fixed-size batches under a tf.distribute strategy.

Full global batches, then the rest padded with zero rows to the replica count
times a power of two (a TPU compiles few shapes); each batch is split over
the replicas (`experimental_distribute_values_from_function`) and the outputs
come back in row order.

Example:
```python
import numpy as np, tensorflow as tf
from rembert_tf.retrieval import replica_batches
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
step = replica_batches.distributed_step(strategy, lambda x: {"twice": 2 * x["v"]})
out = replica_batches.map_batches(strategy, step, {"v": np.arange(10.0)},
                                  global_batch_size=4)
out["twice"]        # array([0., 2., ..., 18.])
```
"""
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf

Arrays = Dict[str, np.ndarray]


def distributed_step(strategy, per_replica_fn: Callable,
                     jit_compile: bool = False):
  """A `tf.function` running `per_replica_fn` (dict -> dict of tensors that
  keep the leading dimension) on every replica.

  Off a TPU it is traced for any shape after the second (a TPU compiles
  each shape anyway): every length bucket and batch shares one trace.
  """
  if jit_compile:
    per_replica_fn = tf.function(per_replica_fn, jit_compile=True)
  return tf.function(
      lambda inputs: strategy.run(per_replica_fn, args=(inputs,)),
      reduce_retracing=not isinstance(strategy, tf.distribute.TPUStrategy))


def _host(strategy, outputs) -> Arrays:
  return {k: np.concatenate([np.asarray(local) for local in
                             strategy.experimental_local_results(v)])
          for k, v in outputs.items()}


def batch_sizes(rows: int, global_batch_size: int, replicas: int):
  """The global batch sizes (multiples of `replicas`) that cover `rows` rows:
  full ones, then the rest."""
  sizes = [global_batch_size] * (rows // global_batch_size)
  if rows % global_batch_size:
    tail = replicas
    while tail < rows % global_batch_size:
      tail *= 2
    sizes.append(min(tail, global_batch_size))
  return sizes


def map_batches(strategy, step, arrays: Arrays, global_batch_size: int,
                on_batch: Optional[Callable[[int], None]] = None) -> Arrays:
  """`step`'s outputs for every row of `arrays` (one first dimension, at least
  one row); `global_batch_size` a multiple of the replicas."""
  replicas = strategy.num_replicas_in_sync
  rows = len(next(iter(arrays.values())))
  sizes = batch_sizes(rows, global_batch_size, replicas)
  arrays = {k: np.concatenate([v, np.zeros((sum(sizes) - rows,) + v.shape[1:],
                                           v.dtype)])
            for k, v in arrays.items()}
  collected, pending, start = [], None, 0
  for size in sizes:
    def value_fn(context, start=start, per_replica=size // replicas):
      first = start + context.replica_id_in_sync_group * per_replica
      return {k: tf.constant(v[first:first + per_replica])
              for k, v in arrays.items()}
    outputs = step(strategy.experimental_distribute_values_from_function(
        value_fn))
    if pending is not None:  # converted while the devices run `outputs`
      collected.append(_host(strategy, pending))
    pending = outputs
    if on_batch:
      on_batch(min(size, rows - start))
    start += size
  collected.append(_host(strategy, pending))
  return {k: np.concatenate([c[k] for c in collected])[:rows]
          for k in collected[0]}

"""Exact k-nearest neighbours by cosine similarity, on the strategy's devices.

XTREME's exhaustive search (faiss's IndexFlatIP on normalised vectors) in
TensorFlow, so it runs where the encoder runs: the database is a variable on
each replica, queries go in fixed-size batches, each a matmul and
`tf.math.top_k` (ties to the lower index).

Example:
```python
import numpy as np, tensorflow as tf
from rembert_tf.retrieval import nearest_neighbors
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
x = np.eye(3, dtype=np.float32)
similarities, rows = nearest_neighbors.top_k(x[[2, 0]], x, 1, strategy)   # rows [[2], [0]]
```
"""
from typing import Tuple

import numpy as np
import tensorflow as tf

from rembert_tf.retrieval import replica_batches

# The [queries, database] similarities of one replica's batch stay under this.
BLOCK_BYTES = 1 << 28


def top_k(queries: np.ndarray, database: np.ndarray, k: int, strategy
          ) -> Tuple[np.ndarray, np.ndarray]:
  """([queries, k] similarities, [queries, k] database rows), best first; k is
  capped at the database size."""
  k = min(k, len(database))
  with strategy.scope():
    rows = tf.Variable(np.asarray(database, np.float32), trainable=False,
                       name="neighbor_database")

  def search(inputs):
    top = tf.math.top_k(tf.matmul(inputs["queries"], rows, transpose_b=True),
                        k=k)
    return {"similarities": top.values, "indices": top.indices}
  # 8..1024 queries per replica, a multiple of 8.
  per_replica = min(1024, max(8, BLOCK_BYTES // (4 * len(database)) // 8 * 8))
  out = replica_batches.map_batches(
      strategy, replica_batches.distributed_step(strategy, search),
      {"queries": np.asarray(queries, np.float32)},
      per_replica * strategy.num_replicas_in_sync)
  return out["similarities"], out["indices"].astype(np.int64)

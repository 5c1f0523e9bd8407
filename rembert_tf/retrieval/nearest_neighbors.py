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
search = nearest_neighbors.NeighborSearch(x, strategy)
similarities, indices = search.top_k(x[[2, 0]], k=1)   # indices [[2], [0]]
```
"""
from typing import Tuple

import numpy as np
import tensorflow as tf

from rembert_tf.retrieval import replica_batches

# Rows of queries per replica: at most this, at least this, multiple of this.
_MAX_QUERIES, _MIN_QUERIES, _QUERY_MULTIPLE = 1024, 8, 8


class NeighborSearch:
  """Top-k cosine neighbours of query rows among the database rows."""

  def __init__(self, database: np.ndarray, strategy,
               max_block_bytes: int = 1 << 28):
    database = np.asarray(database, np.float32)
    if database.ndim != 2 or not len(database):
      raise ValueError(f"the database must be a non-empty [rows, dim] array; "
                       f"got shape {database.shape}.")
    self.size = len(database)
    self._strategy = strategy
    with strategy.scope():
      self._database = tf.Variable(database, trainable=False,
                                   name="neighbor_database")
    per_replica = max_block_bytes // (4 * self.size)
    per_replica = min(_MAX_QUERIES, max(_MIN_QUERIES, per_replica))
    per_replica -= per_replica % _QUERY_MULTIPLE
    self.queries_per_batch = per_replica * strategy.num_replicas_in_sync
    self._mappers = {}

  def _mapper(self, k: int) -> replica_batches.BatchMapper:
    if k not in self._mappers:
      database = self._database

      def search(inputs):
        similarities = tf.matmul(inputs["queries"], database, transpose_b=True)
        top = tf.math.top_k(similarities, k=k)
        return {"similarities": top.values, "indices": top.indices}
      self._mappers[k] = replica_batches.BatchMapper(
          self._strategy, search, self.queries_per_batch)
    return self._mappers[k]

  def top_k(self, queries: np.ndarray, k: int
            ) -> Tuple[np.ndarray, np.ndarray]:
    """([queries, k] similarities, [queries, k] database rows), best first; k is
    capped at the database size."""
    k = min(k, self.size)
    out = self._mapper(k)({"queries": np.asarray(queries, np.float32)})
    return out["similarities"], out["indices"].astype(np.int64)

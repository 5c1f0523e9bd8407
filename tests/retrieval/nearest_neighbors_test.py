"""Exact cosine neighbours on the devices, against numpy, on one and two replicas."""
import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.retrieval import nearest_neighbors
from rembert_tf.retrieval import replica_batches


def _unit(rng, n, d=8):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("replicas", [1, 2])
def test_top_k_equals_numpy_in_several_batches(replicas, two_cpu_strategy):
  strategy = (two_cpu_strategy if replicas == 2
              else tf.distribute.OneDeviceStrategy("/cpu:0"))
  rng = np.random.default_rng(replicas)
  database, queries = _unit(rng, 50), _unit(rng, 37)
  # 8 queries per replica and batch: 37 queries take several padded batches.
  search = nearest_neighbors.NeighborSearch(database, strategy,
                                            max_block_bytes=1)
  assert search.queries_per_batch == 8 * replicas
  similarities, rows = search.top_k(queries, k=4)
  expected = np.argsort(-(queries @ database.T), axis=1, kind="stable")[:, :4]
  assert rows.shape == (37, 4) and rows.dtype == np.int64
  np.testing.assert_array_equal(rows, expected)
  np.testing.assert_allclose(
      similarities, np.take_along_axis(queries @ database.T, expected, 1),
      atol=1e-6)


def test_k_is_capped_at_the_database_size():
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  rng = np.random.default_rng(0)
  search = nearest_neighbors.NeighborSearch(_unit(rng, 3), strategy)
  similarities, rows = search.top_k(_unit(rng, 5), k=4)
  assert similarities.shape == rows.shape == (5, 3)
  with pytest.raises(ValueError, match="non-empty"):
    nearest_neighbors.NeighborSearch(np.zeros((0, 4)), strategy)


def test_batches_split_evenly_over_replicas(two_cpu_strategy):
  out = replica_batches.map_batches(
      two_cpu_strategy, lambda x: {"twice": 2 * x["v"]},
      {"v": np.arange(11, dtype=np.float32)}, global_batch_size=4)
  np.testing.assert_array_equal(out["twice"], 2 * np.arange(11))
  mapper = replica_batches.BatchMapper(two_cpu_strategy, lambda x: x, 8)
  # Full batches, then the rest padded to the replicas x a power of two.
  assert mapper.batch_sizes(19) == [8, 8, 4]
  assert mapper.batch_sizes(1) == [2]
  assert mapper.batch_sizes(13) == [8, 8]
  assert mapper.batch_sizes(0) == []
  with pytest.raises(ValueError, match="multiple of the 2 replicas"):
    replica_batches.BatchMapper(two_cpu_strategy, lambda x: x, 3)

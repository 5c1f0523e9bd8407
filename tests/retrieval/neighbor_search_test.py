"""Exact cosine neighbours on the devices, against numpy, on one and two replicas."""
import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.retrieval import mining
from rembert_tf.retrieval import replica_batches


def _unit(rng, n, d=8):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("replicas", [1, 2])
def test_top_k_equals_numpy_in_several_batches(replicas, two_cpu_strategy,
                                               monkeypatch):
  strategy = (two_cpu_strategy if replicas == 2
              else tf.distribute.OneDeviceStrategy("/cpu:0"))
  rng = np.random.default_rng(replicas)
  database, queries = _unit(rng, 50), _unit(rng, 37)
  # 8 queries per replica and batch: 37 queries take several padded batches.
  monkeypatch.setattr(mining, "BLOCK_BYTES", 1)
  sizes, map_batches = [], replica_batches.map_batches
  monkeypatch.setattr(replica_batches, "map_batches", lambda *args: (
      sizes.append(args[3]), map_batches(*args))[1])
  similarities, rows = mining.top_k(queries, database, 4, strategy)
  assert sizes == [8 * replicas]
  expected = np.argsort(-(queries @ database.T), axis=1, kind="stable")[:, :4]
  assert rows.shape == (37, 4) and rows.dtype == np.int64
  np.testing.assert_array_equal(rows, expected)
  np.testing.assert_allclose(
      similarities, np.take_along_axis(queries @ database.T, expected, 1),
      atol=1e-6)


def test_k_is_capped_at_the_database_size():
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  rng = np.random.default_rng(0)
  similarities, rows = mining.top_k(_unit(rng, 5), _unit(rng, 3), 4,
                                               strategy)
  assert similarities.shape == rows.shape == (5, 3)


def test_batches_split_evenly_over_replicas(two_cpu_strategy):
  step = replica_batches.distributed_step(two_cpu_strategy,
                                          lambda x: {"twice": 2 * x["v"]})
  out = replica_batches.map_batches(
      two_cpu_strategy, step, {"v": np.arange(11, dtype=np.float32)},
      global_batch_size=4)
  np.testing.assert_array_equal(out["twice"], 2 * np.arange(11))
  # Full batches, then the rest padded to the replicas x a power of two.
  assert replica_batches.batch_sizes(19, 8, 2) == [8, 8, 4]
  assert replica_batches.batch_sizes(1, 8, 2) == [2]
  assert replica_batches.batch_sizes(13, 8, 2) == [8, 8]
  assert replica_batches.batch_sizes(0, 8, 2) == []

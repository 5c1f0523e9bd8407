"""Batched checkpoint reads give what one read per tensor gives, in bounded batches.

Checkpoints are written by the tests with SaveV2 (name-based, as the released
TF1 checkpoint) and by `tf.train.Checkpoint` (object-based, as rembert_tf
writes them), locally and on ram:// (which behaves like gs://).
"""
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_encoder

import testlib

# Every dtype a checkpoint of this project holds, scalars included.
TENSORS = {
    "bert/embeddings/word_embeddings": np.arange(24, dtype=np.float32).reshape(6, 4) / 7,
    "bert/encoder/layer_0/output/dense/kernel": (
        np.linspace(-3, 3, 40).reshape(8, 5).astype(ml_dtypes.bfloat16)),
    "bert/pooler/dense/bias": np.full([5], 0.25, np.float32),
    "global_step": np.array(123456789012, np.int64),
    "learning_rate": np.array(1e-4, np.float32),
    "counts": np.array([[1, -2], [3, 4]], np.int32),
    "note": np.array(b"batched", object),
}


def write_checkpoint(prefix):
  names = sorted(TENSORS)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(TENSORS[n]) for n in names])
  return prefix


@pytest.fixture(params=["local", "ram"])
def prefix(request, tmp_path):
  if request.param == "ram":
    return write_checkpoint(f"ram://checkpoint_reading_test/{tmp_path.name}/ckpt")
  return write_checkpoint(str(tmp_path / "ckpt"))


@pytest.fixture
def restore_calls(monkeypatch):
  """The tensor names of every RestoreV2 call made during the test."""
  calls, restore = [], tf.raw_ops.RestoreV2

  def spy(**kwargs):
    calls.append(list(kwargs["tensor_names"]))
    return restore(**kwargs)

  monkeypatch.setattr(tf.raw_ops, "RestoreV2", spy)
  return calls


def one_read_per_tensor(prefix, name, dtype):
  (value,) = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[name],
                                  shape_and_slices=[""], dtypes=[dtype])
  return value


def assert_same_tensor(actual, expected, name):
  assert actual.dtype == expected.dtype, name
  assert actual.shape == expected.shape, name
  np.testing.assert_array_equal(actual.numpy(), expected.numpy(), err_msg=name)


@pytest.mark.parametrize("budget", [0, 100, None])
def test_batched_reads_equal_one_read_per_tensor(prefix, budget):
  reader = checkpoint_reading.CheckpointReader(prefix)
  order = ["global_step", "bert/encoder/layer_0/output/dense/kernel", "note",
           "bert/embeddings/word_embeddings", "learning_rate", "counts",
           "bert/pooler/dense/bias"]
  read = list(reader.read(order, max_batch_bytes=budget))
  assert [name for name, _ in read] == order          # the order asked for
  for name, value in read:
    assert_same_tensor(value, one_read_per_tensor(prefix, name,
                                                  reader.dtypes[name]), name)
  by_name = dict(read)
  assert by_name["bert/encoder/layer_0/output/dense/kernel"].dtype == tf.bfloat16
  assert int(by_name["global_step"]) == 123456789012
  assert by_name["note"].numpy() == b"batched"
  np.testing.assert_array_equal(by_name["bert/embeddings/word_embeddings"],
                                TENSORS["bert/embeddings/word_embeddings"])


def test_byte_budget_bounds_every_call(prefix, restore_calls):
  reader = checkpoint_reading.CheckpointReader(prefix)
  names = sorted(TENSORS)
  sizes = {n: checkpoint_reading.tensor_bytes(reader.shapes[n], reader.dtypes[n])
           for n in names}
  assert sizes["bert/embeddings/word_embeddings"] == 96
  assert sizes["bert/encoder/layer_0/output/dense/kernel"] == 80   # bfloat16
  assert sizes["global_step"] == 8 and sizes["note"] == 0
  calls_per_budget = {}
  for budget in (None, 200, 100, 30, 0):
    restore_calls.clear()
    assert len(list(reader.read(names, max_batch_bytes=budget))) == len(names)
    calls_per_budget[budget] = len(restore_calls)
    assert [n for call in restore_calls for n in call] == names
    for call in restore_calls:
      assert len(call) == 1 or sum(sizes[n] for n in call) <= (
          checkpoint_reading.BATCH_BYTES if budget is None else budget)
  # One call for the whole (tiny) checkpoint by default, one per tensor at 0,
  # more calls the smaller the budget.
  assert calls_per_budget[None] == 1 and calls_per_budget[0] == len(names)
  assert calls_per_budget[200] < calls_per_budget[100] < calls_per_budget[30]
  assert calls_per_budget[30] < calls_per_budget[0]


def test_plan_batches_keeps_order_and_puts_large_tensors_alone():
  sizes = dict(a=30, b=30, c=100, d=10, e=50, f=0)
  plan = checkpoint_reading.plan_batches(list("abcdef"), sizes, 60)
  assert plan == [["a", "b"], ["c"], ["d", "e", "f"]]
  assert checkpoint_reading.plan_batches([], sizes, 60) == []
  assert checkpoint_reading.plan_batches(list("abc"), sizes, 0) == [["a"], ["b"], ["c"]]


@pytest.mark.parametrize("where", ["local", "ram"])
def test_restore_encoder_in_batches_equals_one_read_per_variable(
    where, tmp_path, monkeypatch, restore_calls):
  cfg = testlib.tiny_config()
  written = rembert_encoder.build_encoder(cfg)
  rng = np.random.default_rng(0)
  for v in written.variables:
    v.assign(rng.normal(size=v.shape).astype(np.float32))
  folder = (str(tmp_path / "ckpt") if where == "local"
            else f"ram://checkpoint_reading_test/encoder_{tmp_path.name}")
  checkpoint_writing.write_checkpoint_dir(folder, cfg, written)
  restored = {}
  for budget in (0, 4096, checkpoint_reading.BATCH_BYTES):
    monkeypatch.setattr(checkpoint_reading, "BATCH_BYTES", budget)
    restore_calls.clear()
    _, encoder = checkpoint_restore.load_encoder(folder)
    restored[budget] = (len(restore_calls),
                        [v.numpy() for v in encoder.variables])
  count = len(written.variables)
  assert restored[0][0] == count            # one RestoreV2 per variable
  assert 1 < restored[4096][0] < count       # a few variables per call
  assert restored[checkpoint_reading.BATCH_BYTES][0] == 1   # all in one
  for calls, values in restored.values():
    for expected, actual in zip(written.variables, values):
      np.testing.assert_array_equal(actual, expected.numpy(),
                                    err_msg=expected.name)

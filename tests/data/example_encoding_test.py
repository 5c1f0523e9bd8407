"""The TF-free Example / TFRecord writers produce what TensorFlow parses."""
import numpy as np
import tensorflow as tf

from rembert_tf.data import example_encoding
from rembert_tf.data import tfrecord_writer


def test_encode_example_matches_protobuf_parse():
  rng = np.random.default_rng(0)
  ints = {"small": rng.integers(0, 128, 17),
          "large": rng.integers(0, 250300, 33),
          "huge": np.array([0, 1, 2**20, 2**40, 2**62]),
          "negative": np.array([-1, -300, 5]),
          "empty": np.array([], dtype=np.int64)}
  floats = {"weights": rng.random(7).astype(np.float32)}
  record = example_encoding.encode_example(ints, floats)
  example = tf.train.Example.FromString(record)
  for name, values in ints.items():
    assert list(example.features.feature[name].int64_list.value) == list(values)
  np.testing.assert_array_equal(
      np.array(example.features.feature["weights"].float_list.value,
               np.float32), floats["weights"])


def test_tfrecord_file_is_byte_identical_to_tensorflow(tmp_path):
  rng = np.random.default_rng(1)
  records = [rng.integers(0, 256, size=n).astype(np.uint8).tobytes()
             for n in rng.integers(0, 2000, size=300)] + [b""]
  assert tfrecord_writer.crc32c(b"123456789") == 0xE3069283
  ours = tmp_path / "ours.tfrecord"
  theirs = tmp_path / "theirs.tfrecord"
  assert tfrecord_writer.write_tfrecord_file(ours, records) == len(records)
  with tf.io.TFRecordWriter(str(theirs)) as writer:
    for r in records:
      writer.write(r)
  assert ours.read_bytes() == theirs.read_bytes()
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(ours))] == records
  assert not list(tmp_path.glob("*.incomplete"))


def test_batch_encoder_equals_single_encoder():
  rng = np.random.default_rng(2)
  ints = {"a": rng.integers(0, 250300, (9, 13)), "b": rng.integers(0, 2, (9, 5)),
          "c": np.concatenate([rng.integers(0, 2**34, (9, 2)),
                               np.full((9, 1), 127)], axis=1)}
  floats = {"w": rng.random((9, 4)).astype(np.float32)}
  batch = example_encoding.FixedShapeEncoder(["a", "b", "c"], ["w"]).encode(
      ints, floats)
  for i, record in enumerate(batch):
    single = example_encoding.encode_example(
        {k: v[i] for k, v in ints.items()}, {"w": floats["w"][i]})
    assert record == single

r"""Writing pre-training records: the project's TensorFlow-free writer against TensorFlow's own.

`rembert-create-pretraining-data` and the fine-tuning record writer encode
their `tf.train.Example`s with `rembert_tf.data.example_encoding` (the wire
bytes written with numpy, many records at once) and frame them with
`rembert_tf.data.tfrecord_writer` (numpy CRC32C), in worker processes that do
not import TensorFlow. The peer is what a user would write with the library:
one `tf.train.Example` per record, `SerializeToString()`, and
`tf.io.TFRecordWriter`.

Two figures, each for both:

| figure | what is timed |
| --- | --- |
| records/s | encoding and writing `--records` records of the static pre-training layout (`input_word_ids`, `input_mask`, `input_type_ids` of `--seq_length`, `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` of `--max_predictions`), to a local file; median over `--rounds` interleaved rounds, the starting contender alternating |
| worker start | a fresh Python process importing what its writer needs (`rembert_tf.data.pretraining_record_format` against `tensorflow`), median of `--import_reps` |

Before timing, both files are read back with `tf.data.TFRecordDataset` and
`tf.io.parse_example`: every feature of every record must be equal.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/record_writing.py --records 2000 --rounds 1 --import_reps 1
```
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # pylint: disable=g-import-not-at-top
import numpy as np

import bench_command  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_integer("records", 20000, "Records written per contender and round.")
flags.DEFINE_integer("seq_length", 128, "Pieces per record.")
flags.DEFINE_integer("max_predictions", 20, "Masked positions per record.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
flags.DEFINE_integer("import_reps", 3, "Fresh processes per import figure.")
flags.DEFINE_string("json_out", "", "Also write the figures as JSON here.")

INT_FEATURES = ("input_word_ids", "input_mask", "input_type_ids",
                "masked_lm_positions", "masked_lm_ids")
FLOAT_FEATURES = ("masked_lm_weights",)
PROJECT = "rembert_tf (example_encoding + tfrecord_writer)"
PEER = "tf.train.Example + tf.io.TFRecordWriter"


def features(n: int, seq_length: int, predictions: int, seed: int = 0):
  """Random records of the static layout: (int features, float features)."""
  rng = np.random.default_rng(seed)
  ints = {
      "input_word_ids": rng.integers(5, 250300, (n, seq_length)),
      "input_mask": np.ones((n, seq_length), np.int64),
      "input_type_ids": (np.arange(seq_length)[None, :] >= seq_length // 2
                         ).astype(np.int64).repeat(n, 0),
      "masked_lm_positions": np.sort(rng.integers(1, seq_length - 1,
                                                  (n, predictions)), axis=1),
      "masked_lm_ids": rng.integers(5, 250300, (n, predictions)),
  }
  floats = {"masked_lm_weights": np.ones((n, predictions), np.float32)}
  return ints, floats


def write_project(path: str, ints, floats) -> None:
  from rembert_tf.data import example_encoding  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import tfrecord_writer  # pylint: disable=g-import-not-at-top
  encoder = example_encoding.FixedShapeEncoder(INT_FEATURES, FLOAT_FEATURES)
  tfrecord_writer.write_tfrecord_file(path, encoder.encode(ints, floats))


def write_peer(path: str, ints, floats) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  n = len(ints["input_word_ids"])
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(n):
      feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(
          value=ints[name][i])) for name in INT_FEATURES}
      feature.update({name: tf.train.Feature(float_list=tf.train.FloatList(
          value=floats[name][i])) for name in FLOAT_FEATURES})
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def read_back(path: str, seq_length: int, predictions: int):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = {name: tf.io.FixedLenFeature(
      [predictions if name.startswith("masked") else seq_length], tf.int64)
          for name in INT_FEATURES}
  spec["masked_lm_weights"] = tf.io.FixedLenFeature([predictions], tf.float32)
  batches = tf.data.TFRecordDataset(path).batch(1 << 16).map(
      lambda records: tf.io.parse_example(records, spec))
  parsed = next(iter(batches))
  return {name: value.numpy() for name, value in parsed.items()}


def check_equal(directory: str) -> None:
  """Both writers' files parse to the same features (a bench of two writers
  that write different records would measure nothing)."""
  ints, floats = features(500, FLAGS.seq_length, FLAGS.max_predictions, seed=1)
  paths = {}
  for name, write in ((PROJECT, write_project), (PEER, write_peer)):
    paths[name] = os.path.join(directory, f"check-{len(paths)}.tfrecord")
    write(paths[name], ints, floats)
  got = [read_back(p, FLAGS.seq_length, FLAGS.max_predictions)
         for p in paths.values()]
  for name in INT_FEATURES + FLOAT_FEATURES:
    want = ints.get(name, floats.get(name))
    for parsed in got:
      np.testing.assert_array_equal(parsed[name], want)


def time_writers(directory: str):
  """records/s of each writer, median over interleaved rounds."""
  ints, floats = features(FLAGS.records, FLAGS.seq_length,
                          FLAGS.max_predictions)
  order = [(PROJECT, write_project), (PEER, write_peer)]
  seconds = {PROJECT: [], PEER: []}
  for round_index in range(FLAGS.rounds):
    for name, write in order[round_index % 2:] + order[:round_index % 2]:
      path = os.path.join(directory, f"round-{round_index}.tfrecord")
      start = time.perf_counter()
      write(path, ints, floats)
      seconds[name].append(time.perf_counter() - start)
      print(f"round {round_index + 1}/{FLAGS.rounds}: {name}: "
            f"{FLAGS.records / seconds[name][-1]:,.0f} records/s", flush=True)
      os.remove(path)
  return {name: FLAGS.records / statistics.median(s)
          for name, s in seconds.items()}


def import_seconds(module: str) -> float:
  """Median wall time of a fresh process that imports `module`."""
  times = []
  for _ in range(FLAGS.import_reps):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True,
                   cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as directory:
    check_equal(directory)
    print("both writers' records parse to equal features", flush=True)
    rates = time_writers(directory)
  starts = {PROJECT: import_seconds("rembert_tf.data.pretraining_record_format"),
            PEER: import_seconds("tensorflow")}
  print(f"\n{FLAGS.records} records, sequence {FLAGS.seq_length}, "
        f"{FLAGS.max_predictions} predictions, median of {FLAGS.rounds} rounds")
  print("| writer | records/s | worker start |")
  print("| --- | ---: | ---: |")
  for name in (PROJECT, PEER):
    print(f"| {name} | {rates[name]:,.0f} | {starts[name]:.2f} s |")
  print(f"records/s, rembert_tf vs peer: {rates[PROJECT] / rates[PEER]:.2f}x; "
        f"worker start: {starts[PEER] / starts[PROJECT]:.1f}x shorter")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump({"records": FLAGS.records, "seq_length": FLAGS.seq_length,
                 "max_predictions": FLAGS.max_predictions,
                 "rounds": FLAGS.rounds,
                 "records_per_second": rates, "worker_start_seconds": starts},
                f, indent=2)


if __name__ == "__main__":
  bench_command.run(main)

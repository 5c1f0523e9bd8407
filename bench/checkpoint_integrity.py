r"""Telling a whole checkpoint from a cut one: the project's index check against TensorFlow's reader.

Every reader of a checkpoint directory (resume, export, conversion, a live
`model_dir`'s readers) first finds the newest checkpoint whose bytes are all
there (`rembert_tf.checkpoints.checkpoint_integrity.problem`: it opens the
bundle's `.index` with TensorFlow's reader and compares the bytes its tensors
need with the data shards' sizes). TensorFlow's public API has no such check: `tf.train.load_checkpoint`
opens a bundle whose data shard is cut short without complaint, and only
reading every tensor (`get_tensor`) fails on it. This bench writes a
checkpoint of `--megabytes` MB in `--tensors` float32 tensors and times,
in interleaved rounds (the starting contender alternating):

| contender | what it does | finds a cut shard |
| --- | --- | --- |
| `checkpoint_integrity.problem` | reads the index (kilobytes), its string tensors and the shards' sizes | yes |
| `tf.train.load_checkpoint` | opens the bundle, lists the variables | no |
| `tf.train.load_checkpoint` + `get_tensor` of every variable | reads every byte | yes |

and checks the last column on a copy whose data shard lost its second half.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/checkpoint_integrity.py --megabytes 16 --rounds 1
```
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # pylint: disable=g-import-not-at-top
import numpy as np
import tensorflow as tf

import bench_command  # pylint: disable=g-import-not-at-top
from rembert_tf.checkpoints import checkpoint_integrity  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_integer("megabytes", 1024, "Size of the checkpoint's tensors.")
flags.DEFINE_integer("tensors", 64, "Number of tensors it holds.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
flags.DEFINE_string("json_out", "", "Also write the figures as JSON here.")

INDEX_CHECK = "checkpoint_integrity.problem"
OPEN_ONLY = "tf.train.load_checkpoint (variables listed)"
READ_ALL = "tf.train.load_checkpoint + get_tensor of every variable"


def write_checkpoint(directory: str) -> str:
  """A checkpoint of FLAGS.tensors float32 tensors, FLAGS.megabytes in all."""
  values = FLAGS.megabytes * (1 << 20) // 4 // FLAGS.tensors
  rng = np.random.default_rng(0)
  variables = {f"w{i}": tf.Variable(rng.standard_normal(values, np.float32))
               for i in range(FLAGS.tensors)}
  return tf.train.Checkpoint(**variables).write(os.path.join(directory, "ckpt"))


def index_check(prefix: str) -> bool:
  return checkpoint_integrity.problem(prefix) is None


def open_only(prefix: str) -> bool:
  reader = tf.train.load_checkpoint(prefix)
  return bool(reader.get_variable_to_shape_map())


def read_all(prefix: str) -> bool:
  reader = tf.train.load_checkpoint(prefix)
  try:
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  # A short shard raises IndexError ("Read less bytes than requested").
  except (tf.errors.OpError, ValueError, IndexError):
    return False
  return True


CONTENDERS = ((INDEX_CHECK, index_check), (OPEN_ONLY, open_only),
              (READ_ALL, read_all))


def cut_copy(prefix: str, directory: str) -> str:
  """A copy of the checkpoint whose data shard lost its second half."""
  cut = os.path.join(directory, "cut")
  os.makedirs(cut)
  for name in os.listdir(os.path.dirname(prefix)):
    if name.startswith("ckpt"):
      shutil.copy(os.path.join(os.path.dirname(prefix), name), cut)
  shard = next(os.path.join(cut, n) for n in os.listdir(cut) if ".data-" in n)
  with open(shard, "r+b") as f:
    f.truncate(os.path.getsize(shard) // 2)
  return os.path.join(cut, os.path.basename(prefix))


def time_contenders(prefix: str):
  seconds = {name: [] for name, _ in CONTENDERS}
  for round_index in range(FLAGS.rounds):
    shift = round_index % len(CONTENDERS)
    for name, check in CONTENDERS[shift:] + CONTENDERS[:shift]:
      start = time.perf_counter()
      assert check(prefix), f"{name} found the whole checkpoint cut"
      seconds[name].append(time.perf_counter() - start)
      print(f"round {round_index + 1}/{FLAGS.rounds}: {name}: "
            f"{seconds[name][-1]:.4f} s", flush=True)
  return {name: statistics.median(s) for name, s in seconds.items()}


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as directory:
    prefix = write_checkpoint(os.path.join(directory, "whole"))
    cut = cut_copy(prefix, directory)
    found = {name: not check(cut) for name, check in CONTENDERS}
    times = time_contenders(prefix)
  print(f"\na checkpoint of {FLAGS.megabytes} MB in {FLAGS.tensors} tensors, "
        f"local disk, median of {FLAGS.rounds} rounds")
  print("| contender | seconds | finds a cut shard |")
  print("| --- | ---: | --- |")
  for name, _ in CONTENDERS:
    print(f"| {name} | {times[name]:.4f} | {'yes' if found[name] else 'no'} |")
  print(f"the index check vs reading every tensor: "
        f"{times[READ_ALL] / times[INDEX_CHECK]:.0f}x less time")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump({"megabytes": FLAGS.megabytes, "tensors": FLAGS.tensors,
                 "rounds": FLAGS.rounds, "seconds": times,
                 "finds_a_cut_shard": found}, f, indent=2)


if __name__ == "__main__":
  bench_command.run(main)

"""`python -m rembert_tf.train` whose save of one checkpoint is held.

A test helper, run as a script:

    python train_with_stalled_save.py STEP MARKER_FILE TRAIN_FLAGS...

Every checkpoint write ends by merging the shards written under
`PREFIX_temp/` into `PREFIX.index` / `PREFIX.data-*`. Here the merge of a
prefix ending in `ckpt-STEP` (the full checkpoint, and its encoder export)
appends a line to MARKER_FILE and then waits: forever, so the shards of that
save lie half-written in `ckpt-STEP_temp/` when the test kills the process;
or, when the environment names a RELEASE_FILE (`STALLED_SAVE_RELEASE_FILE`),
until that file exists, after which the write completes.
"""
import os
import sys
import time

STEP, MARKER = sys.argv[1], sys.argv[2]
RELEASE = os.environ.get("STALLED_SAVE_RELEASE_FILE")
sys.argv = [sys.argv[0]] + sys.argv[3:]

from rembert_tf.cli import train  # noqa: E402  (imports TensorFlow)
from tensorflow.python.ops import gen_io_ops  # noqa: E402  pylint: disable=g-direct-tensorflow-import

_merge = gen_io_ops.merge_v2_checkpoints


def _stalling_merge(checkpoint_prefixes, destination_prefix, *args, **kwargs):
  prefix = getattr(destination_prefix, "numpy", lambda: b"")()
  if isinstance(prefix, bytes) and prefix.decode().endswith(f"ckpt-{STEP}"):
    with open(MARKER, "a", encoding="utf-8") as f:
      f.write(f"{os.getpid()} {prefix.decode()}\n")
    while not (RELEASE and os.path.exists(RELEASE)):
      time.sleep(0.1 if RELEASE else 60)
  return _merge(checkpoint_prefixes, destination_prefix, *args, **kwargs)


gen_io_ops.merge_v2_checkpoints = _stalling_merge

if __name__ == "__main__":
  train.run()

"""A checkpoint directory as the trainers write it: its names, whether a
checkpoint is whole, the newest whole one, waiting for writes in flight.

Builds on `tf.train.CheckpointManager` (`ckpt-N`, the `checkpoint` state
file, `ckpt-N_temp/` while a save is written) and `tf.io.gfile`. A save or
copy cut short leaves a tensor bundle that TensorFlow fails on half-way:
`problem(P)` compares the bytes the index says its tensors need with the
data files' sizes, without reading the tensors; `latest_checkpoint(DIR)`
passes over such checkpoints to the newest intact one, saying so.

Example:
```python
from rembert_tf.checkpoints import checkpoint_integrity
checkpoint_integrity.problem("run/ckpt-40")
# 'ckpt-40.data-00000-of-00001 has 46126 of its 92252 bytes'
checkpoint_integrity.latest_checkpoint("run", report=print)
# run: ckpt-40 is not intact (...); using ckpt-30, the newest intact checkpoint.
```
"""
import os
import re
import time
from typing import Callable, List, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rembert_tf.common import errors

MODEL_CONFIG_FILE = "model_config.yaml"
ENCODER_SUBDIR = "encoder"
PRETRAINER_SUBDIR = "pretrainer"
SENTENCEPIECE_FILE = "sentencepiece.model"
# The sha256 of a pre-training run's SentencePiece model (also without it).
SENTENCEPIECE_SHA256_FILE = "sentencepiece.sha256"
SAVED_MODEL_FILE = "saved_model.pb"

_STEP = re.compile(r"^(.*)-(\d+)$")
_SHARDS = re.compile(r"\.data-\d{5}-of-(\d{5})$")
_LOOKS = 5  # looks at a state file that changes while its checkpoints are read


class CheckpointError(errors.RemBertError, ValueError):
  """A checkpoint source is missing a part or does not match the model."""


def data_bytes(reader) -> Tuple[int, bool]:
  """(bytes a checkpoint's data files hold, whether exact), from its index;
  a string tensor (the object graph) is read: its strings, a varint length
  each and a crc32c; one that cannot be read counts its least."""
  dtypes = reader.get_variable_to_dtype_map()
  total, exact = 0, True
  for key, shape in reader.get_variable_to_shape_map().items():
    count = int(np.prod(shape, dtype=np.int64))
    if dtypes[key] != tf.string:
      total += count * dtypes[key].size
      continue
    try:
      strings = np.asarray(reader.get_tensor(key), dtype=object).reshape(-1)
      total += 4 + sum(len(s) + (max(len(s).bit_length(), 1) + 6) // 7
                       for s in strings)
    except (tf.errors.OpError, ValueError, IndexError):  # a short read
      total, exact = total + 4 + count, False
  return total, exact


def problem(prefix) -> Optional[str]:
  """What keeps checkpoint `prefix` from being read whole, or None."""
  prefix = os.fspath(prefix)
  name = os.path.basename(prefix)
  data = tf.io.gfile.glob(prefix + ".data-*")
  if not tf.io.gfile.exists(prefix + ".index"):
    return f"{name}.index is missing" if data else "none of its files exists"
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, ValueError) as e:
    return f"{name}.index is unreadable ({errors.one_line(e)[:200]})"
  names = {os.path.basename(path) for path in data}
  num_shards = max((int(m.group(1)) for m in map(_SHARDS.search, names) if m),
                   default=1)
  for shard in range(num_shards):
    if f"{name}.data-{shard:05d}-of-{num_shards:05d}" not in names:
      return f"{name}.data-{shard:05d}-of-{num_shards:05d} is missing"
  where = (os.path.basename(data[0]) if num_shards == 1
           else f"the {num_shards} data files of {name}")
  have = sum(tf.io.gfile.stat(path).length for path in data)
  needed, exact = data_bytes(reader)
  if have < needed or not exact:
    return f"{where} has {have} of its {needed}{'' if exact else '+'} bytes"
  return None


def step_of(prefix: str) -> Optional[int]:
  """The number after the last `-` of a prefix (`ckpt-40` -> 40), or None."""
  match = _STEP.match(os.path.basename(prefix))
  return int(match.group(2)) if match else None


def _candidates(directory: str) -> List[str]:
  """The prefixes a directory's `checkpoint` file names, plus older ones on
  disk, newest first."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None or not state.model_checkpoint_path:
    return []
  # A state file copied from elsewhere may name absolute paths of there.
  local = lambda p: os.path.join(directory, os.path.basename(p))
  named = local(state.model_checkpoint_path)
  prefixes = {local(p) for p in state.all_model_checkpoint_paths} | {named}
  match = _STEP.match(os.path.basename(named))
  if match:
    for index in tf.io.gfile.glob(f"{directory}/{match.group(1)}-*.index"):
      if (step_of(index[:-6]) or -1) <= step_of(named):
        prefixes.add(index[:-len(".index")])
  return sorted(prefixes, key=lambda p: (step_of(p) or -1, p == named),
                reverse=True)


def _state_text(directory: str) -> Optional[str]:
  try:
    with tf.io.gfile.GFile(os.path.join(directory, "checkpoint")) as f:
      return f.read()
  except tf.errors.OpError:
    return None


def newest_intact(directory) -> Tuple[Optional[str], List[Tuple[str, str]]]:
  """(newest intact checkpoint or None, [(newer prefix, its problem)])."""
  directory = os.fspath(directory).rstrip("/")
  # A trainer rotating its checkpoints may delete them while we look.
  for _ in range(_LOOKS):
    state, skipped = _state_text(directory), []
    for prefix in _candidates(directory):
      why = problem(prefix)
      if why is None:
        return prefix, skipped
      skipped.append((prefix, why))
    if _state_text(directory) == state:
      break
  return None, skipped


def latest_checkpoint(directory,
                      report: Optional[Callable[[str], None]] = None
                      ) -> Optional[str]:
  """The newest intact checkpoint prefix in `directory`, or None; one line
  (logged and to `report`) for those passed over.

  Raises:
    CheckpointError: the `checkpoint` file names checkpoints but none is
      intact (the message lists what is wrong with each).
  """
  directory = os.fspath(directory).rstrip("/")
  if not tf.io.gfile.isdir(directory):
    return None
  intact, skipped = newest_intact(directory)
  if intact is None and skipped:
    raise CheckpointError(
        f"{directory}: no intact checkpoint (" + "; ".join(
            f"{os.path.basename(p)}: {why}" for p, why in skipped) +
        "). Copy the checkpoint files again from where they were written, or "
        "point to another checkpoint.")
  if skipped:
    line = (f"{directory}: " + "; ".join(
        f"{os.path.basename(p)} is not intact ({why})" for p, why in skipped) +
            f"; using {os.path.basename(intact)}, the newest intact checkpoint.")
    logging.warning("%s", line)
    if report is not None:
      report(line)
  return intact


def name_as_latest(directory, prefix: str) -> None:
  """Makes `directory`'s `checkpoint` file name `prefix` as its newest (what
  `tf.train.CheckpointManager` restores), dropping the broken ones."""
  directory = os.fspath(directory).rstrip("/")
  state = tf.train.get_checkpoint_state(directory)
  if state is None or state.model_checkpoint_path == prefix:
    return
  timestamps = (list(state.all_model_checkpoint_timestamps)
                or [None] * len(state.all_model_checkpoint_paths))
  kept = [(p, t) for p, t in zip(state.all_model_checkpoint_paths, timestamps)
          if (step_of(p) or 0) < (step_of(prefix) or 0) and problem(p) is None]
  timestamps = ([t for _, t in kept] + [time.time()]
                if all(t is not None for _, t in kept) else None)
  # What CheckpointManager itself writes the file with.
  tf.__internal__.train.update_checkpoint_state(
      directory, prefix, all_model_checkpoint_paths=[p for p, _ in kept] + [
          prefix], save_relative_paths=True,
      all_model_checkpoint_timestamps=timestamps,
      last_preserved_timestamp=state.last_preserved_timestamp or None)


def wait_for_writes(checkpoint: tf.train.Checkpoint) -> None:
  """Returns once every write of `checkpoint` so far is complete; raises a
  failed one's error (which `Checkpoint.sync` alone keeps)."""
  checkpoint.sync()
  helper = getattr(checkpoint, "_async_checkpointer_impl", None)
  if helper is not None:  # exists once a write was asynchronous
    helper._check_async_thread_error()  # pylint: disable=protected-access


def remove_temporaries(directories) -> List[str]:
  """Removes the `ckpt-N_temp` folders a killed save left; returns them."""
  removed = [stale for directory in directories
             for stale in tf.io.gfile.glob(f"{directory}/ckpt-*_temp")]
  for stale in removed:
    tf.io.gfile.rmtree(stale)
  return removed

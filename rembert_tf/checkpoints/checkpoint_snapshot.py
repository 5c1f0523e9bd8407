"""Reading a live model_dir: the newest intact checkpoint, held against the
trainer's rotation while it is read.

A trainer with `trainer.max_to_keep` deletes its oldest checkpoint at every
save (TensorFlow's `CheckpointManager`). A reader (rembert-export,
rembert-convert) that chose a model_dir's newest intact checkpoint may find
its files gone before it has read them all when saves come often or the read
is slow. `held(source)` therefore copies the files of the checkpoint chosen
(`P.index`, `P.data-*`, only of the parts the reader needs) into a temporary
folder of the reader's own, checks the copy whole
(`checkpoint_integrity.problem`), and hands out a `CheckpointSource` that
reads the copy; a copy that the rotation cut short (a file gone half-way) is
dropped and the reader starts again from the then newest checkpoint.

A copy asks nothing of the writer (CheckpointManager deletes whatever lies
past max_to_keep) and works alike on every filesystem of `tf.io.gfile`. It
costs the size of the parts read on the local temporary disk, for as long as
the reader runs. Sources that no
trainer rotates (a converted checkpoint directory, a prefix the user named,
a SavedModel) are read in place.

Builds on `checkpoint_layout.resolve` (which files hold each part) and
`fileio.copy` (tf.io.gfile).

Example:
<!-- snippet: not run: needs a pre-training run in runs/pretrain -->
```python
from rembert_tf.checkpoints import checkpoint_restore, checkpoint_snapshot
with checkpoint_snapshot.held("runs/pretrain") as source:
  cfg, encoder = checkpoint_restore.load_encoder(source)
source.encoder_checkpoint   # the copy's prefix (removed after the block)
```
"""
import contextlib
import dataclasses
import os
import tempfile
from typing import Iterator, Optional, Sequence

from absl import logging
import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.checkpoints import checkpoint_layout

# Copies tried before giving up, each from the newest checkpoint then.
ATTEMPTS = 5
PARTS = ("encoder", "pretrainer")


def is_rotated(source: checkpoint_layout.CheckpointSource) -> bool:
  """Whether a trainer's CheckpointManager rotates the source's checkpoints:
  a directory with full `ckpt-N` checkpoints of its own (a model_dir)."""
  return (source.kind == "directory"
          and tf.train.get_checkpoint_state(source.path) is not None)


@contextlib.contextmanager
def held(source, parts: Sequence[str] = PARTS
         ) -> Iterator[checkpoint_layout.CheckpointSource]:
  """`source` resolved, the checkpoints of `parts` ("encoder", "pretrainer")
  copied for the block when a trainer rotates them (`is_rotated`).

  Raises:
    CheckpointError: every copy tried was cut short by the rotation.
  """
  resolved = checkpoint_layout.resolve(source)
  if not is_rotated(resolved):
    yield resolved
    return
  with tempfile.TemporaryDirectory(prefix="rembert_tf-held-checkpoint-") as tmp:
    for attempt in range(ATTEMPTS):
      copy = _copy_parts(resolved, parts, os.path.join(tmp, str(attempt)))
      if copy is not None:
        yield copy
        return
      resolved = checkpoint_layout.resolve(resolved.path)
  raise checkpoint_layout.CheckpointError(
      f"{resolved.path}: each of the {ATTEMPTS} newest checkpoints chosen was "
      "deleted by the trainer's rotation (trainer.max_to_keep) before it "
      "could be copied; raise trainer.max_to_keep or trainer."
      "checkpoint_interval, or read once the training has ended.")


def _copy_parts(resolved: checkpoint_layout.CheckpointSource,
                parts: Sequence[str], folder: str
                ) -> Optional[checkpoint_layout.CheckpointSource]:
  """`resolved` reading copies (in `folder`) of the checkpoints of `parts`;
  None when one of them was deleted or changed while being copied."""
  copies = {}
  for part in parts:
    prefix = getattr(resolved, f"{part}_checkpoint")
    if prefix is None or prefix in copies:
      continue
    # One folder per prefix: DIR/ckpt-4 and DIR/encoder/ckpt-4 share a name.
    target = fileio.join(folder, str(len(copies)), fileio.basename(prefix))
    if not _copy_prefix(prefix, target):
      logging.info("%s was deleted while being copied; trying the newest "
                   "checkpoint again.", prefix)
      return None
    copies[prefix] = target
  logging.info("Reading copies of %s", ", ".join(copies))
  return dataclasses.replace(resolved, **{
      f"{part}_checkpoint": copies.get(getattr(resolved, f"{part}_checkpoint"))
      for part in PARTS if getattr(resolved, f"{part}_checkpoint") in copies})


def _copy_prefix(prefix: str, target: str) -> bool:
  """Copies checkpoint `prefix`'s files to `target`; whether the copy is whole."""
  fileio.makedirs(fileio.dirname(target))
  try:
    # The index first: the data files it names are then the ones copied.
    names = [prefix + ".index"] + fileio.glob(prefix + ".data-*")
    for name in names:
      fileio.copy(name, target + name[len(prefix):])
  except (OSError, tf.errors.NotFoundError):
    return False
  return checkpoint_integrity.problem(target) is None

"""Reading a live model_dir: the newest intact checkpoint, held against the
trainer's rotation while it is read.

A trainer's `CheckpointManager` deletes its oldest checkpoint at every save
(`trainer.max_to_keep`), so a reader (rembert-export, rembert-convert) of a
model_dir's newest checkpoint may find its files gone half-way.
`held(source)` copies the files of the parts the reader needs (`P.index`,
`P.data-*`) into a temporary folder of its own, checks the copy whole
(`checkpoint_integrity.problem`) and hands out a `CheckpointSource` that
reads it; a copy cut short by the rotation is dropped and the newest
checkpoint copied again. The writer is asked nothing; the copy costs local
disk while the reader runs. Sources no trainer rotates (a converted
directory, a prefix, a SavedModel) are read in place.

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
  copied for the block when a trainer rotates them; CheckpointError when
  every copy tried was cut short."""
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

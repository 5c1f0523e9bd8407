"""Writes a checkpoint directory (`checkpoint_layout`): `model_config.yaml`,
`encoder/ckpt-N` and optionally `pretrainer/ckpt-N`.

Builds on `tf.train.CheckpointManager`, through `rembert_tf.common.fileio`
(gs:// works). The converter writes its output with it.
"""
import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.checkpoints.checkpoint_integrity import (
    ENCODER_SUBDIR, MODEL_CONFIG_FILE, PRETRAINER_SUBDIR)
from rembert_tf.modeling import rembert_config


def write_encoder_checkpoint(encoder, directory, step: int = 0,
                             max_to_keep: int = 3) -> str:
  """Saves `encoder` as DIR/encoder/ckpt-<step> (the `checkpoint` state file
  is updated last: a kill midway leaves no half-written newest checkpoint)."""
  return _save(ENCODER_SUBDIR, {"encoder": encoder}, directory, step,
               max_to_keep)


def write_pretrainer_checkpoint(pretrainer, directory, step: int = 0,
                                max_to_keep: int = 1) -> str:
  """Saves encoder + output side as DIR/pretrainer/ckpt-<step> (key `model`)."""
  return _save(PRETRAINER_SUBDIR, {"model": pretrainer}, directory, step,
               max_to_keep)


def _save(subdir, items, directory, step: int, max_to_keep: int) -> str:
  return tf.train.CheckpointManager(
      tf.train.Checkpoint(**items), directory=fileio.join(directory, subdir),
      max_to_keep=max_to_keep).save(checkpoint_number=step)


def write_checkpoint_dir(directory, cfg, encoder, pretrainer=None,
                         step: int = 0) -> None:
  """Writes model_config.yaml, encoder/ckpt-N and [pretrainer/ckpt-N] into
  the temporary directory of `outputs.atomic_directory` (a caller with a
  tokenizer copies it in as `SENTENCEPIECE_FILE` before the swap)."""
  fileio.makedirs(directory)
  rembert_config.save_model_config(cfg, fileio.join(directory, MODEL_CONFIG_FILE))
  write_encoder_checkpoint(encoder, directory, step=step)
  if pretrainer is not None:
    write_pretrainer_checkpoint(pretrainer, directory, step=step)

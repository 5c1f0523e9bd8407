"""The on-disk layout every command shares: a "rembert_tf checkpoint directory".

```
DIR/model_config.yaml        the RemBertConfig (see configs/models/)
DIR/encoder/ckpt-N.*         tf.train.Checkpoint(encoder=encoder): what fine-tuning keeps
DIR/pretrainer/ckpt-N.*      tf.train.Checkpoint(model=pretrainer): encoder + output side
                             (optional; present after conversion of a full checkpoint)
DIR/sentencepiece.model      the tokenizer (optional)
```
A pre-training `--model_dir` is such a directory too: the train command keeps
`model_config.yaml` and `encoder/` up to date beside Model Garden's full
checkpoints (`ckpt-N`, holding `model`, `optimizer` and `global_step`).

The encoder-only checkpoint uses the key `encoder`, the same key Model
Garden's `BertPretrainerV2.checkpoint_items` and its fine-tuning tasks'
`init_checkpoint` use, so Model Garden tasks can initialise from it as well.
"""
import os
import pathlib
import shutil
import tempfile
from typing import Optional, Tuple

import tensorflow as tf

from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder

MODEL_CONFIG_FILE = "model_config.yaml"
ENCODER_SUBDIR = "encoder"
PRETRAINER_SUBDIR = "pretrainer"
SENTENCEPIECE_FILE = "sentencepiece.model"


class CheckpointError(ValueError):
  """A checkpoint directory is missing a part or does not match the model."""


def latest_checkpoint(directory) -> Optional[str]:
  """Newest checkpoint prefix in `directory` (via its `checkpoint` file)."""
  if not tf.io.gfile.isdir(str(directory)):
    return None
  return tf.train.latest_checkpoint(str(directory))


def load_model_config_from_dir(directory) -> rembert_config.RemBertConfig:
  path = pathlib.Path(directory) / MODEL_CONFIG_FILE
  if not path.exists():
    raise CheckpointError(
        f"{directory}: no {MODEL_CONFIG_FILE}. A rembert_tf checkpoint "
        "directory holds model_config.yaml and encoder/ckpt-*; make one with "
        "`python -m rembert_tf.train` or `tools/convert_checkpoint.py --to "
        "rembert_tf`.")
  return rembert_config.load_model_config(path)


def encoder_checkpoint_path(directory) -> str:
  """The newest encoder-only checkpoint prefix of a checkpoint directory."""
  path = latest_checkpoint(pathlib.Path(directory) / ENCODER_SUBDIR)
  if path is None:
    raise CheckpointError(
        f"{directory}: no encoder checkpoint under {ENCODER_SUBDIR}/ (expected "
        f"{ENCODER_SUBDIR}/checkpoint and {ENCODER_SUBDIR}/ckpt-N.index).")
  return path


def restore_encoder(encoder: rembert_encoder.RemBertEncoder, checkpoint_path: str):
  """Restores every encoder variable from an encoder-only checkpoint.

  Raises CheckpointError naming the encoder variables the checkpoint lacks.
  """
  status = tf.train.Checkpoint(encoder=encoder).read(checkpoint_path)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise CheckpointError(
        f"{checkpoint_path} does not match the encoder: {e}") from None
  status.expect_partial()
  return status


def load_encoder_from_dir(directory) -> Tuple[rembert_config.RemBertConfig,
                                               rembert_encoder.RemBertEncoder]:
  """Builds the encoder of a checkpoint directory and restores its weights."""
  cfg = load_model_config_from_dir(directory)
  encoder = rembert_encoder.build_encoder(cfg)
  restore_encoder(encoder, encoder_checkpoint_path(directory))
  return cfg, encoder


def write_encoder_checkpoint(encoder, directory, step: int = 0,
                             max_to_keep: int = 3) -> str:
  """Saves `encoder` as DIR/encoder/ckpt-<step> with a CheckpointManager.

  TF writes the checkpoint's files under temporary names and renames them
  when complete, and updates the `checkpoint` index file last, so a kill
  midway never leaves a half-written checkpoint as the newest one.
  """
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(encoder=encoder),
      directory=os.path.join(str(directory), ENCODER_SUBDIR),
      max_to_keep=max_to_keep)
  return manager.save(checkpoint_number=step)


class AtomicDirectory:
  """Writes a directory under a temporary sibling name, renamed on success.

  ```python
  with AtomicDirectory(output_dir, overwrite=False) as tmp:
      ...write files under tmp...
  # output_dir now exists, complete; on an exception nothing is left.
  ```
  """

  def __init__(self, final_dir, overwrite: bool = False):
    self.final_dir = pathlib.Path(final_dir)
    self.overwrite = overwrite
    self.tmp_dir = None

  def __enter__(self) -> pathlib.Path:
    if self.final_dir.exists() and not self.overwrite:
      raise FileExistsError(
          f"{self.final_dir} already exists; choose another output directory "
          "or pass --overwrite to replace it.")
    self.final_dir.parent.mkdir(parents=True, exist_ok=True)
    self.tmp_dir = pathlib.Path(tempfile.mkdtemp(
        prefix=f".{self.final_dir.name}.tmp-", dir=self.final_dir.parent))
    return self.tmp_dir

  def __exit__(self, exc_type, exc, tb):
    if exc_type is not None:
      shutil.rmtree(self.tmp_dir, ignore_errors=True)
      return False
    if self.final_dir.exists():
      old = self.final_dir.with_name(f".{self.final_dir.name}.old-{os.getpid()}")
      os.replace(self.final_dir, old)
      os.replace(self.tmp_dir, self.final_dir)
      shutil.rmtree(old, ignore_errors=True)
    else:
      os.replace(self.tmp_dir, self.final_dir)
    return False

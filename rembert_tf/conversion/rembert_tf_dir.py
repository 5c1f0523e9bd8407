"""Reads and writes rembert_tf checkpoint directories for conversion and export.

The layout is the one of `rembert_tf.modeling.checkpoints` (model_config.yaml,
encoder/ckpt-N, optional pretrainer/ckpt-N, optional sentencepiece.model). A
pre-training `--model_dir` is accepted too: when `encoder/` is missing, the
encoder (or the whole pretrainer) is read from Model Garden's full checkpoint
`ckpt-N` (`tf.train.Checkpoint(model=pretrainer, optimizer=..., ...)`),
skipping the optimizer.

Example:
```python
from rembert_tf.conversion import rembert_tf_dir
loaded = rembert_tf_dir.load_checkpoint_dir("runs/pretrain", with_output_side=True)
loaded.encoder, loaded.pretrainer          # pretrainer is None if encoder-only
```
"""
import dataclasses
import pathlib
import shutil
from typing import Optional

import tensorflow as tf
from absl import logging

from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

from rembert_tf.conversion import weight_layout


@dataclasses.dataclass
class LoadedModel:
  """A model read from a checkpoint directory."""
  cfg: rembert_config.RemBertConfig
  encoder: rembert_encoder.RemBertEncoder
  pretrainer: Optional[rembert_pretrainer.RemBertPretrainer]
  sp_model: Optional[str]
  checkpoint_path: str


def resolve_config(directory, config=None) -> rembert_config.RemBertConfig:
  """The directory's model_config.yaml, or `config` (preset name / YAML path).

  If both exist they must agree; the error lists every differing field.
  """
  directory = pathlib.Path(directory)
  in_dir = directory / checkpoints.MODEL_CONFIG_FILE
  if config is None:
    return checkpoints.load_model_config_from_dir(directory)
  given = rembert_config.load_model_config(config)
  if in_dir.exists():
    stored = rembert_config.load_model_config(in_dir)
    diff = [f"{k}: {in_dir.name} has {v!r}, --config has {given.as_dict()[k]!r}"
            for k, v in stored.as_dict().items() if given.as_dict()[k] != v]
    if diff:
      raise weight_layout.ConversionError(
          f"{in_dir} and the config {config} disagree:\n  " + "\n  ".join(diff)
          + "\nDrop --config to use the directory's own config.")
  return given


def _full_checkpoint_path(directory) -> Optional[str]:
  """Newest pretrainer checkpoint: DIR/pretrainer/ckpt-N or Model Garden's DIR/ckpt-N."""
  directory = pathlib.Path(directory)
  return (checkpoints.latest_checkpoint(directory / checkpoints.PRETRAINER_SUBDIR)
          or checkpoints.latest_checkpoint(directory))


def _read_checked(checkpoint: tf.train.Checkpoint, path: str, what: str):
  status = checkpoint.read(path)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise checkpoints.CheckpointError(
        f"{path} does not hold every variable of the {what}: {e}") from None
  status.expect_partial()


def load_checkpoint_dir(directory, config=None,
                        with_output_side: bool = False) -> LoadedModel:
  """Builds the model of a checkpoint directory and restores its weights.

  Args:
    directory: a rembert_tf checkpoint directory or pre-training model_dir.
    config: optional preset name / YAML path (needed only when the directory
      has no model_config.yaml).
    with_output_side: also restore the output side (MLM head, output layers)
      when the directory has a full checkpoint. The result's `pretrainer` is
      None when it has only `encoder/`.
  """
  directory = pathlib.Path(directory)
  if not directory.is_dir():
    raise checkpoints.CheckpointError(f"{directory}: no such directory.")
  cfg = resolve_config(directory, config)
  sp_model = directory / checkpoints.SENTENCEPIECE_FILE
  sp_model = str(sp_model) if sp_model.exists() else None
  full_path = _full_checkpoint_path(directory)
  encoder_path = checkpoints.latest_checkpoint(directory / checkpoints.ENCODER_SUBDIR)

  if with_output_side and full_path:
    pretrainer = rembert_pretrainer.build_pretrainer(cfg)
    _read_checked(tf.train.Checkpoint(model=pretrainer), full_path, "pretrainer")
    logging.info("Read encoder and output side from %s", full_path)
    return LoadedModel(cfg, pretrainer.encoder, pretrainer, sp_model, full_path)

  encoder = rembert_encoder.build_encoder(cfg)
  if encoder_path:
    checkpoints.restore_encoder(encoder, encoder_path)
    path = encoder_path
  elif full_path:
    # Model Garden's full checkpoint: the encoder is model/encoder_network.
    _read_checked(tf.train.Checkpoint(
        model=tf.train.Checkpoint(encoder_network=encoder)), full_path, "encoder")
    path = full_path
  else:
    raise checkpoints.CheckpointError(
        f"{directory}: no checkpoint found (expected encoder/ckpt-N, "
        "pretrainer/ckpt-N or a Model Garden ckpt-N). Point --model_dir at a "
        "pre-training model_dir or a converted checkpoint directory.")
  logging.info("Read the encoder from %s", path)
  return LoadedModel(cfg, encoder, None, sp_model, path)


def write_checkpoint_dir(target_dir, cfg, encoder, pretrainer=None,
                         sp_model: Optional[str] = None, step: int = 0):
  """Writes model_config.yaml, encoder/ckpt-N, [pretrainer/ckpt-N], [sentencepiece.model].

  `target_dir` should be the temporary directory of an AtomicDirectory.
  """
  target_dir = pathlib.Path(target_dir)
  target_dir.mkdir(parents=True, exist_ok=True)
  rembert_config.save_model_config(cfg, target_dir / checkpoints.MODEL_CONFIG_FILE)
  checkpoints.write_encoder_checkpoint(encoder, target_dir, step=step)
  if pretrainer is not None:
    tf.train.CheckpointManager(
        tf.train.Checkpoint(model=pretrainer),
        directory=str(target_dir / checkpoints.PRETRAINER_SUBDIR),
        max_to_keep=1).save(checkpoint_number=step)
  if sp_model:
    copy_sentencepiece(sp_model, target_dir / checkpoints.SENTENCEPIECE_FILE)


def copy_sentencepiece(sp_model, target):
  """Copies a SentencePiece model and its `<prefix>.json` metadata if present."""
  sp_model = pathlib.Path(sp_model)
  if not sp_model.exists():
    raise weight_layout.ConversionError(
        f"{sp_model}: SentencePiece model not found (--sp_model).")
  target = pathlib.Path(target)
  shutil.copyfile(sp_model, target)
  metadata = sp_model.with_suffix(".json")
  if metadata.exists():
    shutil.copyfile(metadata, target.with_suffix(".json"))

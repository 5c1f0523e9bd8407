"""The checkpoint directory: where a model's weights, config and tokenizer are.

A *checkpoint source* is any path a user gives a command that needs weights:

| source                          | what it holds                                         |
| ------------------------------- | ----------------------------------------------------- |
| checkpoint directory            | `model_config.yaml`, `encoder/ckpt-N`, optionally `pretrainer/ckpt-N` and `sentencepiece.model` (written by conversion) |
| pre-training `model_dir`        | the same files plus Model Garden's full `ckpt-N` (`model` = the pretrainer, `optimizer`, `global_step`, `encoder`) |
| checkpoint prefix               | e.g. `DIR/encoder/ckpt-3` or `DIR/ckpt-3` (config from `DIR/model_config.yaml` or given) |
| exported SavedModel directory   | `saved_model.pb`, `variables/`, `model_config.yaml`, `assets/sentencepiece.model` |

`resolve(source)` finds which files of a source hold the encoder, the output
side, the model config and the SentencePiece model; reading the weights into
a model is `rembert_tf.modeling.checkpoint_restore`.

Layout of a checkpoint directory:
```
DIR/model_config.yaml        the RemBertConfig (see configs/models/)
DIR/encoder/ckpt-N.*         tf.train.Checkpoint(encoder=encoder): what fine-tuning keeps
DIR/pretrainer/ckpt-N.*      tf.train.Checkpoint(model=pretrainer): encoder + output side
DIR/sentencepiece.model      the tokenizer (optional), with sentencepiece.json beside it
```
The encoder-only checkpoint uses the key `encoder`, the key Model Garden's
`BertPretrainerV2.checkpoint_items` and its fine-tuning tasks'
`init_checkpoint` use; the pretrainer one uses `model`, as Model Garden's
trainer does, so a pre-training experiment can start from `pretrainer/`.
The SentencePiece model and its metadata are copied in by the callers that
have one (`rembert_tf.data.tokenizer.copy_sentencepiece`): the model core
does not read tokenizers.

Every path goes through `rembert_tf.common.fileio` and `tf.train`: gs://
sources work. Builds on `tf.train.CheckpointManager` (writing) and
`tf.train.latest_checkpoint` (finding the newest prefix).

Example:
```python
from rembert_tf.modeling import checkpoint_layout
source = checkpoint_layout.resolve("converted/rembert")
source.encoder_checkpoint   # ".../encoder/ckpt-0"
source.sp_model             # ".../sentencepiece.model" or None
checkpoint_layout.find_sentencepiece("converted/rembert")  # the same
```
"""
import dataclasses
import os
from typing import Optional, Union

import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.modeling import rembert_config

MODEL_CONFIG_FILE = "model_config.yaml"
ENCODER_SUBDIR = "encoder"
PRETRAINER_SUBDIR = "pretrainer"
SENTENCEPIECE_FILE = "sentencepiece.model"
SAVED_MODEL_FILE = "saved_model.pb"

ModelConfigLike = Union[None, str, os.PathLike, rembert_config.RemBertConfig]


class CheckpointError(errors.RemBertError, ValueError):
  """A checkpoint source is missing a part or does not match the model."""


@dataclasses.dataclass(frozen=True)
class CheckpointSource:
  """A user's checkpoint path, resolved to the files that hold each part.

  Attributes:
    path: the path as given.
    kind: "directory" (checkpoint directory or model_dir), "prefix" or
      "saved_model".
    encoder_checkpoint: object-based checkpoint prefix holding the encoder.
    pretrainer_checkpoint: prefix holding the whole pretrainer (encoder +
      output side), or None (encoder-only sources).
    model_config: path of the model_config.yaml, or None.
    sp_model: path of the SentencePiece model, or None.
  """
  path: str
  kind: str
  encoder_checkpoint: str
  pretrainer_checkpoint: Optional[str]
  model_config: Optional[str]
  sp_model: Optional[str]


def latest_checkpoint(directory) -> Optional[str]:
  """Newest checkpoint prefix in `directory` (via its `checkpoint` file)."""
  directory = fileio.as_str(directory)
  if not fileio.isdir(directory):
    return None
  return tf.train.latest_checkpoint(directory)


def encoder_checkpoint_path(directory) -> str:
  """The newest encoder-only checkpoint prefix of a checkpoint directory."""
  path = latest_checkpoint(fileio.join(directory, ENCODER_SUBDIR))
  if path is None:
    raise CheckpointError(
        f"{directory}: no encoder checkpoint under {ENCODER_SUBDIR}/ (expected "
        f"{ENCODER_SUBDIR}/checkpoint and {ENCODER_SUBDIR}/ckpt-N.index).")
  return path


def _existing(*paths) -> Optional[str]:
  for path in paths:
    if fileio.isfile(path):
      return path
  return None


def resolve(source) -> CheckpointSource:
  """Finds which files of `source` hold the encoder, the output side, the config.

  Raises:
    CheckpointError: naming the path when it holds no checkpoint.
  """
  if isinstance(source, CheckpointSource):
    return source
  path = fileio.as_str(source).rstrip("/") or "/"
  if fileio.exists(path + ".index"):
    # DIR/encoder/ckpt-N or DIR/ckpt-N: the config lives in DIR. Checked
    # first: some filesystems (ram://) call any prefix a directory.
    parent = fileio.dirname(path)
    folders = [parent, fileio.dirname(parent)]
    return CheckpointSource(
        path=path, kind="prefix", encoder_checkpoint=path,
        pretrainer_checkpoint=(
            path if fileio.basename(parent) != ENCODER_SUBDIR else None),
        model_config=_existing(*[fileio.join(f, MODEL_CONFIG_FILE)
                                 for f in folders]),
        sp_model=_existing(*[fileio.join(f, SENTENCEPIECE_FILE)
                             for f in folders]))
  if fileio.isdir(path) and fileio.exists(fileio.join(path, SAVED_MODEL_FILE)):
    return CheckpointSource(
        path=path, kind="saved_model",
        encoder_checkpoint=fileio.join(path, "variables", "variables"),
        pretrainer_checkpoint=None,
        model_config=_existing(fileio.join(path, MODEL_CONFIG_FILE),
                               fileio.join(path, "assets", MODEL_CONFIG_FILE)),
        sp_model=_existing(fileio.join(path, "assets", SENTENCEPIECE_FILE)))
  if fileio.isdir(path):
    pretrainer = (latest_checkpoint(fileio.join(path, PRETRAINER_SUBDIR))
                  or latest_checkpoint(path))
    encoder = latest_checkpoint(fileio.join(path, ENCODER_SUBDIR)) or pretrainer
    if encoder is None:
      raise CheckpointError(
          f"{path} is neither a rembert_tf checkpoint directory (no "
          f"{ENCODER_SUBDIR}/ckpt-N, {PRETRAINER_SUBDIR}/ckpt-N or pre-training "
          f"ckpt-N) nor an exported SavedModel (no {SAVED_MODEL_FILE}): no "
          "checkpoint found. Point it at a pre-training model_dir, a converted "
          "checkpoint directory or an exported SavedModel.")
    return CheckpointSource(
        path=path, kind="directory", encoder_checkpoint=encoder,
        pretrainer_checkpoint=pretrainer,
        model_config=_existing(fileio.join(path, MODEL_CONFIG_FILE)),
        sp_model=_existing(fileio.join(path, SENTENCEPIECE_FILE)))
  raise CheckpointError(
      f"checkpoint {path} does not exist (neither a directory nor a "
      "checkpoint prefix with a .index file).")


def find_sentencepiece(source) -> Optional[str]:
  """The SentencePiece model that came with a checkpoint source, or None."""
  return resolve(source).sp_model


# === the model config ===
def read_model_config(path) -> rembert_config.RemBertConfig:
  """A model_config.yaml on any filesystem."""
  path = fileio.as_str(path)
  values = fileio.read_yaml(path) or {}
  if isinstance(values, dict) and set(values) == {"model"}:
    values = values["model"]
  return rembert_config.model_config_from_dict(values, source=path)


def write_model_config(cfg: rembert_config.RemBertConfig, path) -> None:
  fileio.write_yaml(fileio.as_str(path), cfg.as_dict())


def load_model_config_from_dir(directory) -> rembert_config.RemBertConfig:
  """The model_config.yaml of a checkpoint directory (or SavedModel)."""
  path = fileio.join(directory, MODEL_CONFIG_FILE)
  if not fileio.exists(path):
    raise CheckpointError(
        f"{directory}: no {MODEL_CONFIG_FILE}. A rembert_tf checkpoint "
        "directory holds model_config.yaml and encoder/ckpt-*; make one with "
        "`python -m rembert_tf.train` or `tools/convert_checkpoint.py --to "
        "rembert_tf`, or pass the model config explicitly.")
  return read_model_config(path)


# === writing ===
def write_encoder_checkpoint(encoder, directory, step: int = 0,
                             max_to_keep: int = 3) -> str:
  """Saves `encoder` as DIR/encoder/ckpt-<step> with a CheckpointManager.

  TF writes the checkpoint's files under temporary names and renames them
  when complete, and updates the `checkpoint` index file last, so a kill
  midway never leaves a half-written checkpoint as the newest one.
  """
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(encoder=encoder),
      directory=fileio.join(directory, ENCODER_SUBDIR),
      max_to_keep=max_to_keep)
  return manager.save(checkpoint_number=step)


def write_pretrainer_checkpoint(pretrainer, directory, step: int = 0,
                                max_to_keep: int = 1) -> str:
  """Saves encoder + output side as DIR/pretrainer/ckpt-<step> (key `model`)."""
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=pretrainer),
      directory=fileio.join(directory, PRETRAINER_SUBDIR),
      max_to_keep=max_to_keep)
  return manager.save(checkpoint_number=step)


def write_checkpoint_dir(directory, cfg, encoder, pretrainer=None,
                         step: int = 0) -> None:
  """Writes model_config.yaml, encoder/ckpt-N and [pretrainer/ckpt-N].

  `directory` should be the temporary directory of `fileio.atomic_directory`;
  a caller with a tokenizer copies it in as `SENTENCEPIECE_FILE` before the
  directory is swapped in.
  """
  fileio.makedirs(directory)
  write_model_config(cfg, fileio.join(directory, MODEL_CONFIG_FILE))
  write_encoder_checkpoint(encoder, directory, step=step)
  if pretrainer is not None:
    write_pretrainer_checkpoint(pretrainer, directory, step=step)

"""The checkpoint directory: where a model's weights, config and tokenizer are.

A *checkpoint source* is any path a user gives a command that needs weights:
a checkpoint directory (`model_config.yaml`, `encoder/ckpt-N` with key
`encoder`, optionally `pretrainer/ckpt-N` with key `model` and
`sentencepiece.model`), a pre-training `model_dir` (the same plus Model
Garden's full `ckpt-N`), a checkpoint prefix (`DIR/encoder/ckpt-3`,
`DIR/ckpt-3`) or an exported SavedModel. `resolve(source)` finds which of
its files hold the encoder, the output side, the model config and the
SentencePiece model. A checkpoint is used only when intact
(`checkpoint_integrity`): a directory falls back to its newest intact
checkpoint with one line saying so; a prefix the user named is refused,
naming what is wrong. Builds on `tf.train.CheckpointManager` and its
`checkpoint` state file (`checkpoint_integrity`, which holds the names and
what the trainers need), through `rembert_tf.common.fileio` (gs:// works).

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
from rembert_tf.checkpoints import checkpoint_layout
source = checkpoint_layout.resolve("converted/rembert")
source.encoder_checkpoint   # ".../encoder/ckpt-0"
source.sp_model             # ".../sentencepiece.model" or None
```
"""
import dataclasses
import os
import sys
from typing import Callable, Optional, Union

from absl import logging
import yaml

from rembert_tf.common import fileio
from rembert_tf.checkpoints import checkpoint_integrity
# The names of the directory are checkpoint_integrity's (the lower module,
# which the trainers reach): the layout's public names.
from rembert_tf.checkpoints.checkpoint_integrity import (  # noqa: F401
    ENCODER_SUBDIR, MODEL_CONFIG_FILE, PRETRAINER_SUBDIR, SAVED_MODEL_FILE,
    SENTENCEPIECE_FILE, SENTENCEPIECE_SHA256_FILE, CheckpointError)
from rembert_tf.modeling import rembert_config

ModelConfigLike = Union[None, str, os.PathLike, rembert_config.RemBertConfig]
# Fallback lines not shown yet, by the prefix used instead: shown when that
# checkpoint is read (`announce_fallback`), so a command that resolves a
# directory several times, or needs one of its parts, says it once.
_PENDING_FALLBACKS = {}
_SHOWN_FALLBACKS = set()


def _say(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


def latest_checkpoint(directory, report: Optional[Callable[[str], None]] = None
                      ) -> Optional[str]:
  """`checkpoint_integrity.latest_checkpoint`, its fallback line given to
  `report`, or else shown on stderr when the checkpoint used is read
  (`announce_fallback`)."""
  lines = []
  intact = checkpoint_integrity.latest_checkpoint(directory, lines.append)
  for line in lines:
    if report is not None:
      _SHOWN_FALLBACKS.add(line)
      report(line)
    elif line not in _SHOWN_FALLBACKS:
      _PENDING_FALLBACKS[intact] = line
  return intact


def announce_fallback(prefix: str, report: Callable[[str], None] = _say
                      ) -> None:
  """Shows, once, the line of a fallback to `prefix` (if there was one)."""
  line = _PENDING_FALLBACKS.pop(prefix, None)
  if line is not None:
    _SHOWN_FALLBACKS.add(line)
    report(line)


@dataclasses.dataclass(frozen=True)
class CheckpointSource:
  """A user's checkpoint path, resolved to the files that hold each part."""
  path: str                             # as given
  kind: str                             # "directory", "prefix", "saved_model"
  encoder_checkpoint: str               # the prefix holding the encoder
  pretrainer_checkpoint: Optional[str]  # encoder + output side, if any
  model_config: Optional[str]           # model_config.yaml
  sp_model: Optional[str]               # sentencepiece.model


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
  """Finds which files of `source` hold each part; CheckpointError if none."""
  if isinstance(source, CheckpointSource):
    return source
  path = fileio.as_str(source).rstrip("/") or "/"
  if fileio.exists(path + ".index"):
    # DIR/encoder/ckpt-N or DIR/ckpt-N: the config lives in DIR. Checked
    # first: some filesystems (ram://) call any prefix a directory.
    check_intact(path)
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
    check_intact(fileio.join(path, "variables", "variables"))
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
    encoder = _newest_encoder(path, pretrainer)
    if encoder is None:
      raise CheckpointError(
          f"{path} is neither a rembert_tf checkpoint directory (no "
          f"{ENCODER_SUBDIR}/ckpt-N, {PRETRAINER_SUBDIR}/ckpt-N or pre-training "
          f"ckpt-N) nor an exported SavedModel (no {SAVED_MODEL_FILE}): no "
          "checkpoint found. Point it at a pre-training model_dir, a converted "
          "checkpoint directory or an exported SavedModel (a fine-tuning run "
          "keeps its checkpoint only with rembert-finetune --keep_checkpoints).")
    return CheckpointSource(
        path=path, kind="directory", encoder_checkpoint=encoder,
        pretrainer_checkpoint=pretrainer,
        model_config=_existing(fileio.join(path, MODEL_CONFIG_FILE)),
        sp_model=_existing(fileio.join(path, SENTENCEPIECE_FILE)))
  raise CheckpointError(
      f"checkpoint {path} does not exist (neither a directory nor a "
      "checkpoint prefix with a .index file).")


def _newest_encoder(path: str, pretrainer: Optional[str]) -> Optional[str]:
  """The newest checkpoint of a directory that holds its encoder: the
  encoder export, unless a newer full checkpoint has no export yet (a
  trainer exports every Nth save): then the full checkpoint, which holds
  the encoder too."""
  exported = latest_checkpoint(fileio.join(path, ENCODER_SUBDIR))
  if exported is None or pretrainer is None:
    return exported or pretrainer
  newer = ((checkpoint_integrity.step_of(pretrainer) or 0)
           > (checkpoint_integrity.step_of(exported) or 0))
  if newer:
    logging.info("%s: reading the encoder from %s (the newest encoder export "
                 "is %s, of an older step).", path, pretrainer, exported)
  return pretrainer if newer else exported


def check_intact(prefix: str) -> None:
  """Refuses a checkpoint prefix the user named that is not intact
  (CheckpointError naming what is wrong and the newest intact one beside it)."""
  why = checkpoint_integrity.problem(prefix)
  if why is None:
    return
  folder = fileio.dirname(prefix)
  intact, _ = checkpoint_integrity.newest_intact(folder)
  instead = (f"pass {intact} (the newest intact checkpoint there) or "
             if intact and intact != prefix else "")
  raise CheckpointError(
      f"{prefix}: the checkpoint is not intact ({why}); {instead}copy it "
      "again from where it was written.")


def find_sentencepiece(source) -> Optional[str]:
  return resolve(source).sp_model


def read_model_config(path) -> rembert_config.RemBertConfig:
  """A model_config.yaml on any filesystem."""
  path = fileio.as_str(path)
  values = yaml.safe_load(fileio.read_text(path)) or {}
  if isinstance(values, dict) and set(values) == {"model"}:
    values = values["model"]
  return rembert_config.model_config_from_dict(values, source=path)

"""`from_preset` of the RemBERT classes: Hugging Face folders, and every preset checked first.

Builds on keras-hub's preset loading: a Hugging Face RemBERT folder goes to
keras-hub's `TransformersPresetLoader` with the RemBERT converter
(`RemBertTransformersLoader`), every other preset loads as keras-hub loads
it. Before use, every file a preset's config implies must be there and whole
(weights finite and matching their checksum), else one line names the file.
"""
import contextlib
import hashlib
import json
from typing import Dict

import h5py
import keras_hub
import numpy as np
import safetensors
from absl import logging
from keras_hub.src.utils import preset_utils
from keras_hub.src.utils.transformers import preset_loader

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.conversion import weight_layout
from rembert_tf.keras_hub import transformers_checkpoint

# The HDF5 attribute holding the SHA-256 of a weights file's tensors.
CHECKSUM_ATTRIBUTE = "rembert_tf_tensors_sha256"
_VOCABULARY = f"{preset_utils.TOKENIZER_ASSET_DIR}/vocabulary.spm"
_SHARDED_WEIGHTS = "model.weights.json"


class PresetError(errors.InputError):
  """A preset or Hugging Face folder is incomplete or damaged."""


def _file(preset: str, name: str) -> str:
  return fileio.join(preset.rstrip("/"), name)


def _read_json(preset: str, name: str) -> Dict:
  return json.loads(fileio.read_text(preset_utils.get_file(preset, name)))


def read_config(preset: str) -> Dict:
  """config.json, or one line saying what is wrong with it."""
  path = _file(preset, preset_utils.CONFIG_FILE)
  if not preset_utils.check_file_exists(preset, preset_utils.CONFIG_FILE):
    raise PresetError(f"{path}: not found; a preset is the folder "
                      "save_to_preset, rembert-convert --to keras_hub or "
                      "transformers' save_pretrained writes.")
  try:
    return _read_json(preset, preset_utils.CONFIG_FILE)
  except json.JSONDecodeError as e:
    raise PresetError(
        f"{path}: not valid JSON ({e.msg}, line {e.lineno} column "
        f"{e.colno}): the file is cut short or edited; copy or convert the "
        "preset again.") from None


def tensors_sha256(weights: h5py.File) -> str:
  """SHA-256 over every dataset's path, dtype, shape and bytes; raises
  PresetError naming a dataset with non-finite values."""
  digest, bad = hashlib.sha256(), []

  def visit(key, item):
    if not isinstance(item, h5py.Dataset):
      return
    value = np.asarray(item[()])
    digest.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
    digest.update(np.ascontiguousarray(value).tobytes())
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
      bad.append(f"{key} ({int(np.sum(~np.isfinite(value)))} non-finite)")
  weights.visititems(visit)
  if bad:
    raise PresetError(", ".join(bad))
  return digest.hexdigest()


def write_checksum(path: str) -> None:
  """Puts the tensors' checksum into a local `.weights.h5` just written."""
  with h5py.File(path, "r+") as weights:
    weights.attrs[CHECKSUM_ATTRIBUTE] = tensors_sha256(weights)


def check_weights_file(preset: str, name: str) -> None:
  """`name` opens, reads back finite and matches its saved checksum; else one line."""
  path = _file(preset, name)
  if not preset_utils.check_file_exists(preset, name):
    raise PresetError(f"{path}: not found; the preset's config needs it. "
                      "Copy the whole preset folder, or convert it again.")
  fix = "the file is damaged; copy or convert the preset again."
  with local_files.local_copy(path) as local:
    size = fileio.size(local)
    try:
      weights = h5py.File(local, "r")
    except OSError:
      raise PresetError(f"{path}: not a readable HDF5 weights file ({size} "
                        f"bytes; empty or cut short): {fix}") from None
    with weights:
      try:
        found = tensors_sha256(weights)
      except PresetError as e:
        raise PresetError(f"{path}: {e}: {fix}") from None
      except (OSError, RuntimeError, ValueError, KeyError):
        raise PresetError(f"{path}: a tensor cannot be read ({size} bytes; "
                          f"overwritten or cut short): {fix}") from None
      written = weights.attrs.get(CHECKSUM_ATTRIBUTE)
  if written is not None and str(written) != found:
    raise PresetError(f"{path}: its tensors differ from the checksum written "
                      f"when it was saved ({CHECKSUM_ATTRIBUTE}): {fix}")


def _task_class_name(preset: str) -> str:
  task = _read_json(preset, preset_utils.TASK_CONFIG_FILE)
  return str(task.get("registered_name", "")).split(">")[-1]


def _check_vocabulary(preset: str, name: str, missing: str, again: str):
  """The SentencePiece model `name` is there and not empty."""
  path = _file(preset, name)
  if not preset_utils.check_file_exists(preset, name):
    raise PresetError(f"{path}: not found; {missing}")
  if fileio.size(preset_utils.get_file(preset, name)) == 0:
    raise PresetError(f"{path}: empty (0 bytes); copy the SentencePiece model "
                      f"there again{again}.")


def check_keras_preset(preset: str, weights: bool = True,
                       task: bool = False, tokenizer: bool = False) -> None:
  """The checks of a Keras preset, for what is about to be loaded."""
  read_config(preset)
  if tokenizer and preset_utils.check_file_exists(
      preset, preset_utils.TOKENIZER_CONFIG_FILE):
    _check_vocabulary(preset, _VOCABULARY, "tokenizer.json needs it. Copy the "
                      "whole preset folder, or convert it again.",
                      ", or convert the preset again")
  if not weights:
    return
  if not preset_utils.check_file_exists(preset, _SHARDED_WEIGHTS):
    check_weights_file(preset, preset_utils.MODEL_WEIGHTS_FILE)
  if not task:
    return
  if preset_utils.check_file_exists(
      preset, preset_utils.TASK_CONFIG_FILE) and not (
          preset_utils.check_file_exists(preset,
                                         preset_utils.TASK_WEIGHTS_FILE)):
    raise PresetError(
        f"{_file(preset, preset_utils.TASK_WEIGHTS_FILE)}: not found, but "
        f"task.json ({_task_class_name(preset)}) is there: the task's own "
        "weights (the masked-LM output side) would be lost. Copy "
        "task.weights.h5 beside it, or delete task.json (rembert-convert: "
        "--encoder_only) to use the encoder alone.")
  if preset_utils.check_file_exists(preset, preset_utils.TASK_WEIGHTS_FILE):
    check_weights_file(preset, preset_utils.TASK_WEIGHTS_FILE)


# --- Hugging Face folders -------------------------------------------------------


def _safetensors_files(preset: str):
  """The folder's safetensors files (one, or the index's shards)."""
  index = preset_utils.SAFETENSOR_CONFIG_FILE
  if preset_utils.check_file_exists(preset, index):
    try:
      return weight_layout.hf_shard_files(_file(preset, index), lambda _: (
          fileio.read_text(preset_utils.get_file(preset, index))))
    except weight_layout.ConversionError as e:
      raise PresetError(str(e)) from None
  if preset_utils.check_file_exists(preset, preset_utils.SAFETENSOR_FILE):
    return [preset_utils.SAFETENSOR_FILE]
  others = [n for n in ("pytorch_model.bin", "tf_model.h5")
            if preset_utils.check_file_exists(preset, n)]
  raise PresetError(
      f"{_file(preset, preset_utils.SAFETENSOR_FILE)}: not found (nor "
      f"{index}){'; the folder has ' + others[0] if others else ''}: save the "
      "model with transformers' save_pretrained (safetensors, its default).")


def _check_safetensors_file(preset: str, name: str) -> None:
  """The file opens as safetensors (whose header must cover it exactly)."""
  path = _file(preset, name)
  if not preset_utils.check_file_exists(preset, name):
    raise PresetError(f"{path}: not found; the folder's index names it. Copy "
                      "the whole folder again.")
  with local_files.local_copy(preset_utils.get_file(preset, name)) as local:
    try:
      with safetensors.safe_open(local, framework="np"):
        return
    except Exception as e:  # pylint: disable=broad-except
      problem = f"{fileio.size(local)} bytes; {' '.join(str(e).split())}"
  raise PresetError(f"{path}: not a whole safetensors file ({problem}): the "
                    "file is cut short or damaged; copy or save it again.")


def check_transformers_folder(preset: str, config: Dict) -> None:
  """A Hugging Face folder of RemBERT, with whole safetensors files."""
  model_type = config.get("model_type")
  if model_type != transformers_checkpoint.MODEL_TYPE:
    architectures = ", ".join(config.get("architectures") or []) or "?"
    raise PresetError(
        f"{_file(preset, preset_utils.CONFIG_FILE)}: model_type "
        f"{model_type!r} ({architectures}), not 'rembert': the folder holds "
        "another architecture; load it with that model's keras-hub class.")
  for name in _safetensors_files(preset):
    _check_safetensors_file(preset, name)


class RemBertTransformersLoader(preset_loader.TransformersPresetLoader):
  """keras-hub's Hugging Face loader with the RemBERT converter (keras-hub's own
  list has no RemBERT)."""

  def __init__(self, preset, config):  # pylint: disable=super-init-not-called
    preset_utils.PresetLoader.__init__(self, preset, config)  # pylint: disable=non-parent-init-called
    self.converter = transformers_checkpoint

  def load_backbone(self, cls, load_weights, **kwargs):
    with (transformers_checkpoint.zero_initialised() if load_weights
          else contextlib.nullcontext()):
      return super().load_backbone(cls, load_weights, **kwargs)

  def load_preprocessor(
      self, cls, config_file=preset_utils.PREPROCESSOR_CONFIG_FILE, **kwargs):
    # No preprocessor.json: pack to what the position table covers.
    kwargs.setdefault("sequence_length", min(
        512, self.config.get("max_position_embeddings", 512)))
    return super().load_preprocessor(cls, config_file, **kwargs)

  def load_task(self, cls, load_weights, load_task_weights, **kwargs):
    from rembert_tf.keras_hub import rembert_masked_lm  # pylint: disable=g-import-not-at-top
    if not issubclass(cls, rembert_masked_lm.RemBertMaskedLM):
      return preset_utils.PresetLoader.load_task(
          self, cls, load_weights, load_task_weights, **kwargs)
    kwargs.setdefault("output_embedding_dim",
                      self.config.get("output_embedding_size"))
    head_given = (load_weights and load_task_weights and
                  transformers_checkpoint.has_masked_lm_head(self.preset))
    if load_weights and load_task_weights and not head_given:
      logging.warning(
          "%s holds no masked-LM output side (%s): RemBertMaskedLM starts a "
          "fresh head.", self.preset, transformers_checkpoint.OUTPUT_EMBEDDING)
    # The head is built as zeros only when its weights follow.
    with (transformers_checkpoint.zero_initialised() if head_given
          else contextlib.nullcontext()):
      task = preset_utils.PresetLoader.load_task(
          self, cls, load_weights, load_task_weights, **kwargs)
    if head_given:
      transformers_checkpoint.convert_head(task, self.preset)
    return task


def _from_transformers(cls, preset: str, config: Dict, tokenizer: bool, load):
  """`load(RemBertTransformersLoader)` on a checked Hugging Face folder; a
  tensor the folder lacks becomes one line."""
  check_transformers_folder(preset, config)
  if tokenizer:
    _check_vocabulary(
        preset, transformers_checkpoint.SENTENCEPIECE_FILE, "the tokenizer "
        "needs the SentencePiece model (transformers' RemBertTokenizer saves "
        "it), or pass preprocessor=None.", "")
  try:
    return load(RemBertTransformersLoader(preset, config))
  except transformers_checkpoint.CheckpointError as e:
    weights = (preset_utils.SAFETENSOR_CONFIG_FILE
               if preset_utils.check_file_exists(
                   preset, preset_utils.SAFETENSOR_CONFIG_FILE)
               else preset_utils.SAFETENSOR_FILE)
    raise PresetError(f"{_file(preset, weights)}: {e} (loading "
                      f"{cls.__name__}); save the model again with "
                      "transformers' save_pretrained, or check that "
                      "config.json is its own.") from None


def _backbone_from_preset(cls, preset, load_weights=True, **kwargs):
  config = read_config(preset)
  if "model_type" in config:
    return _from_transformers(cls, preset, config, False, lambda loader: (
        loader.load_backbone(cls, load_weights, **kwargs)))
  check_keras_preset(preset, weights=load_weights)
  return keras_hub.models.Backbone.from_preset.__func__(
      cls, preset, load_weights=load_weights, **kwargs)


def _task_from_preset(cls, preset, load_weights=True, **kwargs):
  config = read_config(preset)
  load_task_weights = "num_classes" not in kwargs
  tokenizer = "preprocessor" not in kwargs
  if "model_type" in config:
    return _from_transformers(cls, preset, config, tokenizer, lambda loader: (
        loader.load_task(cls, load_weights, load_task_weights, **kwargs)))
  own_task = (preset_utils.check_file_exists(preset,
                                             preset_utils.TASK_CONFIG_FILE)
              and _task_class_name(preset) == cls.__name__)
  check_keras_preset(preset, weights=load_weights,
                     task=own_task and load_task_weights, tokenizer=tokenizer)
  return keras_hub.models.Task.from_preset.__func__(
      cls, preset, load_weights=load_weights, **kwargs)


def _config_file_loading(base, default_config_file: str, load: str):
  """`from_preset` of a class built from one config file (a preprocessor, a
  tokenizer), for Hugging Face folders and Keras presets, after their checks."""
  def from_preset(cls, preset, config_file=default_config_file, **kwargs):
    config = read_config(preset)
    if "model_type" in config:
      return _from_transformers(cls, preset, config, True, lambda loader: (
          getattr(loader, load)(cls, config_file, **kwargs)))
    check_keras_preset(preset, weights=False, tokenizer=True)
    return base.from_preset.__func__(cls, preset, config_file=config_file,
                                     **kwargs)
  return from_preset


_FROM_PRESET = (
    (keras_hub.models.Backbone, _backbone_from_preset),
    (keras_hub.models.Task, _task_from_preset),
    (keras_hub.models.Preprocessor, _config_file_loading(
        keras_hub.models.Preprocessor, preset_utils.PREPROCESSOR_CONFIG_FILE,
        "load_preprocessor")),
    (keras_hub.tokenizers.Tokenizer, _config_file_loading(
        keras_hub.tokenizers.Tokenizer, preset_utils.TOKENIZER_CONFIG_FILE,
        "load_tokenizer")))


def attach(classes) -> None:
  """Gives each RemBERT class the `from_preset` above, keeping keras-hub's docstring."""
  for cls in classes:
    for base, from_preset in _FROM_PRESET:
      if issubclass(cls, base):
        def bound(klass, preset, *args, _load=from_preset, **kwargs):
          return _load(klass, preset, *args, **kwargs)
        bound.__doc__ = base.from_preset.__doc__
        bound.__name__ = "from_preset"
        cls.from_preset = classmethod(bound)
        break

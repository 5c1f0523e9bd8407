"""Hugging Face RemBERT folders (`model_type: "rembert"`): keras-hub's converter for them.

The module keras-hub's `TransformersPresetLoader` calls by `model_type`,
written as keras-hub's `convert_bert.py`; it holds about one copy of the
model while loading (the file is unmapped after each tensor, the weights
about to be read are built as zeros).
"""
import contextlib

import keras
import numpy as np
from absl import logging
from keras_hub.src.utils import preset_utils
from keras_hub.src.utils.transformers import safetensor_utils

from rembert_tf.conversion import weight_layout
from rembert_tf.keras_hub import canonical_weights
from rembert_tf.keras_hub import rembert_backbone

MODEL_TYPE = "rembert"
SENTENCEPIECE_FILE = "sentencepiece.model"
# The weights' prefix in task models (`RemBertForMaskedLM`, ...);
# `RemBertModel` writes its names without it.
BASE_MODEL_PREFIX = "rembert."
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
OUTPUT_EMBEDDING = "cls.predictions.decoder.weight"
POOLER = "bert/pooler/"

backbone_cls = rembert_backbone.RemBertBackbone   # read by keras-hub's loader


class CheckpointError(ValueError):
  """The folder's weights are not those of the RemBERT its config.json
  describes (a tensor missing, not a RemBERT model's)."""


def convert_backbone_config(transformers_config):
  """RemBertBackbone's arguments from a Hugging Face `config.json`."""
  config = dict(transformers_config)
  act = config.get("hidden_act", "gelu")
  config["hidden_act"] = weight_layout.HF_ACTIVATIONS.get(act, act)
  return rembert_backbone.backbone_kwargs(config)


class UnmappingSafetensorLoader(safetensor_utils.SafetensorLoader):
  """keras-hub's SafetensorLoader, unmapping the file after each tensor (an
  open memory map keeps every page read resident: a second copy)."""

  def get_tensor(self, hf_weight_key):
    try:
      return super().get_tensor(hf_weight_key)
    finally:
      self.close()
      self.safetensor_files.clear()

  def tensor_names(self):
    """Every tensor name the folder holds (headers only)."""
    if self.safetensor_config is not None:
      return set(self.safetensor_config["weight_map"])
    path = preset_utils.get_file(self.preset, preset_utils.SAFETENSOR_FILE)
    with safetensor_utils.safetensors.safe_open(path, framework="np") as file:
      return set(file.keys())


@contextlib.contextmanager
def zero_initialised():
  """RemBERT's layers built inside start with zeros (for weights overwritten at once)."""
  random_initializer = rembert_backbone.kernel_initializer
  rembert_backbone.kernel_initializer = lambda stddev: keras.initializers.Zeros()
  try:
    yield
  finally:
    rembert_backbone.kernel_initializer = random_initializer


def weights_prefix(names) -> str:
  """"rembert." for a task model's weights, "" for `RemBertModel`'s."""
  for prefix in (BASE_MODEL_PREFIX, ""):
    if prefix + WORD_EMBEDDINGS in names:
      return prefix
  raise CheckpointError(
      f"no {BASE_MODEL_PREFIX}{WORD_EMBEDDINGS} nor {WORD_EMBEDDINGS}: the "
      "weights are not a RemBERT model's.")


def _port(reader, pairs, prefix: str, names) -> None:
  """Assigns each (canonical name, variable) its Hugging Face tensor, one at
  a time (torch [out, in] kernels transposed, then keras-hub's shapes); a
  tensor the folder lacks is an error naming it, before any is read."""
  ported = [(*weight_layout.hf_name(c, prefix), v) for c, v in pairs]
  for name, _, _ in ported:
    if name not in names:
      raise CheckpointError(f"no tensor {name}, which a RemBERT model of this "
                            "config.json has")
  for name, transpose, variable in ported:
    reader.port_weight(
        keras_variable=variable, hf_weight_key=name,
        hook_fn=lambda tensor, shape, t=transpose: np.reshape(
            np.transpose(tensor) if t else tensor, shape))


def _check_dropped_projection(loader, transformers_config, prefix) -> None:
  """E_in == hidden: the backbone has no projection, Hugging Face always
  has one; it must be the identity to be dropped."""
  kernel = loader.get_tensor(weight_layout.hf_name(
      weight_layout.PROJECTION_KERNEL, prefix=prefix)[0])
  bias = loader.get_tensor(weight_layout.hf_name(
      weight_layout.PROJECTION_BIAS, prefix=prefix)[0])
  if not weight_layout.is_identity_projection(np.transpose(kernel), bias):
    raise CheckpointError(
        "config.json: input_embedding_size equals hidden_size "
        f"({transformers_config['hidden_size']}) but the checkpoint's "
        "embedding projection is not the identity; RemBertBackbone has no "
        "projection at equal widths. Convert with `rembert-convert --from hf "
        "--to rembert_tf` instead.")


def _initialise_pooler(backbone) -> None:
  """The pooler as the layer builds it (truncated normal kernel, zero bias),
  for a folder without one; built as zeros beside the loaded weights."""
  dense = backbone.pooled_dense
  # The backbone's own initialiser (truncated normal): this runs while
  # `zero_initialised` replaces `kernel_initializer`.
  initializer = keras.initializers.TruncatedNormal(
      stddev=backbone.initializer_range)
  dense.kernel.assign(initializer(dense.kernel.shape, dense.kernel.dtype))
  dense.bias.assign(keras.ops.zeros(dense.bias.shape, dense.bias.dtype))


def convert_weights(backbone, loader, transformers_config):
  """The backbone's weights from the safetensors, read with a loader that unmaps."""
  pairs = canonical_weights.canonical_variables(backbone)
  with UnmappingSafetensorLoader(loader.preset) as reader:
    names = reader.tensor_names()
    prefix = weights_prefix(names)
    pooler_name = weight_layout.hf_name(POOLER + "dense/kernel", prefix)[0]
    if pooler_name not in names:
      pairs = [(c, v) for c, v in pairs if not c.startswith(POOLER)]
      _initialise_pooler(backbone)
      logging.warning(
          "%s holds no pooler (%s, as RemBertForMaskedLM writes): "
          "pooled_output comes from a freshly initialised pooler; fine-tune "
          "before using it.", loader.preset, pooler_name)
    if backbone.embeddings_projection is None:
      _check_dropped_projection(reader, transformers_config, prefix)
    _port(reader, pairs, prefix, names)


def convert_head(task, preset):
  """RemBertMaskedLM's decoupled output side, from a folder that holds it
  (`RemBertForMaskedLM`)."""
  pairs = [(name, variable) for name, variable in
           canonical_weights.canonical_variables(task.backbone,
                                                 task.masked_lm_head)
           if name.startswith("cls/")]
  with UnmappingSafetensorLoader(preset, prefix="") as reader:
    _port(reader, pairs, "", reader.tensor_names())


def has_masked_lm_head(preset) -> bool:
  with UnmappingSafetensorLoader(preset, prefix="") as reader:
    return OUTPUT_EMBEDDING in reader.tensor_names()


def convert_tokenizer(cls, preset, **kwargs):
  return cls(proto=preset_utils.get_file(preset, SENTENCEPIECE_FILE), **kwargs)

"""Hugging Face RemBERT folders through `from_preset`, as keras-hub loads its own.

A local folder with `config.json` (`model_type: "rembert"`),
`model.safetensors` (or shards) and `sentencepiece.model`, as
`rembert-convert --to hf` and transformers' `RemBertModel` /
`RemBertForMaskedLM` write it, loads with `RemBertBackbone.from_preset(path)`,
`RemBertMaskedLM.from_preset(path)` (with the decoupled output side when the
folder has it) and every task's `from_preset`; no conversion step.

Builds on keras-hub's Hugging Face loading: `TransformersPresetLoader`
(keras_hub/src/utils/transformers/preset_loader.py) picks a converter module
by `model_type` and calls its `convert_backbone_config`, `convert_weights`
and `convert_tokenizer`, reading weights with keras-hub's `SafetensorLoader`
(safetensors' `safe_open`). This module is that converter for RemBERT. It
holds about one copy of the model while it loads: it reads through
`UnmappingSafetensorLoader`, which closes the file after every tensor
(`safe_open` memory-maps the file, and every page read stays resident,
counted in the process's memory, until the file is closed), and the weights
it is about to overwrite are built as zeros (`zero_initialised`), not drawn
at random (`bench/hf_from_preset_memory.py` measures the peak). keras-hub chooses its converters in a fixed
`if` chain with no registry, so `install()` (run by importing
`rembert_tf.keras_hub`) puts a subclass of that loader in its place, which
answers `model_type: "rembert"` and hands every other type to keras-hub; this
is the project's only hook into keras-hub's internals, and
tests/keras3/harness_checks.py fails if keras-hub changes what it relies on.

Example:
<!-- snippet: not run: needs a Hugging Face RemBERT folder (the suite loads a tiny one) -->
```python
from rembert_tf.keras_hub import RemBertMaskedLM
masked_lm = RemBertMaskedLM.from_preset("hf/rembert")   # a Hugging Face folder
```
"""
import contextlib
import sys

import keras
import numpy as np
from keras_hub.src.utils import preset_utils
from keras_hub.src.utils.transformers import preset_loader
from keras_hub.src.utils.transformers import safetensor_utils

from rembert_tf.conversion import weight_layout
from rembert_tf.keras_hub import canonical_weights
from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_masked_lm

MODEL_TYPE = "rembert"
SENTENCEPIECE_FILE = "sentencepiece.model"
# Hugging Face's names of RemBERT's activations -> the backbone's.
HF_ACTIVATIONS = {"gelu_new": "gelu_approx", "gelu_pytorch_tanh": "gelu_approx",
                  "silu": "swish"}

backbone_cls = rembert_backbone.RemBertBackbone   # read by keras-hub's loader


def convert_backbone_config(transformers_config):
  """RemBertBackbone's arguments from a Hugging Face `config.json`."""
  config = dict(transformers_config)
  act = config.get("hidden_act", "gelu")
  config["hidden_act"] = HF_ACTIVATIONS.get(act, act)
  return rembert_backbone.backbone_kwargs(config)


class UnmappingSafetensorLoader(safetensor_utils.SafetensorLoader):
  """keras-hub's SafetensorLoader, unmapping the file after each tensor.

  Held open through a whole model, safetensors' memory map keeps the pages
  of every tensor read resident: a second copy of the weights beside the
  model's variables. Reopening costs a header parse per tensor (a few
  hundred for RemBERT), no tensor data.
  """

  def get_tensor(self, hf_weight_key):
    try:
      return super().get_tensor(hf_weight_key)
    finally:
      self.close()
      self.safetensor_files.clear()


@contextlib.contextmanager
def zero_initialised():
  """RemBERT's layers built inside start with zeros, not random draws.

  For weights that are overwritten at once: on TensorFlow a random initial
  value costs about three times its size (the draw and its temporaries,
  kept by the process), zeros one copy. Every random initialiser of the
  backbone and the masked-LM head comes from `kernel_initializer`.
  """
  random_initializer = rembert_backbone.kernel_initializer
  rembert_backbone.kernel_initializer = lambda stddev: keras.initializers.Zeros()
  try:
    yield
  finally:
    rembert_backbone.kernel_initializer = random_initializer


def _port(loader, pairs) -> None:
  """Assigns each canonical tensor, read by its Hugging Face name, one at a
  time (torch [out, in] kernels transposed, then keras-hub's shapes)."""
  for canonical, variable in pairs:
    name, transpose = weight_layout.hf_name(canonical)
    loader.port_weight(
        keras_variable=variable, hf_weight_key=name,
        hook_fn=lambda tensor, shape, t=transpose: np.reshape(
            np.transpose(tensor) if t else tensor, shape))


def _check_dropped_projection(loader, transformers_config) -> None:
  """E_in == hidden: the backbone has no projection, Hugging Face always
  has one; it must be the identity to be dropped."""
  kernel = loader.get_tensor(
      weight_layout.hf_name(weight_layout.PROJECTION_KERNEL)[0])
  bias = loader.get_tensor(weight_layout.hf_name(
      weight_layout.PROJECTION_KERNEL.replace("/kernel", "/bias"))[0])
  if not weight_layout.is_identity_projection(np.transpose(kernel), bias):
    raise ValueError(
        "config.json: input_embedding_size equals hidden_size "
        f"({transformers_config['hidden_size']}) but the checkpoint's "
        "embedding projection is not the identity; RemBertBackbone has no "
        "projection at equal widths. Convert with `rembert-convert --from hf "
        "--to rembert_tf` instead.")


def convert_weights(backbone, loader, transformers_config):
  """The backbone's weights from the safetensors (keras-hub calls this, with
  its own loader, which has opened nothing yet: read with one that unmaps)."""
  pairs = canonical_weights.canonical_variables(backbone)
  with UnmappingSafetensorLoader(loader.preset) as reader:
    if backbone.embeddings_projection is None:
      _check_dropped_projection(reader, transformers_config)
    _port(reader, pairs)


def convert_tokenizer(cls, preset, **kwargs):
  return cls(proto=preset_utils.get_file(preset, SENTENCEPIECE_FILE), **kwargs)


def _load_masked_lm_head(task, preset) -> None:
  pairs = [(name, variable) for name, variable in
           canonical_weights.canonical_variables(task.backbone,
                                                 task.masked_lm_head)
           if name.startswith("cls/")]
  with UnmappingSafetensorLoader(preset, prefix="") as loader:
    _port(loader, pairs)


class RemBertAwarePresetLoader(preset_loader.TransformersPresetLoader):
  """keras-hub's Hugging Face loader, answering `model_type: "rembert"`."""

  def __init__(self, preset, config):
    if config.get("model_type") != MODEL_TYPE:
      super().__init__(preset, config)
      return
    preset_utils.PresetLoader.__init__(self, preset, config)  # pylint: disable=non-parent-init-called
    self.converter = sys.modules[__name__]

  def load_backbone(self, cls, load_weights, **kwargs):
    if self.converter is not sys.modules[__name__] or not load_weights:
      return super().load_backbone(cls, load_weights, **kwargs)
    with zero_initialised():
      return super().load_backbone(cls, load_weights, **kwargs)

  def load_preprocessor(
      self, cls, config_file=preset_utils.PREPROCESSOR_CONFIG_FILE, **kwargs):
    if self.converter is sys.modules[__name__]:
      # No preprocessor.json: pack to what the position table covers.
      kwargs.setdefault("sequence_length", min(
          512, self.config.get("max_position_embeddings", 512)))
    return super().load_preprocessor(cls, config_file, **kwargs)

  def load_task(self, cls, load_weights, load_task_weights, **kwargs):
    if self.converter is not sys.modules[__name__] or not issubclass(
        cls, rembert_masked_lm.RemBertMaskedLM):
      return super().load_task(cls, load_weights, load_task_weights, **kwargs)
    kwargs.setdefault("output_embedding_dim",
                      self.config.get("output_embedding_size"))
    head_given = load_weights and load_task_weights and (
        "RemBertForMaskedLM" in (self.config.get("architectures") or []))
    # The head is built as zeros only when its weights follow.
    with zero_initialised() if head_given else contextlib.nullcontext():
      task = preset_utils.PresetLoader.load_task(
          self, cls, load_weights, load_task_weights, **kwargs)
    if head_given:
      _load_masked_lm_head(task, self.preset)
    return task


def install() -> None:
  """Makes keras-hub's `from_preset` use `RemBertAwarePresetLoader` for
  Hugging Face folders (keras-hub imports the loader class from its module
  each time it opens one)."""
  preset_loader.TransformersPresetLoader = RemBertAwarePresetLoader

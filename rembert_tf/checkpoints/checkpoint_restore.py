"""Reading a checkpoint source's encoder into a model.

`load_encoder(source)` builds the encoder of the source's model config
(`model_config_of`) and restores it; `restore_encoder` reads into a built
one. The output side, the optimizer and the step are never read (the
pre-trainer with its output side: `pretrainer_restore`). The encoder node is
found by its children and read in bounded batches (`checkpoint_reading`);
what a source is: `checkpoint_layout`.

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
from rembert_tf.checkpoints import checkpoint_restore
cfg, encoder = checkpoint_restore.load_encoder("converted/rembert")   # or a SavedModel
```
"""
import contextlib
from typing import Iterator, Tuple

import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.checkpoints.checkpoint_layout import CheckpointError
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder

# A node is the encoder when it has these children.
_ENCODER_CHILDREN = frozenset({"_embedding_layer", "_transformer_layers",
                               "_pooler_layer"})


def model_config_of(source, config: checkpoint_layout.ModelConfigLike = None
                    ) -> rembert_config.RemBertConfig:
  """The model config of a source, or `config` (preset / YAML / object),
  which must agree with the source's own (the error lists each difference)."""
  resolved = checkpoint_layout.resolve(source)
  stored = (checkpoint_layout.read_model_config(resolved.model_config)
            if resolved.model_config else None)
  if config is None and stored is None:
    raise CheckpointError(
        f"{resolved.path}: no {checkpoint_layout.MODEL_CONFIG_FILE} beside the "
        "checkpoint; pass the model config (--model_config / --config: a "
        "configs/models/ name or a YAML file).")
  if config is None:
    return stored
  given = (config if isinstance(config, rembert_config.RemBertConfig)
           else rembert_config.load_model_config(config))
  diff = [f"{k}: {resolved.model_config} has {v!r}, the given config has "
          f"{given.as_dict()[k]!r}"
          for k, v in (stored.as_dict().items() if stored else ())
          if given.as_dict()[k] != v]
  if diff:
    name = ("the given config" if config is given else config)
    raise CheckpointError(
        f"{resolved.model_config} and {name} disagree: " + "; ".join(diff) +
        ". Drop the config argument to use the checkpoint's own config.")
  return given


def restore_encoder(encoder: rembert_encoder.RemBertEncoder, source) -> str:
  """Reads the encoder's weights (nothing else) from any checkpoint source;
  returns the prefix."""
  prefix = checkpoint_layout.resolve(source).encoder_checkpoint
  checkpoint_reading.read_node(
      encoder, prefix, _ENCODER_CHILDREN, "encoder (a RemBertEncoder node: "
      f"children {', '.join(sorted(_ENCODER_CHILDREN))})")
  return prefix


@contextlib.contextmanager
def zero_initialized_variables() -> Iterator[None]:
  """Variables created in this block start as zeros, for a model whose every
  variable a checkpoint overwrites (random initializers keep about twice the
  variable's size of scratch memory resident)."""
  def zeros_creator(next_creator, **kwargs):
    shape, dtype = kwargs.get("shape"), kwargs.get("dtype")
    if (shape is not None and tf.TensorShape(shape).is_fully_defined()
        and dtype is not None and callable(kwargs.get("initial_value"))):
      shape, dtype = tf.TensorShape(shape), tf.as_dtype(dtype)
      kwargs["initial_value"] = lambda: tf.zeros(shape, dtype.base_dtype)
    return next_creator(**kwargs)

  with tf.variable_creator_scope(zeros_creator):
    yield


def load_encoder(source, config: checkpoint_layout.ModelConfigLike = None
                 ) -> Tuple[rembert_config.RemBertConfig,
                            rembert_encoder.RemBertEncoder]:
  """Builds the encoder of a checkpoint source and restores its weights."""
  resolved = checkpoint_layout.resolve(source)
  cfg = model_config_of(resolved, config)
  with zero_initialized_variables():  # every variable is restored below
    encoder = rembert_encoder.build_encoder(cfg)
  restore_encoder(encoder, resolved)
  return cfg, encoder

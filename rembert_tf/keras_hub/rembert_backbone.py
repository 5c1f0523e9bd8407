"""RemBertBackbone: the RemBERT encoder as a keras-hub `Backbone` (Keras 3).

Builds on keras-hub's `Backbone`, `PositionEmbedding` and
`TransformerEncoder`, laid out as keras-hub's ALBERT lays out its factorised
embedding, with RemBERT's epsilon, exact GELU and unshared blocks. The
output side belongs to `RemBertMaskedLM`.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
import numpy as np
from rembert_tf.keras_hub import RemBertBackbone
backbone = RemBertBackbone(vocabulary_size=1000, num_layers=2, num_heads=2,
                           hidden_dim=32, intermediate_dim=64, embedding_dim=16,
                           max_sequence_length=64)
outputs = backbone({"token_ids": np.ones([2, 12], "int32"),
                    "segment_ids": np.zeros([2, 12], "int32"),
                    "padding_mask": np.ones([2, 12], "int32")})
outputs["sequence_output"].shape   # (2, 12, 32)
outputs["pooled_output"].shape     # (2, 32)
```
"""
from typing import Any, Dict, Mapping

import keras
import keras_hub
import numpy as np

from rembert_tf.common import errors


@keras.saving.register_keras_serializable(package="rembert_tf")
def gelu_approx(x):
  """GELU with the tanh approximation (original BERT; `hidden_act: gelu_approx`)."""
  return keras.activations.gelu(x, approximate=True)


# RemBERT config names (`hidden_act`) -> Keras activations. "gelu" is the
# exact (erf) GELU of the released model: Keras' gelu defaults to it.
ACTIVATIONS = {"gelu": keras.activations.gelu, "gelu_approx": gelu_approx,
               "relu": keras.activations.relu, "tanh": keras.activations.tanh,
               "swish": keras.activations.silu}


def activation(name: str):
  """The Keras activation of a RemBERT `hidden_act` name."""
  if name not in ACTIVATIONS:
    raise ValueError(f"hidden_act {name!r} is not supported; expected one of "
                     f"{', '.join(ACTIVATIONS)}.")
  return ACTIVATIONS[name]


# RemBERT config field -> RemBertBackbone argument, and the field's default
# when a config lacks it (None: required).
_BACKBONE_ARGUMENTS = (
    ("vocab_size", "vocabulary_size", None),
    ("num_hidden_layers", "num_layers", None),
    ("num_attention_heads", "num_heads", None),
    ("hidden_size", "hidden_dim", None),
    ("intermediate_size", "intermediate_dim", None),
    ("input_embedding_size", "embedding_dim", None),
    ("hidden_act", "hidden_act", "gelu"),
    ("hidden_dropout_prob", "dropout", 0.0),
    ("max_position_embeddings", "max_sequence_length", 512),
    ("type_vocab_size", "num_segments", 2),
    ("layer_norm_eps", "layer_norm_epsilon", 1e-12),
    ("initializer_range", "initializer_range", 0.02))


def backbone_kwargs(model_config: Mapping[str, Any]) -> Dict[str, Any]:
  """RemBertBackbone's arguments from RemBERT config fields (model YAML or `config.json` keys)."""
  return {argument: (model_config[field] if default is None
                     else model_config.get(field, default))
          for field, argument, default in _BACKBONE_ARGUMENTS}


def model_config_fields(backbone_config: Mapping[str, Any]) -> Dict[str, Any]:
  """RemBERT config fields of a RemBertBackbone config (`backbone_kwargs`'
  inverse); the backbone's one dropout rate is both of RemBERT's."""
  fields = {field: backbone_config[argument]
            for field, argument, _ in _BACKBONE_ARGUMENTS}
  fields["attention_probs_dropout_prob"] = fields["hidden_dropout_prob"]
  return fields


def kernel_initializer(stddev: float):
  return keras.initializers.TruncatedNormal(stddev=stddev)


def head_dense(backbone, units: int, name: str, activation=None):
  """A task head's dense layer: the backbone's initialiser range and dtype
  policy (what every RemBERT task puts on the backbone's outputs)."""
  return keras.layers.Dense(
      units, activation=activation,
      kernel_initializer=kernel_initializer(backbone.initializer_range),
      dtype=backbone.dtype_policy, name=name)


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertBackbone(keras_hub.models.Backbone):
  """RemBERT encoder: factorised input embedding, post-LN blocks, tanh pooler.

  Inputs (int32, [batch, seq]): `token_ids`, `segment_ids`, `padding_mask`.
  Outputs: `sequence_output` [batch, seq, hidden_dim], `pooled_output`
  [batch, hidden_dim].

  Args:
    vocabulary_size: SentencePiece vocabulary size.
    num_layers: Transformer blocks.
    num_heads: attention heads; must divide `hidden_dim`.
    hidden_dim: Transformer width.
    intermediate_dim: feed-forward inner width.
    embedding_dim: E_in, the width of the embedding tables.
    hidden_act: "gelu" (exact), "gelu_approx", "relu", "tanh" or "swish".
    dropout: on embeddings, attention probabilities and block outputs.
    max_sequence_length: positions the position table covers.
    num_segments: segment (token type) ids.
    layer_norm_epsilon: epsilon of every LayerNorm.
    initializer_range: stddev of the truncated-normal initialiser.
    dtype: a Keras dtype policy (e.g. "mixed_bfloat16").
  """

  def __init__(self,
               vocabulary_size,
               num_layers,
               num_heads,
               hidden_dim,
               intermediate_dim,
               embedding_dim,
               hidden_act="gelu",
               dropout=0.0,
               max_sequence_length=512,
               num_segments=2,
               layer_norm_epsilon=1e-12,
               initializer_range=0.02,
               dtype=None,
               **kwargs):
    if hidden_dim % num_heads:
      raise ValueError(f"hidden_dim ({hidden_dim}) is not divisible by "
                       f"num_heads ({num_heads}).")
    # === Layers ===
    init = lambda: kernel_initializer(initializer_range)
    self._build_embeddings(vocabulary_size, embedding_dim, hidden_dim,
                           max_sequence_length, num_segments,
                           layer_norm_epsilon, dropout, init, dtype)
    self.transformer_layers = [
        keras_hub.layers.TransformerEncoder(
            num_heads=num_heads, intermediate_dim=intermediate_dim,
            activation=activation(hidden_act), dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon, kernel_initializer=init(),
            dtype=dtype, name=f"transformer_layer_{i}")
        for i in range(num_layers)]
    self.pooled_dense = keras.layers.Dense(
        hidden_dim, kernel_initializer=init(), activation="tanh", dtype=dtype,
        name="pooled_dense")

    # === Functional model ===
    inputs, outputs = self._connect_layers()
    super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

    # === Config ===
    self.vocabulary_size = vocabulary_size
    self.num_layers = num_layers
    self.num_heads = num_heads
    self.hidden_dim = hidden_dim
    self.intermediate_dim = intermediate_dim
    self.embedding_dim = embedding_dim
    self.hidden_act = hidden_act
    self.dropout = dropout
    self.max_sequence_length = max_sequence_length
    self.num_segments = num_segments
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range

  def _build_embeddings(self, vocabulary_size, embedding_dim, hidden_dim,
                        max_sequence_length, num_segments, layer_norm_epsilon,
                        dropout, init, dtype):
    """Word, position and segment tables of width E_in, their LayerNorm and
    dropout, and the E_in -> hidden projection when the widths differ."""
    self.token_embedding = keras.layers.Embedding(
        vocabulary_size, embedding_dim, embeddings_initializer=init(),
        dtype=dtype, name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        sequence_length=max_sequence_length, initializer=init(), dtype=dtype,
        name="position_embedding")
    self.segment_embedding = keras.layers.Embedding(
        num_segments, embedding_dim, embeddings_initializer=init(),
        dtype=dtype, name="segment_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
    self.embeddings_layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm")
    self.embeddings_dropout = keras.layers.Dropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.embeddings_projection = None
    if embedding_dim != hidden_dim:
      self.embeddings_projection = keras.layers.Dense(
          hidden_dim, kernel_initializer=init(), dtype=dtype,
          name="embeddings_projection")

  def _connect_layers(self):
    """The functional graph: inputs -> embeddings -> blocks -> pooled [CLS]."""
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32",
                               name="padding_mask")
    tokens = self.token_embedding(token_ids)
    x = self.embeddings_add((tokens, self.position_embedding(tokens),
                             self.segment_embedding(segment_ids)))
    x = self.embeddings_dropout(self.embeddings_layer_norm(x))
    if self.embeddings_projection is not None:
      x = self.embeddings_projection(x)
    for layer in self.transformer_layers:
      x = layer(x, padding_mask=padding_mask)
    pooled = self.pooled_dense(x[:, 0, :])
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
              "padding_mask": padding_mask}
    return inputs, {"sequence_output": x, "pooled_output": pooled}

  def load_weights(self, filepath, *args, **kwargs):
    """Keras' `load_weights`, refused when the file holds the weights of
    another architecture: Keras loads a preset whose config.json was edited
    to fewer layers without a word."""
    check_weights_file(self, str(filepath))
    return super().load_weights(filepath, *args, **kwargs)

  def get_config(self):
    config = super().get_config()
    config.update(
        vocabulary_size=self.vocabulary_size, num_layers=self.num_layers,
        num_heads=self.num_heads, hidden_dim=self.hidden_dim,
        intermediate_dim=self.intermediate_dim,
        embedding_dim=self.embedding_dim, hidden_act=self.hidden_act,
        dropout=self.dropout, max_sequence_length=self.max_sequence_length,
        num_segments=self.num_segments,
        layer_norm_epsilon=self.layer_norm_epsilon,
        initializer_range=self.initializer_range)
    return config


class WeightsMismatchError(errors.InputError):
  """A weights file does not hold the weights of the model given."""


def check_weights_file(model, filepath: str) -> None:
  """Raises WeightsMismatchError unless `filepath` (a Keras `.weights.h5`)
  holds as many tensors and values as `model`; other formats pass."""
  if not filepath.endswith(".weights.h5"):
    return
  import h5py  # pylint: disable=g-import-not-at-top
  sizes = []
  with h5py.File(filepath, "r") as f:
    f.visititems(lambda _, item: sizes.append(item.size)
                 if isinstance(item, h5py.Dataset) else None)
  held = (len(sizes), sum(sizes))
  wanted = (len(model.weights),
            sum(int(np.prod(w.shape)) for w in model.weights))
  if held != wanted:
    raise WeightsMismatchError(
        f"{filepath}: holds {held[0]} tensors ({held[1]} values), but the "
        f"config beside it builds a {type(model).__name__} of {wanted[0]} "
        f"({wanted[1]} values; num_layers {getattr(model, 'num_layers', '?')}"
        "): the config does not match the weights. Restore the preset's "
        "config.json, or convert the checkpoint again.")

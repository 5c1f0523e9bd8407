"""RemBertMaskedLMHead: the decoupled masked-LM output side as a Keras 3 layer.

Builds on the layout of keras-hub's `MaskedLMHead` (gather, dense,
LayerNorm, logits, bias), but the transform projects to E_out and the logits
multiply by a separate [vocabulary_size, E_out] output embedding, the
variables of the project's `DecoupledMaskedLM`.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
import numpy as np
head = RemBertMaskedLMHead(vocabulary_size=1000, output_embedding_dim=48)
logits = head(np.random.rand(2, 16, 32).astype("float32"),
              np.array([[1, 5, 0], [2, 3, 4]]))
logits.shape                   # (2, 3, 1000)
head.output_embedding.shape    # (1000, 48)
```
"""
import keras
from keras import ops

from rembert_tf.keras_hub import rembert_backbone


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertMaskedLMHead(keras.layers.Layer):
  """Gather -> dense to E_out -> activation -> LayerNorm -> logits + bias.

  Call it on `(sequence_output [batch, seq, hidden], mask_positions [batch,
  predictions])`; returns logits [batch, predictions, vocabulary_size].

  Args:
    vocabulary_size: rows of the output embedding (the logits' width).
    output_embedding_dim: E_out, width of the transform and output embedding.
    hidden_act: the transform's activation (RemBERT names: "gelu", ...).
    layer_norm_epsilon: epsilon of the transform's LayerNorm.
    initializer_range: stddev of the truncated-normal initialiser.
  """

  def __init__(self, vocabulary_size, output_embedding_dim, hidden_act="gelu",
               layer_norm_epsilon=1e-12, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.vocabulary_size = vocabulary_size
    self.output_embedding_dim = output_embedding_dim
    self.hidden_act = hidden_act
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer_range = initializer_range

  def build(self, inputs_shape, mask_positions_shape=None):
    self.transform_dense = keras.layers.Dense(
        self.output_embedding_dim,
        activation=rembert_backbone.activation(self.hidden_act),
        kernel_initializer=rembert_backbone.kernel_initializer(
            self.initializer_range),
        dtype=self.dtype_policy, name="transform_dense")
    self.transform_dense.build((None, None, inputs_shape[-1]))
    self.transform_layer_norm = keras.layers.LayerNormalization(
        epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy,
        name="transform_layer_norm")
    self.transform_layer_norm.build((None, None, self.output_embedding_dim))
    self.output_embedding = self.add_weight(
        name="output_embedding",
        shape=(self.vocabulary_size, self.output_embedding_dim),
        initializer=rembert_backbone.kernel_initializer(
            self.initializer_range))
    self.output_bias = self.add_weight(
        name="output_bias", shape=(self.vocabulary_size,),
        initializer="zeros")
    self.built = True

  def call(self, inputs, mask_positions):
    positions = ops.expand_dims(ops.cast(mask_positions, "int32"), axis=-1)
    x = ops.take_along_axis(inputs, positions, axis=1)
    x = self.transform_layer_norm(self.transform_dense(x))
    table = ops.cast(self.output_embedding, x.dtype)
    logits = ops.matmul(x, ops.transpose(table))
    return logits + ops.cast(self.output_bias, logits.dtype)

  def compute_output_shape(self, inputs_shape, mask_positions_shape):
    return tuple(mask_positions_shape) + (self.vocabulary_size,)

  def get_config(self):
    config = super().get_config()
    config.update(vocabulary_size=self.vocabulary_size,
                  output_embedding_dim=self.output_embedding_dim,
                  hidden_act=self.hidden_act,
                  layer_norm_epsilon=self.layer_norm_epsilon,
                  initializer_range=self.initializer_range)
    return config

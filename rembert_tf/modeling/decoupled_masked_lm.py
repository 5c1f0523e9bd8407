"""DecoupledMaskedLM: the MLM head with its own output embedding (pre-training only).

Builds on Model Garden's `layers.MaskedLM`, but the transform projects to the
output width E_out and the logits use the head's own [vocab_size, E_out]
table (`embedding_table` gives the coupled BERT baseline). Logits are
computed at the masked positions only.

Example:
<!-- snippet: not run: a fragment: `DecoupledMaskedLM` comes from the caller's code -->
```python
head = DecoupledMaskedLM(vocab_size=2000, output_embedding_size=256)
logits = head(tf.random.normal([2, 16, 128]),
              masked_positions=tf.constant([[1, 5, 0], [2, 3, 4]]))
logits.shape   # [2, 3, 2000]
```
"""
from typing import Optional

import tensorflow as tf
import tf_keras
from official.modeling import tf_utils

from rembert_tf.modeling import activations


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
class DecoupledMaskedLM(tf_keras.layers.Layer):
  """Masked-LM head: gather, dense -> E_out, activation, LayerNorm, logits.

  Args:
    vocab_size: Rows of the output embedding (= logits width).
    output_embedding_size: E_out, width of the transform and output embedding.
    hidden_act: Activation name of the transform (`gelu`, `gelu_approx`, ...).
    initializer_range: Stddev of the truncated-normal initialiser.
    layer_norm_eps: Epsilon of the transform's LayerNorm.
    embedding_table: Coupled mode only: the encoder's input word-embedding
      variable ([vocab_size, output_embedding_size]) to share. Not part of
      `get_config`; pass it again when rebuilding a coupled head.
  """

  def __init__(self,
               vocab_size: int,
               output_embedding_size: int,
               hidden_act: str = "gelu",
               initializer_range: float = 0.02,
               layer_norm_eps: float = 1e-12,
               embedding_table: Optional[tf.Variable] = None,
               **kwargs):
    super().__init__(**kwargs)
    if embedding_table is not None:
      table_shape = tuple(embedding_table.shape)
      if table_shape != (vocab_size, output_embedding_size):
        raise ValueError(
            "coupled DecoupledMaskedLM: the shared embedding table has shape "
            f"{table_shape}, but the head needs (vocab_size, "
            f"output_embedding_size) = ({vocab_size}, {output_embedding_size}).")
    self._vocab_size = vocab_size
    self._output_embedding_size = output_embedding_size
    self._hidden_act = hidden_act
    self._initializer_range = initializer_range
    self._layer_norm_eps = layer_norm_eps
    self._shared_table = embedding_table
    initializer = tf_keras.initializers.TruncatedNormal(stddev=initializer_range)
    self._initializer = initializer
    self.dense = tf_keras.layers.Dense(
        output_embedding_size,
        activation=activations.get(hidden_act),
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name="transform/dense")
    # float32 LayerNorm keeps the softmax input accurate under mixed_bfloat16.
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=layer_norm_eps, dtype=tf.float32,
        name="transform/LayerNorm")

  @property
  def coupled(self) -> bool:
    return self._shared_table is not None

  def build(self, input_shape):
    if self._shared_table is None:
      self.output_embedding = self.add_weight(
          "output_embedding",
          shape=(self._vocab_size, self._output_embedding_size),
          initializer=tf_utils.clone_initializer(self._initializer),
          trainable=True)
    else:
      self.output_embedding = self._shared_table
    self.bias = self.add_weight(
        "output_bias", shape=(self._vocab_size,), initializer="zeros",
        trainable=True)
    super().build(input_shape)

  def call(self, sequence_data, masked_positions):
    batch_size = (sequence_data.shape[0] or tf.shape(sequence_data)[0])
    num_predictions = (masked_positions.shape[1]
                       or tf.shape(masked_positions)[1])
    x = tf.gather(sequence_data, masked_positions, batch_dims=1)
    x = self.dense(x)
    x = self.layer_norm(x)
    table = tf.cast(self.output_embedding, self.compute_dtype)
    x = tf.cast(x, self.compute_dtype)
    logits = tf.matmul(tf.reshape(x, [-1, self._output_embedding_size]), table,
                       transpose_b=True)
    logits = tf.nn.bias_add(logits, tf.cast(self.bias, logits.dtype))
    return tf.reshape(logits, [batch_size, num_predictions, self._vocab_size])

  def get_config(self):
    config = super().get_config()
    config.update(
        vocab_size=self._vocab_size,
        output_embedding_size=self._output_embedding_size,
        hidden_act=self._hidden_act,
        initializer_range=self._initializer_range,
        layer_norm_eps=self._layer_norm_eps)
    return config

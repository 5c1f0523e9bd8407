"""MatMulSelfAttention: multi-head self-attention computed with plain MatMuls.

Builds on Keras' `MultiHeadAttention`, the attention of Model Garden's
`TransformerEncoderBlock`: the same four projections as sublayers with the
same attribute and variable names (`_query_dense`/`query`, `_key_dense`/`key`,
`_value_dense`/`value` with kernels [hidden, heads, head_dim] and biases
[heads, head_dim]; `_output_dense`/`attention_output` with kernel [heads,
head_dim, hidden]), so checkpoints and converted weights are the same, and the
same arithmetic (query scaled by 1/sqrt(head_dim), masked softmax adding
-1e9 at masked keys, dropout on the probabilities).

It differs in the computation, for speed without XLA: the three input
projections are ONE MatMul by the kernels concatenated to [hidden, 3 x hidden]
(one larger GEMM and one input gradient instead of three plus a sum); heads
are split with one transpose of the [batch, seq, 3, heads, head_dim] result;
scores and context are BatchMatMuls on [batch, heads, seq, head_dim]; every
projection is MatMul + BiasAdd on [batch x seq, width] rows (see
`ProjectionDense`). Self-attention only (query = key = value input), which is
all an encoder block needs.

Example:
```python
attention = MatMulSelfAttention(num_heads=4, key_dim=8, name="self_attention")
x = tf.random.normal([2, 16, 32])
mask = tf.ones([2, 16, 16])          # [batch, query, key]; 0 = do not attend
y = attention(x, attention_mask=mask)   # [2, 16, 32]
```
"""
import math
from typing import Any, Dict

import tensorflow as tf
import tf_keras
from official.modeling import tf_utils

from rembert_tf.modeling import fused_kernels
from rembert_tf.modeling import projection_dense


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
class MatMulSelfAttention(tf_keras.layers.Layer):
  """Self-attention over [batch, seq, hidden] inputs.

  Args:
    num_heads: attention heads.
    key_dim: size of each head (hidden / num_heads in a BERT block).
    dropout: dropout rate on the attention probabilities.
    kernel_initializer, bias_initializer: for the four projections.
  """

  def __init__(self,
               num_heads: int,
               key_dim: int,
               dropout: float = 0.0,
               kernel_initializer="glorot_uniform",
               bias_initializer="zeros",
               **kwargs):
    super().__init__(**kwargs)
    self._num_heads = num_heads
    self._key_dim = key_dim
    self._dropout = dropout
    self._kernel_initializer = tf_keras.initializers.get(kernel_initializer)
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)

  def build(self, input_shape):
    hidden = int(tf.TensorShape(input_shape)[-1])
    heads = [self._num_heads, self._key_dim]

    def projection(name, output_dims, input_dims=None):
      return projection_dense.ProjectionDense(
          output_dims=output_dims, input_dims=input_dims,
          kernel_initializer=tf_utils.clone_initializer(
              self._kernel_initializer),
          bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
          dtype=self._dtype_policy, name=name)

    self._query_dense = projection("query", heads)
    self._key_dense = projection("key", heads)
    self._value_dense = projection("value", heads)
    self._output_dense = projection("attention_output", [hidden],
                                    input_dims=heads)
    # Built here, each in its own name scope, so the variables are named
    # .../self_attention/query/kernel as Keras' MultiHeadAttention names them.
    for dense, width in ((self._query_dense, hidden), (self._key_dense, hidden),
                         (self._value_dense, hidden),
                         (self._output_dense, self._num_heads * self._key_dim)):
      with tf.name_scope(dense.name):
        dense.build(tf.TensorShape([None, width]))
    self._softmax = tf_keras.layers.Softmax(axis=-1, dtype=self._dtype_policy)
    self._dropout_layer = tf_keras.layers.Dropout(
        rate=self._dropout, dtype=self._dtype_policy)
    super().build(input_shape)

  def call(self, inputs, attention_mask=None, training=None):
    """inputs [batch, seq, hidden]; attention_mask [batch, seq, seq] or None."""
    batch, seq = tf.shape(inputs)[0], tf.shape(inputs)[1]
    heads, head_dim = self._num_heads, self._key_dim
    rows = tf.reshape(inputs, [-1, inputs.shape[-1]])

    query, key, value = self._project_heads(rows, batch, seq)
    scores = tf.matmul(query, key, transpose_b=True)        # [B, N, S, S]
    if attention_mask is not None:
      attention_mask = tf.expand_dims(attention_mask, axis=1)
    if training:
      probs = self._softmax_dropout(scores, attention_mask)
    else:
      probs = self._softmax(scores, attention_mask)
    context = tf.matmul(probs, value)                       # [B, N, S, D]
    context = tf.transpose(context, [0, 2, 1, 3])           # [B, S, N, D]
    outputs = self._output_dense(tf.reshape(context, [-1, heads * head_dim]))
    return tf.reshape(outputs, tf.shape(inputs))

  def _project_heads(self, rows, batch, seq):
    """Query (already scaled by 1/sqrt(head_dim)), key and value
    [batch, heads, seq, head_dim] from one MatMul of the [B*S, H] rows."""
    scale = 1.0 / math.sqrt(float(self._key_dim))
    # The scale is folded into the query kernel and bias ([H, W] and [W],
    # cheap) instead of multiplying the [B, N, S, D] queries.
    kernel = tf.concat([self._query_dense.flat_kernel() * scale,
                        self._key_dense.flat_kernel(),
                        self._value_dense.flat_kernel()], axis=1)
    bias = tf.concat([self._query_dense.flat_bias() * scale,
                      self._key_dense.flat_bias(),
                      self._value_dense.flat_bias()], axis=0)
    qkv = tf.nn.bias_add(tf.matmul(rows, kernel), bias)    # [B*S, 3*W]
    qkv = tf.reshape(qkv, [batch, seq, 3, self._num_heads, self._key_dim])
    qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])               # [3, B, N, S, D]
    return tf.unstack(qkv, num=3, axis=0)

  def _softmax_dropout(self, scores, attention_mask):
    """Training path: masked softmax and dropout as one fused kernel."""
    if attention_mask is None:
      mask_bias = tf.zeros([], tf.float32)
    else:  # Keras' Softmax adds the same -1e9 at masked positions.
      mask_bias = (1.0 - tf.cast(attention_mask, tf.float32)) * -1e9
    noise = (fused_kernels.dropout_noise(scores)
             if self._dropout > 0 else None)
    return fused_kernels.masked_softmax_dropout(scores, mask_bias, noise,
                                                self._dropout)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        num_heads=self._num_heads, key_dim=self._key_dim, dropout=self._dropout,
        kernel_initializer=tf_keras.initializers.serialize(
            self._kernel_initializer),
        bias_initializer=tf_keras.initializers.serialize(
            self._bias_initializer))
    return config

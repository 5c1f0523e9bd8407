"""MatMulSelfAttention: multi-head self-attention computed with plain MatMuls.

Builds on Keras' `MultiHeadAttention` as Model Garden's
`TransformerEncoderBlock` uses it: the same sublayers, variable names, shapes
and arithmetic (checkpoints are interchangeable). Q, K and V are one MatMul
by the kernels side by side; when training, scores to context are
`fused_kernels.attention`.

Example:
<!-- snippet: not run: a fragment: `MatMulSelfAttention` comes from the caller's code -->
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

  def call(self, inputs, attention_mask=None, training=None,
           output_range=None, layout=None):
    """Self-attention of [batch, seq, hidden] inputs.

    Args:
      inputs: [batch, seq, hidden], or with `layout` the packed [rows, hidden]
        rows of a `padding_removal.TokenLayout` (the result is packed too).
      attention_mask: [batch, seq, seq] (1 = attend), [batch, 1, seq] or None.
      training: dropout on the probabilities, fused softmax kernel.
      output_range: queries at the first `output_range` positions only: the
        result is [batch, output_range, hidden].
      layout: see `inputs`.
    """
    heads, head_dim = self._num_heads, self._key_dim
    if layout is None:
      batch, seq = tf.shape(inputs)[0], tf.shape(inputs)[1]
      rows = tf.reshape(inputs, [-1, inputs.shape[-1]])
    else:
      batch, seq = layout.batch_size, layout.seq_length
      rows = inputs
    # Training scales the scores inside the fused attention kernel; inference
    # folds the scale into the query projection.
    scale_query = not training
    if output_range:
      padded = (inputs if layout is None
                else layout.unpack(inputs, real_only=True))
      query_rows = tf.reshape(padded[:, :output_range, :],
                              [-1, inputs.shape[-1]])
      query = self._split_heads(
          self._project(query_rows, ("query",), scale_query=scale_query),
          batch, output_range, 1)[0]
      key, value = self._split_heads(
          self._project(rows, ("key", "value")), batch, seq, 2, layout)
      if attention_mask is not None:
        attention_mask = attention_mask[:, :output_range, :]
    else:
      query, key, value = self._split_heads(
          self._project(rows, ("query", "key", "value"),
                        scale_query=scale_query), batch, seq, 3, layout)
    if attention_mask is not None:
      attention_mask = tf.expand_dims(attention_mask, axis=1)
    if training:
      context = self._fused_attention(query, key, value, attention_mask)
    else:
      scores = tf.matmul(query, key, transpose_b=True)      # [B, N, Q, S]
      probs = self._softmax(scores, attention_mask)
      context = tf.matmul(probs, value)                     # [B, N, Q, D]
    if layout is not None and not output_range:
      # Heads merged and rows packed by one gather (no transpose).
      return self._output_dense(layout.pack_heads(context))
    context = tf.transpose(context, [0, 2, 1, 3])           # [B, Q, N, D]
    context = tf.reshape(context, [-1, heads * head_dim])
    if output_range:
      outputs = self._output_dense(context)
      return tf.reshape(outputs, [batch, output_range, outputs.shape[-1]])
    return tf.reshape(self._output_dense(context), tf.shape(inputs))

  def _project(self, rows, names, scale_query=False):
    """One MatMul of the [rows, H] rows by the named projections' kernels side by
    side -> [rows, len(names) x W]; scale_query folds 1/sqrt(head_dim) into the
    query kernel and bias.
    """
    denses = dict(query=self._query_dense, key=self._key_dense,
                  value=self._value_dense)
    kernels, biases = [], []
    for name in names:
      kernel, bias = denses[name].flat_kernel(), denses[name].flat_bias()
      if name == "query" and scale_query:
        kernel, bias = kernel * self._scale(), bias * self._scale()
      kernels.append(kernel)
      biases.append(bias)
    kernel = kernels[0] if len(names) == 1 else tf.concat(kernels, axis=1)
    bias = biases[0] if len(names) == 1 else tf.concat(biases, axis=0)
    return tf.nn.bias_add(tf.matmul(rows, kernel), bias)

  def _split_heads(self, projected, batch, length, parts, layout=None):
    """[B*L, parts x W] -> `parts` tensors [batch, heads, length, head_dim]
    (one transpose of the [B, L, parts, N, D] view); with `layout`, the
    packed rows unpacked and split by one gather instead."""
    if layout is not None:
      return layout.unpack_heads(projected, parts, self._num_heads)
    projected = tf.reshape(
        projected, [batch, length, parts, self._num_heads, self._key_dim])
    projected = tf.transpose(projected, [2, 0, 3, 1, 4])    # [P, B, N, L, D]
    return tf.unstack(projected, num=parts, axis=0)

  def _scale(self) -> float:
    return 1.0 / math.sqrt(float(self._key_dim))

  def _fused_attention(self, query, key, value, attention_mask):
    """Training path: scores, masked softmax, dropout and context as one
    fused computation (see fused_kernels.attention)."""
    if attention_mask is None:
      mask_bias = None
    else:  # Keras' Softmax adds the same -1e9 at masked positions.
      mask_bias = (1.0 - tf.cast(attention_mask, tf.float32)) * -1e9
    seed = fused_kernels.dropout_seed(self._dropout)
    return fused_kernels.attention(query, key, value, mask_bias,
                                   self._scale(), seed, self._dropout)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        num_heads=self._num_heads, key_dim=self._key_dim, dropout=self._dropout,
        kernel_initializer=tf_keras.initializers.serialize(
            self._kernel_initializer),
        bias_initializer=tf_keras.initializers.serialize(
            self._bias_initializer))
    return config

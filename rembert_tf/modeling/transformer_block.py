"""RemBertTransformerBlock: Model Garden's post-LayerNorm encoder block on MatMuls.

A subclass of Model Garden's `layers.TransformerEncoderBlock` with the same
constructor, `get_config`, variables and arithmetic (checkpoints of either
restore into the other); projections are MatMuls over [batch x seq, hidden]
rows. Only RemBERT's configuration is supported (anything else raises
ValueError); `layout=` runs it on padding_removal.py's packed rows.

Example:
<!-- snippet: not run: a fragment: `RemBertTransformerBlock` comes from the caller's code -->
```python
block = RemBertTransformerBlock(num_attention_heads=4, inner_dim=64,
                                inner_activation=activations.gelu_exact,
                                name="transformer/layer_0")
y = block([tf.random.normal([2, 16, 32]), tf.ones([2, 16, 16])])  # [2, 16, 32]
```
"""
from typing import Any

import tensorflow as tf
import tf_keras
from official.modeling import tf_utils
from official.nlp.modeling import layers

from rembert_tf.modeling import activations
from rembert_tf.modeling import fused_kernels
from rembert_tf.modeling import matmul_self_attention
from rembert_tf.modeling import projection_dense

# Constructor arguments of TransformerEncoderBlock this block does not
# implement, with the only value it accepts.
_FIXED_ARGUMENTS = dict(
    kernel_regularizer=None, bias_regularizer=None,
    activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
    use_bias=True, norm_first=False, use_query_residual=True, value_dim=None, output_last_dim=None, diff_q_kv_att_layer_norm=False,
    return_attention_scores=False, num_kv_heads=None, src_block_size=None,
    tgt_block_size=None, linformer_dim=None, attention_axes=None,
    use_rms_norm=False)


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
class RemBertTransformerBlock(layers.TransformerEncoderBlock):
  """Post-LayerNorm Transformer encoder block (BERT layout).

  Call it on `[inputs, attention_mask]` ([batch, seq, hidden] and [batch, seq,
  seq] with 1 = attend, or [batch, 1, seq] for the same keys at every query)
  or on `inputs` alone; returns [batch, seq, hidden].
  """

  def __init__(self, num_attention_heads, inner_dim, inner_activation,
               **kwargs):
    unsupported = sorted(
        name for name, value in kwargs.items()
        if name in _FIXED_ARGUMENTS and value != _FIXED_ARGUMENTS[name])
    if unsupported:
      raise ValueError(
          "RemBertTransformerBlock implements the post-LayerNorm BERT block "
          f"only; unsupported arguments: {', '.join(unsupported)}. Use Model "
          "Garden's layers.TransformerEncoderBlock for these.")
    super().__init__(num_attention_heads=num_attention_heads,
                     inner_dim=inner_dim, inner_activation=inner_activation,
                     **kwargs)

  def build(self, input_shape):
    if isinstance(input_shape, (list, tuple)) and not isinstance(
        input_shape, tf.TensorShape) and isinstance(
            input_shape[0], (list, tuple, tf.TensorShape)):
      input_shape = input_shape[0]
    hidden = int(tf.TensorShape(input_shape)[-1])
    if hidden % self._num_heads:
      raise ValueError(f"{self.name}: hidden size {hidden} is not a multiple "
                       f"of num_attention_heads {self._num_heads}.")
    if self._key_dim not in (None, hidden // self._num_heads):
      raise ValueError(f"{self.name}: key_dim must be hidden / heads "
                       f"({hidden // self._num_heads}), got {self._key_dim}.")
    self._key_dim = hidden // self._num_heads
    self._attention_layer = matmul_self_attention.MatMulSelfAttention(
        num_heads=self._num_heads, key_dim=self._key_dim,
        dropout=self._attention_dropout_rate,
        kernel_initializer=self._attention_initializer,
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name="self_attention")
    self._attention_dropout = tf_keras.layers.Dropout(
        rate=self._attention_dropout_rate)
    # LayerNorms in float32 under mixed precision, as Model Garden's block.
    self._attention_layer_norm = tf_keras.layers.LayerNormalization(
        name="self_attention_layer_norm", axis=-1, epsilon=self._norm_epsilon,
        dtype=tf.float32)
    self._attention_layer_norm_kv = self._attention_layer_norm
    self._intermediate_dense = self._dense("intermediate", self._inner_dim)
    # The activation in float32 under mixed_bfloat16, as Model Garden's block.
    policy = tf_keras.mixed_precision.global_policy()
    if policy.name == "mixed_bfloat16":
      policy = tf.float32
    self._intermediate_activation_layer = tf_keras.layers.Activation(
        self._inner_activation, dtype=policy)
    self._inner_dropout_layer = tf_keras.layers.Dropout(
        rate=self._inner_dropout)
    self._output_dense = self._dense("output", hidden)
    self._output_dropout = tf_keras.layers.Dropout(
        rate=self._output_dropout_rate)
    self._output_layer_norm = tf_keras.layers.LayerNormalization(
        name="output_layer_norm", axis=-1, epsilon=self._norm_epsilon,
        dtype=tf.float32)
    # The training path reads the LayerNorms' variables without calling them:
    # built here, in their own name scopes (the names Model Garden gives).
    for norm in (self._attention_layer_norm, self._output_layer_norm):
      with tf.name_scope(norm.name):
        norm.build(tf.TensorShape([None, hidden]))
    activation = tf_keras.activations.get(self._inner_activation)
    self._fused_activation = {
        activations.gelu_exact: "exact",
        activations.gelu_approx: "approximate"}.get(activation)
    tf_keras.layers.Layer.build(self, input_shape)  # not Model Garden's build

  def _dense(self, name, width):
    return projection_dense.ProjectionDense(
        output_dims=[width],
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name=name)

  def call(self, inputs: Any, output_range=None, training=None,
           layout=None) -> tf.Tensor:
    """[batch, seq, hidden] -> [batch, seq, hidden].

    Args:
      inputs: `[inputs, attention_mask]` or `inputs` alone.
      output_range: outputs of the first `output_range` positions only
        (default: the constructor's).
      training: dropout, fused kernels.
      layout: a `padding_removal.TokenLayout`: inputs and result are packed rows.
    """
    if isinstance(inputs, (list, tuple)):
      if len(inputs) != 2:
        raise ValueError("RemBertTransformerBlock takes [inputs, "
                         f"attention_mask], got {len(inputs)} tensors.")
      input_tensor, attention_mask = inputs
    else:
      input_tensor, attention_mask = inputs, None
    if output_range is None:
      output_range = self._output_range
    hidden = input_tensor.shape[-1]
    attention_output = self._attention_layer(
        input_tensor, attention_mask=attention_mask, training=training,
        output_range=output_range, layout=layout)
    if output_range:
      padded = (input_tensor if layout is None
                else layout.unpack(input_tensor, real_only=True))
      query_tensor = padded[:, :output_range, :]
    elif layout is None:
      query_tensor = input_tensor
    else:  # packed rows in, packed rows out
      query_tensor = None
    if query_tensor is None:
      rows = input_tensor
    else:
      rows = tf.reshape(query_tensor, [-1, hidden])            # [B*Q, H]
    attention_output = tf.reshape(attention_output, [-1, hidden])
    if training:
      layer_output = self._feed_forward_fused(rows, attention_output)
    else:
      layer_output = self._feed_forward(rows, attention_output)
    if query_tensor is None:
      return layer_output
    return tf.reshape(layer_output, tf.shape(query_tensor))

  def _feed_forward(self, rows, attention_output):
    """Inference: Model Garden's sequence of layers, on [B*S, H] rows."""
    attention_output = self._attention_layer_norm(rows + attention_output)
    inner_output = self._intermediate_dense(attention_output)
    inner_output = self._intermediate_activation_layer(inner_output)
    layer_output = self._output_dense(inner_output)
    # Under mixed precision the LayerNorm output is float32; so is the sum.
    layer_output = tf.cast(layer_output, tf.float32)
    return self._output_layer_norm(layer_output + attention_output)

  def _feed_forward_fused(self, rows, attention_output):
    """Training: the same with dropout, the residual adds, the LayerNorms and
    GELU as fused kernels (see fused_kernels)."""
    attention_output = self._add_norm(
        attention_output, rows, self._attention_layer_norm,
        self._attention_dropout_rate)
    inner_output = self._intermediate_dense(attention_output)
    if self._fused_activation is None:
      inner_output = self._intermediate_activation_layer(inner_output)
    else:
      inner_output = fused_kernels.gelu(
          inner_output, approximate=self._fused_activation == "approximate")
    inner_output = self._inner_dropout_layer(inner_output, training=True)
    layer_output = self._output_dense(inner_output)
    return self._add_norm(layer_output, attention_output,
                          self._output_layer_norm, self._output_dropout_rate)

  def _add_norm(self, x, residual, norm_layer, dropout_rate):
    """LayerNorm(dropout(x) + residual) with norm_layer's variables."""
    seed = fused_kernels.dropout_seed(dropout_rate)
    return fused_kernels.add_layer_norm(
        x, residual, norm_layer.gamma, norm_layer.beta, norm_layer.epsilon,
        seed=seed, rate=dropout_rate)

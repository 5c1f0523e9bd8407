"""Element-wise parts of the Transformer block as small XLA-compiled kernels.

GELU, LayerNorm, the masked softmax and dropout each run as one
`tf.function(jit_compile=True)` forward and a hand-written gradient, while
the matmuls stay on TensorFlow's kernels; the arithmetic is Model Garden's
`TransformerEncoderBlock`'s to float rounding. For the CPU training path;
under an outer `jit_compile=True` (TPU) they are inlined. Dropout hashes each
entry's index under a seed (`dropout_seed()`): no noise tensor is written.
"""
import math
from typing import Optional

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)


# === GELU ===
def _gelu_terms(x, approximate):
  """(y, dy/dx) of GELU at float32 x."""
  if approximate:
    inner = _TANH_SCALE * (x + 0.044715 * x * x * x)
    t = tf.tanh(inner)
    y = 0.5 * x * (1.0 + t)
    d_inner = _TANH_SCALE * (1.0 + 3.0 * 0.044715 * x * x)
    return y, 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner
  cdf = 0.5 + 0.5 * tf.math.erf(x * _SQRT_HALF)
  return x * cdf, cdf + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI


@tf.function(jit_compile=True)
def _gelu_forward(x, approximate):
  y, _ = _gelu_terms(tf.cast(x, tf.float32), approximate)
  return tf.cast(y, x.dtype)


@tf.function(jit_compile=True)
def _gelu_backward(x, dy, approximate):
  _, slope = _gelu_terms(tf.cast(x, tf.float32), approximate)
  return tf.cast(tf.cast(dy, tf.float32) * slope, x.dtype)


def gelu(x: tf.Tensor, approximate: bool = False) -> tf.Tensor:
  """GELU (exact erf form, or the tanh approximation), fused both ways."""

  @tf.custom_gradient
  def fused(x):
    return (_gelu_forward(x, approximate),
            lambda dy: _gelu_backward(x, dy, approximate))

  return fused(x)


# === residual add + LayerNorm ===
@tf.function(jit_compile=True)
def _add_layer_norm_forward(x, residual, gamma, beta, epsilon, seed, rate):
  """(output, dropout mask or None, normalized, 1 / std), in float32, for the backward."""
  keep = None if seed is None else _keep(tf.shape(x), seed, rate)
  total = _apply_keep(tf.cast(x, tf.float32), keep, rate) + tf.cast(
      residual, tf.float32)
  centered = total - tf.reduce_mean(total, axis=-1, keepdims=True)
  variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
  inv_std = tf.math.rsqrt(variance + epsilon)
  normalized = centered * inv_std
  return normalized * gamma + beta, keep, normalized, inv_std


@tf.function(jit_compile=True)
def _add_layer_norm_backward(normalized, inv_std, gamma, keep, rate, dy,
                             x_dtype, residual_dtype):
  dy = tf.cast(dy, tf.float32)
  d_normalized = dy * gamma
  d_total = inv_std * (
      d_normalized
      - tf.reduce_mean(d_normalized, axis=-1, keepdims=True)
      - normalized * tf.reduce_mean(d_normalized * normalized, axis=-1,
                                    keepdims=True))
  d_gamma = tf.reduce_sum(dy * normalized, axis=0)
  d_beta = tf.reduce_sum(dy, axis=0)
  return (tf.cast(_apply_keep(d_total, keep, rate), x_dtype),
          tf.cast(d_total, residual_dtype), d_gamma, d_beta)


def add_layer_norm(x: tf.Tensor, residual: tf.Tensor, gamma: tf.Tensor,
                   beta: tf.Tensor, epsilon: float,
                   seed: Optional[tf.Tensor] = None,
                   rate: float = 0.0) -> tf.Tensor:
  """LayerNorm(dropout(x) + residual) over the last axis of [rows, width].

  Everything in float32; gamma/beta float32 [width]; seed from
  `dropout_seed()` (None: no dropout); returns float32.
  """
  seed, rate = _dropout_args(seed, rate)
  gamma = tf.convert_to_tensor(gamma)  # variables -> values: the gradient
  beta = tf.convert_to_tensor(beta)    # flows back through the read

  @tf.custom_gradient
  def fused(x, residual, gamma, beta):
    outputs, keep, normalized, inv_std = _add_layer_norm_forward(
        x, residual, gamma, beta, epsilon, seed, rate)

    def grad(dy):
      return _add_layer_norm_backward(normalized, inv_std, gamma, keep, rate,
                                      dy, x.dtype, residual.dtype)
    return outputs, grad

  return fused(x, residual, gamma, beta)


# === dropout ===
def dropout_seed(rate: float = 1.0) -> Optional[tf.Tensor]:
  """int32 [2] seed of one dropout call (None when rate is 0); repeatable under
  `tf.random.set_seed`."""
  if rate == 0:
    return None
  return tf.random.uniform([2], minval=-2**31, maxval=2**31 - 1,
                           dtype=tf.int32)


def _mix32(x):
  """A bijective avalanche mix of uint32 (MurmurHash3's 32-bit finalizer)."""
  for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(
        x, tf.constant(shift, tf.uint32)))
    x = x * tf.constant(factor, tf.uint32)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(
      x, tf.constant(16, tf.uint32)))


def _random_bits(shape, seed):
  """uint32 [shape]: each entry's flat index hashed under the seed (a bijection)."""
  seed = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
  shape = tf.cast(shape, tf.int32)
  width = shape[-1]
  row = tf.bitcast(tf.range(tf.reduce_prod(shape[:-1])), tf.uint32)
  column = tf.bitcast(tf.range(width), tf.uint32)
  counter = (row[:, tf.newaxis] * tf.bitcast(width, tf.uint32)
             + column[tf.newaxis, :])
  bits = _mix32(_mix32(tf.bitwise.bitwise_xor(counter, seed[0])) + seed[1])
  return tf.reshape(bits, shape)


def _keep(shape, seed, rate):
  """bool [shape]: kept entries, each with probability 1 - rate (to 2^-32)."""
  threshold = min(int(round(rate * 2.0**32)), 2**32 - 1)
  return _random_bits(shape, seed) >= tf.constant(threshold, tf.uint32)


@tf.function(jit_compile=True)
def dropout_keep_mask(shape, seed, rate):
  """The entries `seed` keeps (for tests and plain-op references)."""
  return _keep(shape, seed, rate)


def _dropout_args(seed, rate):
  """(seed, rate), or (None, 0.0) when either says there is no dropout: the
  one place the public kernels normalize their arguments."""
  if seed is None or rate == 0:
    return None, 0.0
  return seed, rate


def _dropout(values, seed, rate):
  """Inverted dropout of float32 `values` under `seed` (None: identity)."""
  if seed is None:
    return values
  return _apply_keep(values, _keep(tf.shape(values), seed, rate), rate)


def _apply_keep(values, keep, rate):
  """Inverted dropout with the bool mask `keep` (None: identity)."""
  if keep is None:
    return values
  scaled = values * (1.0 / (1.0 - rate))
  return tf.where(keep, scaled, tf.zeros_like(scaled))


@tf.function(jit_compile=True)
def _dropout_forward(x, seed, rate):
  keep = _keep(tf.shape(x), seed, rate)
  return tf.cast(_apply_keep(tf.cast(x, tf.float32), keep, rate), x.dtype), keep


@tf.function(jit_compile=True)
def _dropout_backward(dy, keep, rate):
  return tf.cast(_apply_keep(tf.cast(dy, tf.float32), keep, rate), dy.dtype)


def dropout(x: tf.Tensor, seed: Optional[tf.Tensor], rate: float) -> tf.Tensor:
  """Inverted dropout as one compiled loop each way (the backward reads the
  forward's bool mask); seed from `dropout_seed()`, None: identity."""
  seed, rate = _dropout_args(seed, rate)
  if seed is None:
    return x

  @tf.custom_gradient
  def fused(x):
    outputs, keep = _dropout_forward(x, seed, rate)
    return outputs, lambda dy: _dropout_backward(dy, keep, rate)

  return fused(x)


# === attention: scores, masked softmax, dropout, context ===
@tf.function(jit_compile=True)
def _dropout_cast(values, seed, rate, dtype):
  return tf.cast(_dropout(values, seed, rate), dtype)


@tf.function(jit_compile=True)
def _attention_scores_backward(probs, d_dropped, d_context, context, seed,
                               rate, scale):
  # Softmax backward: d_logits = probs * (d_probs - sum(d_probs * probs)).
  # The row sum equals sum(d_dropped * dropped) (dropout scales both sides
  # alike), which is d_context . context over the head dimension: a [.., D]
  # reduction instead of one over the [.., seq, seq] scores.
  delta = tf.reduce_sum(tf.cast(d_context, tf.float32)
                        * tf.cast(context, tf.float32), axis=-1, keepdims=True)
  d_probs = _dropout(tf.cast(d_dropped, tf.float32), seed, rate)
  return tf.cast(probs * (d_probs - delta) * scale, d_dropped.dtype)


def attention(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor,
              mask_bias: Optional[tf.Tensor], scale: float,
              seed: Optional[tf.Tensor] = None,
              rate: float = 0.0) -> tf.Tensor:
  """dropout(softmax(query @ key^T x scale + mask_bias)) @ value.

  query [batch, heads, q, d], key and value [batch, heads, s, d]; mask_bias
  broadcastable to [batch, heads, q, s] (0 where attending, -1e9 where
  masked; no gradient) or None; seed from `dropout_seed()` (None: no
  dropout). The softmax is in float32, the rest in the inputs' dtype.
  """
  scale = float(scale)
  seed, rate = _dropout_args(seed, rate)

  @tf.custom_gradient
  def fused(query, key, value):
    scores = tf.matmul(query, key, transpose_b=True) * tf.cast(scale,
                                                               query.dtype)
    if mask_bias is not None:
      scores = scores + tf.cast(mask_bias, scores.dtype)
    probs = tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1)
    if seed is not None:
      dropped = _dropout_cast(probs, seed, rate, query.dtype)
    else:
      dropped = tf.cast(probs, query.dtype)
    context = tf.matmul(dropped, value)

    def grad(d_context):
      d_dropped = tf.matmul(d_context, value, transpose_b=True)
      d_value = tf.matmul(dropped, d_context, transpose_a=True)
      d_scores = _attention_scores_backward(
          probs, d_dropped, d_context, context, seed, rate, scale)
      return (tf.matmul(d_scores, key), tf.matmul(d_scores, query,
                                                  transpose_a=True), d_value)
    return context, grad

  return fused(query, key, value)

"""Element-wise parts of the Transformer block as small XLA-compiled kernels.

Without XLA, TensorFlow runs GELU, LayerNorm, the masked softmax and dropout
as chains of separate element-wise ops (GELU alone is five ops forward and
about eight for its gradient), each reading and writing the whole activation
tensor and each paying the thread-pool hand-off; on CPU these chains cost as
much as the matmuls of the block, and more on a loaded machine. Here each
chain is one `tf.function(jit_compile=True)` for the forward and one for a
hand-written gradient (`tf.custom_gradient`), so XLA fuses it into a single
loop per direction, while the matmuls stay on TensorFlow's oneDNN kernels
(and so does the softmax's forward, faster than XLA's on CPU).
The arithmetic is the one of Model Garden's `TransformerEncoderBlock` and
Keras' `MultiHeadAttention` (exact or tanh GELU, LayerNorm over the last axis
in float32, softmax adding -1e9 at masked keys, inverted dropout); results
agree with them to float rounding.

Under an outer `jit_compile=True` (TPU) the kernels are simply inlined. They
are meant for the training path: for inference without gradients the plain
ops are as good (grappler fuses MatMul + BiasAdd + GELU into one oneDNN call)
and keep exported SavedModels free of XLA-compiled functions.

Dropout takes `noise` from `dropout_noise(x)`: uniform 16-bit integers
(TensorFlow's Philox kernel draws 32 bits and each draw serves two entries,
half the random numbers and memory of float noise); an entry is kept when
its noise is at least `rate` x 65536, i.e. with probability 1 - rate up to
2^-16, and scaled by 1 / (1 - rate).

Example:
```python
y = fused_kernels.gelu(x, approximate=False)
out = fused_kernels.add_layer_norm(x, residual, gamma, beta, epsilon=1e-12)
probs = fused_kernels.masked_softmax_dropout(scores, mask_bias, noise, 0.1)
```
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
def _normalized_sum(x, residual, epsilon, noise, rate):
  """(normalized dropout(x) + residual, 1 / std) in float32; the backward
  recomputes them instead of keeping them from the forward."""
  total = _dropout(tf.cast(x, tf.float32), noise, rate) + tf.cast(
      residual, tf.float32)
  centered = total - tf.reduce_mean(total, axis=-1, keepdims=True)
  variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
  inv_std = tf.math.rsqrt(variance + epsilon)
  return centered * inv_std, inv_std


@tf.function(jit_compile=True)
def _add_layer_norm_forward(x, residual, gamma, beta, epsilon, noise, rate):
  normalized, _ = _normalized_sum(x, residual, epsilon, noise, rate)
  return normalized * gamma + beta


@tf.function(jit_compile=True)
def _add_layer_norm_backward(x, residual, gamma, epsilon, noise, rate, dy):
  normalized, inv_std = _normalized_sum(x, residual, epsilon, noise, rate)
  dy = tf.cast(dy, tf.float32)
  d_normalized = dy * gamma
  d_total = inv_std * (
      d_normalized
      - tf.reduce_mean(d_normalized, axis=-1, keepdims=True)
      - normalized * tf.reduce_mean(d_normalized * normalized, axis=-1,
                                    keepdims=True))
  d_gamma = tf.reduce_sum(dy * normalized, axis=0)
  d_beta = tf.reduce_sum(dy, axis=0)
  return (tf.cast(_dropout(d_total, noise, rate), x.dtype),
          tf.cast(d_total, residual.dtype), d_gamma, d_beta)


def add_layer_norm(x: tf.Tensor, residual: tf.Tensor, gamma: tf.Tensor,
                   beta: tf.Tensor, epsilon: float,
                   noise: Optional[tf.Tensor] = None,
                   rate: float = 0.0) -> tf.Tensor:
  """LayerNorm(dropout(x) + residual) over the last axis of [rows, width].

  Everything in float32 (under mixed precision Model Garden's block adds the
  first residual in bfloat16 before its float32 LayerNorm; adding in float32
  differs from that by bfloat16 rounding only); gamma/beta float32 [width];
  noise from `dropout_noise(x)` (None: no dropout); returns float32.
  """

  gamma = tf.convert_to_tensor(gamma)  # variables -> values: the gradient
  beta = tf.convert_to_tensor(beta)    # flows back through the read
  @tf.custom_gradient
  def fused(x, residual, gamma, beta):
    def grad(dy):
      return _add_layer_norm_backward(x, residual, gamma, epsilon, noise,
                                      rate, dy)
    return (_add_layer_norm_forward(x, residual, gamma, beta, epsilon, noise,
                                    rate), grad)

  return fused(x, residual, gamma, beta)


# === dropout ===
def dropout_noise(like: tf.Tensor) -> tf.Tensor:
  """uint16 noise of the shape of `like`, for dropout.

  Stateless Philox under a seed drawn from TensorFlow's stateful generator,
  so runs are repeatable under `tf.random.set_seed` as with Keras' dropout.
  """
  seed = tf.random.uniform([2], minval=-2**31, maxval=2**31 - 1,
                           dtype=tf.int32)
  shape = like.shape
  if shape.is_fully_defined() and shape[-1] % 2 == 0:
    half = shape.as_list()[:-1] + [shape[-1] // 2]
    bits = tf.random.stateless_uniform(half, seed, minval=None, maxval=None,
                                       dtype=tf.uint32)
    return tf.reshape(tf.bitcast(bits, tf.uint16), shape)
  bits = tf.random.stateless_uniform(tf.shape(like), seed, minval=None,
                                     maxval=None, dtype=tf.uint32)
  return tf.cast(bits, tf.uint16)  # the low 16 bits


def _dropout(values, noise, rate):
  """Inverted dropout: keeps entries with noise >= rate x 65536."""
  if noise is None:
    return values
  threshold = tf.constant(min(int(round(rate * 65536)), 65535), tf.uint16)
  scaled = values * (1.0 / (1.0 - rate))
  return tf.where(noise >= threshold, scaled, tf.zeros_like(scaled))


# === masked softmax + dropout ===

def _softmax_dropout_forward(scores, mask_bias, noise, rate):
  # The softmax itself is TensorFlow's (oneDNN) kernel: XLA's CPU softmax
  # took twice its time on [batch, heads, seq, seq] scores. Dropout and the
  # cast are one compiled loop.
  logits = tf.cast(scores, tf.float32) + tf.cast(mask_bias, tf.float32)
  probs = tf.nn.softmax(logits, axis=-1)
  return probs, _dropout_cast(probs, noise, rate, scores.dtype)


@tf.function(jit_compile=True)
def _dropout_cast(values, noise, rate, dtype):
  return tf.cast(_dropout(values, noise, rate), dtype)


@tf.function(jit_compile=True)
def _softmax_dropout_backward(probs, noise, rate, dy, out_dtype):
  d_probs = _dropout(tf.cast(dy, tf.float32), noise, rate)
  d_logits = probs * (d_probs - tf.reduce_sum(d_probs * probs, axis=-1,
                                              keepdims=True))
  return tf.cast(d_logits, out_dtype)


def masked_softmax_dropout(scores: tf.Tensor, mask_bias: tf.Tensor,
                           noise: Optional[tf.Tensor],
                           rate: float) -> tf.Tensor:
  """dropout(softmax(scores + mask_bias)) over the last axis.

  scores [batch, heads, query, key]; mask_bias broadcastable to it (0 where
  attending, -1e9 where masked); noise from `dropout_noise(scores)`,
  or None for no dropout. Computed in float32, returned in the scores' dtype.
  """

  @tf.custom_gradient
  def fused(scores):
    probs, outputs = _softmax_dropout_forward(scores, mask_bias, noise, rate)

    def grad(dy):
      return _softmax_dropout_backward(probs, noise, rate, dy, scores.dtype)
    return outputs, grad

  return fused(scores)

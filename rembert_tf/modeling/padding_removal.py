"""Padding removal: the encoder's row-wise work on real tokens only.

Fine-tuning and serving batches are padded to a fixed sequence length (the
benchmark batches are 25% padding, real XNLI batches far more). The
projections, the FFN, LayerNorms, GELU and dropout act on each token's row
independently, so on CPU without XLA they can run on the [tokens, hidden]
rows of the real tokens alone: `TokenLayout.from_mask` lists those rows once
after the embedding lookup, `pack` gathers them, and `unpack` scatters rows
back to [batch, seq, width] where a computation needs the padded layout (the
attention scores and context, and the encoder's outputs). Gathers and
scatters by index are exact, so the real tokens' values are the padded
computation's to float rounding.

The number of packed rows is rounded up to a multiple of 1/16 of batch x seq
with padding positions (computed as the padded computation would, and never
written to the outputs), so the fused kernels of the training path (which
XLA compiles per shape) see at most 16 shapes instead of one per batch.

Shapes depend on the data, so this is for CPU execution without XLA only;
`in_xla_context()` tells the encoder when it is traced under
`jit_compile=True` (TPU), where it keeps the padded layout (Model Garden's
encoders have no such mode).

Example:
```python
layout = TokenLayout.from_mask(tf.constant([[1, 1, 0], [1, 0, 0]]))
rows = layout.pack(tf.random.normal([2, 3, 8]))   # [4, 8]: 3 real + 1 filler
padded = layout.unpack(rows)                      # [2, 3, 8]
outputs = layout.unpack(rows, real_only=True)     # zeros at padded positions
```
"""
from typing import NamedTuple

import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

# Packed row counts are rounded up to multiples of batch x seq / _BUCKETS.
_BUCKETS = 16


def in_xla_context() -> bool:
  """Whether ops built now are compiled by XLA (a `jit_compile=True`
  tf.function or a TPU computation is being traced)."""
  return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


class TokenLayout(NamedTuple):
  """Where the packed rows live in the flattened [batch x seq] positions.

  indices: int32 [rows, 1], the real tokens' flat positions in order, then
    filler padding positions; num_real: scalar, the real tokens' count;
    batch_size, seq_length: scalars of the padded layout.
  """
  indices: tf.Tensor
  num_real: tf.Tensor
  batch_size: tf.Tensor
  seq_length: tf.Tensor

  @classmethod
  def from_mask(cls, mask: tf.Tensor) -> "TokenLayout":
    """The layout of an int [batch, seq] mask (non-zero = real token)."""
    shape = tf.shape(mask)
    total = shape[0] * shape[1]
    is_padding = tf.cast(tf.reshape(mask, [-1]) == 0, tf.int32)
    num_real = total - tf.reduce_sum(is_padding)
    bucket = tf.maximum((total + _BUCKETS - 1) // _BUCKETS, 1)
    num_rows = tf.minimum((num_real + bucket - 1) // bucket * bucket, total)
    # Stable: real positions first, in order, then padding positions.
    order = tf.argsort(is_padding, stable=True)[:num_rows]
    return cls(tf.expand_dims(order, 1), num_real, shape[0], shape[1])

  def pack(self, values: tf.Tensor) -> tf.Tensor:
    """[batch, seq, width] (or [batch x seq, width]) -> [rows, width]."""
    width = values.shape[-1]
    return tf.gather_nd(tf.reshape(values, [-1, width]), self.indices)

  def unpack(self, rows: tf.Tensor, real_only: bool = False) -> tf.Tensor:
    """[rows, width] -> [batch, seq, width]; positions without a row are 0.

    real_only: write the real tokens only (filler rows are dropped), so
    every padded position holds zeros.
    """
    width = rows.shape[-1]
    indices = self.indices
    if real_only:
      indices, rows = indices[:self.num_real], rows[:self.num_real]
    flat = tf.scatter_nd(indices, rows,
                         tf.stack([self.batch_size * self.seq_length, width]))
    return tf.reshape(flat, [self.batch_size, self.seq_length, width])

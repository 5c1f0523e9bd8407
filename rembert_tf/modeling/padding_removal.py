"""Padding removal: the encoder's row-wise work on real tokens only.

Projections, FFN, LayerNorms, GELU and dropout act on each token's row, so
on CPU without XLA they run on the [tokens, hidden] rows of real tokens:
`TokenLayout.pack` gathers them, `unpack` scatters back to [batch, seq,
width] for attention and the outputs. When training, the row count is
rounded up to 1/64 of batch x seq so the compiled kernels see at most 64
shapes. Under `jit_compile=True` the encoder keeps the padded layout.

Example:
<!-- snippet: not run: a fragment: `tf` comes from the caller's code -->
```python
mask = tf.constant(np.arange(64) < np.array([[40], [3]]), tf.int32)  # [2, 64]
layout = TokenLayout.from_mask(mask)         # training: 44 rows (buckets of 2)
layout = TokenLayout.from_mask(mask, bucketed=False)   # 43 rows: real tokens
rows = layout.pack(tf.random.normal([2, 64, 8]))  # [43, 8]
padded = layout.unpack(rows)                      # [2, 64, 8] for attention
outputs = layout.unpack(rows, real_only=True)     # zeros at padded positions
```
"""
from typing import List, NamedTuple

import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import control_flow_util  # pylint: disable=g-direct-tensorflow-import

# Packed row counts are rounded up to multiples of batch x seq / _BUCKETS.
_BUCKETS = 64


def in_xla_context() -> bool:
  """Whether ops built now are compiled by XLA (a `jit_compile=True`
  tf.function or a TPU computation is being traced)."""
  return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


class TokenLayout(NamedTuple):
  """Where the packed rows live in the flattened [batch x seq] positions.

  rows: int32 [num_rows], the flat position of each row: the real tokens in
    order, then filler padding positions.
  row_of_position: int32 [batch x seq], each position's row, or num_rows
    and above for a position without a row.
  is_real: [batch x seq, 1] float32, 1 at real tokens.
  num_rows, batch_size, seq_length: scalars.
  """
  rows: tf.Tensor
  row_of_position: tf.Tensor
  is_real: tf.Tensor
  num_rows: tf.Tensor
  batch_size: tf.Tensor
  seq_length: tf.Tensor

  @classmethod
  def from_mask(cls, mask: tf.Tensor, bucketed: bool = True) -> "TokenLayout":
    """The layout of an int [batch, seq] mask (non-zero = real token).

    bucketed: round the row count up (see the module docstring); without,
    exactly the real tokens (for computations without XLA kernels).
    """
    shape = tf.shape(mask)
    total = shape[0] * shape[1]
    is_padding = tf.cast(tf.reshape(mask, [-1]) == 0, tf.int32)
    num_real = total - tf.reduce_sum(is_padding)
    num_rows = num_real
    if bucketed:
      bucket = tf.maximum((total + _BUCKETS - 1) // _BUCKETS, 1)
      num_rows = (num_real + bucket - 1) // bucket * bucket
    # At least one row (a batch of padding only still has a row to gather).
    num_rows = tf.minimum(tf.maximum(num_rows, 1), total)
    # Stable: real positions first, in order, then padding positions.
    order = tf.argsort(is_padding, stable=True)
    row_of_position = tf.math.invert_permutation(order)
    return cls(order[:num_rows], row_of_position,
               tf.cast(1 - is_padding, tf.float32)[:, tf.newaxis], num_rows,
               shape[0], shape[1])

  def pack(self, values: tf.Tensor) -> tf.Tensor:
    """[batch, seq, width] (or [batch x seq, width]) -> [rows, width]."""
    flat = tf.reshape(values, [-1, values.shape[-1]])

    @tf.custom_gradient
    def gather_rows(flat):
      # Positions without a row get a zero gradient.
      return tf.gather(flat, self.rows), self._spread

    return gather_rows(flat)

  def unpack(self, rows: tf.Tensor, real_only: bool = False) -> tf.Tensor:
    """[rows, width] -> [batch, seq, width].

    By default positions without a row hold arbitrary finite values and get no
    gradient (exact for masked attention keys and values and for unused
    outputs). real_only: zeros at every padded position, exact gradients always.
    """

    @tf.custom_gradient
    def spread_rows(rows):
      return (tf.gather(rows, self._nearest_row()),
              lambda d: tf.gather(d, self.rows))

    flat = spread_rows(rows)
    if real_only:
      flat = flat * tf.cast(self.is_real, flat.dtype)
    return tf.reshape(flat, [self.batch_size, self.seq_length,
                             rows.shape[-1]])

  def unpack_heads(self, rows: tf.Tensor, parts: int,
                   heads: int) -> List[tf.Tensor]:
    """[rows, parts x heads x head_dim] -> `parts` tensors [batch, heads, seq,
    head_dim] (query, key, value), as `unpack` then a split into heads.

    Positions without a row behave as in `unpack`.
    """
    head_dim = rows.shape[-1] // (parts * heads)
    batch, seq, slices = self.batch_size, self.seq_length, parts * heads
    clipped = self._nearest_row()
    # Slice (part p, head n) of position (b, s) is slice row x P*N + p*N + n.
    index = (tf.reshape(clipped, [1, batch, 1, seq]) * slices
             + tf.reshape(tf.range(slices), [parts, 1, heads, 1]))
    # Back: row r (at b, s) gets entry (p, b, n, s) of [P, B, N, S].
    back = (tf.reshape(self._head_major_index(heads), [-1, 1, 1])
            + tf.reshape(tf.range(parts), [1, parts, 1]) * (batch * heads * seq)
            + tf.reshape(tf.range(heads), [1, 1, heads]) * seq)

    @tf.custom_gradient
    def gather_slices(flat):
      return (tf.gather(flat, tf.reshape(index, [-1])),
              lambda d: tf.gather(d, tf.reshape(back, [-1])))

    split = gather_slices(tf.reshape(rows, [-1, head_dim]))
    split = tf.reshape(split, tf.stack([parts, batch, heads, seq, head_dim]))
    return tf.unstack(split, num=parts, axis=0)

  def pack_heads(self, values: tf.Tensor) -> tf.Tensor:
    """[batch, heads, seq, head_dim] -> [rows, heads x head_dim]: heads merged
    and rows packed by one gather (no transpose); positions without a row
    get a zero gradient."""
    heads, head_dim = values.shape[1], values.shape[-1]
    batch, seq = self.batch_size, self.seq_length
    index = (tf.reshape(self._head_major_index(heads), [-1, 1])
             + tf.range(heads)[tf.newaxis, :] * seq)             # [rows, N]
    # Back: slice (b, n, s) from slice row x N + n, or from a zero slice
    # appended after the num_rows x N slices where no row is.
    back = tf.where(
        tf.reshape(self.row_of_position < self.num_rows, [batch, 1, seq]),
        tf.reshape(self.row_of_position, [batch, 1, seq]) * heads
        + tf.reshape(tf.range(heads), [1, heads, 1]),
        self.num_rows * heads)                                   # [B, N, S]

    @tf.custom_gradient
    def gather_slices(flat):
      def grad(d):
        with_zero = tf.concat([d, tf.zeros([1, head_dim], d.dtype)], axis=0)
        return tf.gather(with_zero, tf.reshape(back, [-1]))
      return tf.gather(flat, tf.reshape(index, [-1])), grad

    packed = gather_slices(tf.reshape(values, [-1, head_dim]))
    return tf.reshape(packed, [-1, heads * head_dim])

  def _nearest_row(self) -> tf.Tensor:
    """[batch x seq] the row of each position, clipped to the last row where
    a position has none (its gathered value is then arbitrary)."""
    return tf.minimum(self.row_of_position, self.num_rows - 1)

  def _head_major_index(self, heads: int) -> tf.Tensor:
    """[rows] each packed row's index (b, 0, s) in a flat [batch, heads, seq]
    layout; head n is `seq` x n further."""
    row_batch = self.rows // self.seq_length
    row_seq = self.rows % self.seq_length
    return row_batch * heads * self.seq_length + row_seq

  def _spread(self, rows):
    """Rows to their positions, zeros where no row is (pack's gradient)."""
    covered = tf.cast(self.row_of_position < self.num_rows, rows.dtype)
    return tf.gather(rows, self._nearest_row()) * covered[:, tf.newaxis]

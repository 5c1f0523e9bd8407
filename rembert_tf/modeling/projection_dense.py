"""ProjectionDense: a dense projection whose kernel keeps an EinsumDense shape.

Builds on Keras' `EinsumDense` as Model Garden's `TransformerEncoderBlock`
uses it (same variable names and shapes), but computes one 2-D `MatMul` on
[rows, in] plus `BiasAdd`, which have dedicated CPU kernels both ways.

Example:
<!-- snippet: not run: a fragment: `ProjectionDense` comes from the caller's code -->
```python
dense = ProjectionDense(output_dims=[4, 8], name="query")  # kernel [H, 4, 8]
y = dense(tf.ones([2, 16, 32]))   # [2, 16, 32]: heads flattened
dense.flat_kernel().shape          # [32, 32]
```
"""
from typing import Any, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
class ProjectionDense(tf_keras.layers.Layer):
  """y = x @ kernel + bias over the flattened trailing axes.

  Args:
    output_dims: trailing shape of the kernel and the shape of the bias, e.g.
      [heads, head_dim] for a query projection or [hidden] for a plain dense.
    input_dims: leading shape of the kernel; its product must be the inputs'
      last dimension. Default: [inputs' last dimension].
    kernel_initializer, bias_initializer: as for Keras' EinsumDense.
  """

  def __init__(self,
               output_dims: Sequence[int],
               input_dims: Optional[Sequence[int]] = None,
               kernel_initializer="glorot_uniform",
               bias_initializer="zeros",
               **kwargs):
    super().__init__(**kwargs)
    self._output_dims = [int(d) for d in output_dims]
    self._input_dims = (None if input_dims is None
                        else [int(d) for d in input_dims])
    self._kernel_initializer = tf_keras.initializers.get(kernel_initializer)
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)
    self.kernel = None
    self.bias = None

  @property
  def input_size(self) -> int:
    return int(np.prod(self._input_dims))

  @property
  def output_size(self) -> int:
    return int(np.prod(self._output_dims))

  def build(self, input_shape):
    last = tf.TensorShape(input_shape)[-1]
    if self._input_dims is None:
      self._input_dims = [int(last)]
    if last is not None and int(last) != self.input_size:
      raise ValueError(f"{self.name}: inputs have last dimension {last}, the "
                       f"kernel expects {self.input_size} ({self._input_dims}).")
    self.kernel = self.add_weight(
        "kernel", shape=self._input_dims + self._output_dims,
        initializer=self._kernel_initializer, dtype=self.dtype, trainable=True)
    self.bias = self.add_weight(
        "bias", shape=self._output_dims, initializer=self._bias_initializer,
        dtype=self.dtype, trainable=True)
    super().build(input_shape)

  def flat_kernel(self) -> tf.Tensor:
    """The kernel as [prod(input_dims), prod(output_dims)] (a free reshape)."""
    return tf.reshape(self.kernel, [self.input_size, self.output_size])

  def flat_bias(self) -> tf.Tensor:
    return tf.reshape(self.bias, [self.output_size])

  def call(self, inputs):
    return project_rows(inputs, self.flat_kernel(), self.flat_bias())

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        output_dims=self._output_dims,
        input_dims=self._input_dims,
        kernel_initializer=tf_keras.initializers.serialize(
            self._kernel_initializer),
        bias_initializer=tf_keras.initializers.serialize(
            self._bias_initializer))
    return config


def project_rows(inputs: tf.Tensor, kernel: tf.Tensor,
                 bias: tf.Tensor) -> tf.Tensor:
  """inputs [..., in] @ kernel [in, out] + bias [out] as one 2-D MatMul +
  BiasAdd on the [rows, in] view (free reshapes); returns [..., out]."""
  rows = tf.reshape(inputs, [-1, kernel.shape[0]])
  outputs = tf.nn.bias_add(matmul(rows, kernel), bias)
  if inputs.shape.rank == 2:
    return outputs
  leading = tf.shape(inputs)[:-1]
  return tf.reshape(outputs, tf.concat([leading, [kernel.shape[1]]], 0))


def matmul(rows: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
  """rows @ kernel, with the kernel gradient computed as (grad^T @ rows)^T.

  On oneDNN that orientation is faster when in > out; the result agrees to
  float rounding.
  """
  if kernel.shape[0] is None or kernel.shape[1] is None or (
      kernel.shape[0] <= kernel.shape[1]):
    return tf.matmul(rows, kernel)

  @tf.custom_gradient
  def product(rows, kernel):
    def grad(dy):
      return (tf.matmul(dy, kernel, transpose_b=True),
              tf.transpose(tf.matmul(dy, rows, transpose_a=True)))
    return tf.matmul(rows, kernel), grad

  return product(rows, kernel)


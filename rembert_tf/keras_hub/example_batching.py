"""One example or a batch, in Python and inside `tf.data`, for Python encoders.

The tagging and question-answering preprocessors encode in Python (words
tokenised one by one, character spans of context pieces), on batches. They
follow keras-hub's preprocessing conventions
(`keras_hub.src.layers.preprocessing.PreprocessingLayer._use_tf_workflow`:
the TensorFlow path while `tf.data` or a `tf.function` traces, the Python path
elsewhere, e.g. in Grain): inside `tf.data` the batch encoder runs as a
`tf.numpy_function` on the flat values of the (ragged) inputs; in Python the
inputs become plain lists. A single example (one sentence of words, one
question string) is encoded as a batch of one and comes back without the
batch axis, never silently as a batch.
"""
from typing import Callable, List, Sequence

import keras
import numpy as np
import tensorflow as tf  # keras-hub's preprocessing runs on tf.data


def _decoded(value):
  return value.decode("utf-8") if isinstance(value, bytes) else value


def to_python(values):
  """Tensors, arrays and lists (of strings or numbers, nested) -> plain
  Python values, strings decoded."""
  if isinstance(values, tf.RaggedTensor):
    values = values.to_list()
  elif isinstance(values, tf.Tensor):
    values = values.numpy()   # bytes for a string scalar
  if isinstance(values, (np.ndarray, np.generic)):
    values = values.tolist()
  elif not isinstance(values, (list, tuple, str, bytes, int, float)):
    values = keras.ops.convert_to_numpy(values).tolist()   # jax / torch
  if isinstance(values, (list, tuple)):
    return [to_python(v) for v in values]
  return _decoded(values)


def unbatch(outputs):
  """The first (only) row of every array in a nested structure."""
  return keras.tree.map_structure(lambda array: array[0], outputs)


def _ragged(tensor, rank: int) -> tf.RaggedTensor:
  """A batch ([batch, ...]) as a ragged tensor of `rank` (strings pad with
  nothing: a dense batch of words has no padding)."""
  if isinstance(tensor, tf.RaggedTensor):
    return tensor
  tensor = tf.convert_to_tensor(tensor)
  return tf.RaggedTensor.from_tensor(tensor) if rank > 1 else tensor


def encode_in_graph(encode_batch: Callable[..., Sequence[np.ndarray]],
                    inputs: List, input_ranks: List[int], single: bool,
                    output_dtypes: List[tf.dtypes.DType],
                    output_shapes: List[List]) -> List[tf.Tensor]:
  """Runs `encode_batch` (Python lists in, numpy arrays out) inside a graph.

  inputs: tensors of one batch ([batch] or [batch, (ragged)]) or, `single`,
    of one example (the batch axis is added, then dropped from the outputs).
  input_ranks: the rank of each input as a batch (1 or 2).
  output_shapes: each output's shape without the batch axis.
  """
  if single:
    inputs = [tf.expand_dims(tf.convert_to_tensor(t), 0) for t in inputs]
  flat = []
  for tensor, rank in zip(inputs, input_ranks):
    tensor = _ragged(tensor, rank)
    if isinstance(tensor, tf.RaggedTensor):
      flat += [tensor.flat_values, tensor.row_splits]
    else:
      flat += [tensor, tf.zeros([0], tf.int64)]

  def run(*arrays):
    lists = []
    for (values, splits), rank in zip(zip(arrays[::2], arrays[1::2]),
                                      input_ranks):
      values = [_decoded(v) for v in values.tolist()]
      if rank > 1:
        values = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
      lists.append(values)
    return [np.asarray(o, d.as_numpy_dtype) for o, d in
            zip(encode_batch(*lists), output_dtypes)]

  outputs = tf.numpy_function(run, flat, output_dtypes, stateful=False)
  for tensor, shape in zip(outputs, output_shapes):
    tensor.set_shape([None] + list(shape))
  return [o[0] for o in outputs] if single else list(outputs)

"""Activation functions by the names RemBERT configs use.

`gelu` is the exact (erf) GELU of the released RemBERT config, `gelu_approx`
the tanh approximation of BERT; both are registered Keras serializables.
"""
import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
def gelu_exact(x):
  """GELU with the exact Gaussian CDF: x * Phi(x)."""
  return tf.nn.gelu(x, approximate=False)


@tf_keras.utils.register_keras_serializable(package="rembert_tf")
def gelu_approx(x):
  """GELU with the tanh approximation of the original BERT code."""
  return tf.nn.gelu(x, approximate=True)


_BY_NAME = {
    "gelu": gelu_exact,
    "gelu_approx": gelu_approx,
    "relu": tf.nn.relu,
    "tanh": tf.math.tanh,
    "swish": tf.nn.silu,
}


def get(name: str):
  """Maps a config's `hidden_act` to a callable."""
  try:
    return _BY_NAME[name]
  except KeyError:
    raise ValueError(f"unknown activation {name!r}; expected one of "
                     f"{', '.join(_BY_NAME)}") from None

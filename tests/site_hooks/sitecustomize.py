"""The test processes import TensorFlow without JAX.

With JAX installed (the `[keras]` extra), `import tensorflow` imports it for
one optional helper: TFLite's converter of JAX functions
(tensorflow/lite/python/util.py, `from jax import jit` in a try block), and
no test converts to TFLite. Here that one import finds no JAX, as if it were
not installed; every other `import jax` (the Keras 3 checks on JAX) imports
it as usual.

tests/conftest.py installs this in the pytest process and puts this folder
on the PYTHONPATH of the processes the tests start, where Python imports
`sitecustomize` at start-up. A process started without the tests'
PYTHONPATH (the wheel's console scripts, keras-hub's CI run) is a user's.
"""
import sys

_TFLITE_HELPER = "tensorflow.lite.python.util"


class NoJaxForTFLite:
  """A meta-path finder that refuses `jax` to TFLite's helper module alone."""

  @staticmethod
  def find_spec(name, path=None, target=None):
    del path, target
    if name != "jax":
      return None
    frame = sys._getframe(1)  # pylint: disable=protected-access
    while frame is not None:
      if frame.f_globals.get("__name__") == _TFLITE_HELPER:
        raise ModuleNotFoundError(
            "the tests do not import JAX for TFLite", name=name)
      frame = frame.f_back
    return None  # the usual finders import it


if NoJaxForTFLite not in sys.meta_path:
  sys.meta_path.insert(0, NoJaxForTFLite)

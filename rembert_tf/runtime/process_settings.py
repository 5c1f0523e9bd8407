"""Precision, op determinism and seeds for a block of training work, put back
when the block ends. Builds on Keras' global mixed-precision policy and
TensorFlow's op determinism.

Example:
```python
from rembert_tf.runtime import process_settings
with process_settings.training_settings("mixed_bfloat16", deterministic=True,
                                        seed=3):
  ...  # layers built here compute in bfloat16; ops are deterministic
```
"""
import contextlib
from typing import Iterator, Optional

import tensorflow as tf
import tf_keras
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import

from rembert_tf.common import errors

# A precision name (the flag's, or Model Garden's) -> the Keras policy.
POLICIES = {None: "float32", "": "float32", "float32": "float32",
            "mixed_bfloat16": "mixed_bfloat16", "bfloat16": "mixed_bfloat16"}


@contextlib.contextmanager
def training_settings(precision: Optional[str] = "float32",
                      deterministic: bool = False,
                      seed: Optional[int] = None,
                      checkpointed_dropout_generators: bool = False
                      ) -> Iterator[None]:
  """Sets the policy, determinism and seeds; restores the first two after.

  Args:
    precision: a name of POLICIES.
    deterministic: TensorFlow op determinism, and the seeds (0 by default).
    seed: seeds Python, NumPy and TensorFlow.
    checkpointed_dropout_generators: with `deterministic`, Keras layers draw
      from `tf.random.Generator`s, whose state is checkpointed (fine-tuning's
      dropout resumes exactly).
  """
  if precision not in POLICIES:
    raise errors.UsageError(f"--mixed_precision {precision!r}: expected "
                            "float32 or mixed_bfloat16.")
  previous_policy = tf_keras.mixed_precision.global_policy()
  previous_determinism = tf_config.is_op_determinism_enabled()
  previous_generators = (
      tf_keras.backend.experimental.is_tf_random_generator_enabled())
  tf_keras.mixed_precision.set_global_policy(POLICIES[precision])
  if deterministic:
    tf.config.experimental.enable_op_determinism()
    if checkpointed_dropout_generators:
      tf_keras.backend.experimental.enable_tf_random_generator()
  if deterministic or seed is not None:
    set_seed(0 if seed is None else seed)
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous_policy)
    if not previous_determinism:
      tf_config.disable_op_determinism()
    if not previous_generators:
      tf_keras.backend.experimental.disable_tf_random_generator()


def set_seed(seed: int) -> None:
  """Seeds Python's, NumPy's and TensorFlow's random generators."""
  tf_keras.utils.set_random_seed(seed)

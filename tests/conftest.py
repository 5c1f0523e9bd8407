"""Test-session setup: TensorFlow is imported once, with 2 logical CPU devices.

Logical devices can only be configured before TensorFlow initialises its
runtime, so this happens here, before any test module builds a tensor. Tests
that need two replicas take the session-wide `two_cpu_strategy` fixture.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(),
               tf.config.LogicalDeviceConfiguration()])

TWO_CPUS = ["/cpu:0", "/cpu:1"]


@pytest.fixture(scope="session")
def two_cpu_strategy():
  """One MirroredStrategy for the whole session.

  Every strategy instance numbers its collective ops from the same keys, and
  the runtime caches a collective's shape by key: two instances in one
  process that all-reduce different shapes abort with "Shape mismatch in the
  collective instance". Tests therefore share this one (so should a user's
  process: one strategy per program).
  """
  return tf.distribute.MirroredStrategy(TWO_CPUS)

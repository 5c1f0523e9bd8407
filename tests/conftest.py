"""Test-session setup: TensorFlow is imported once, with 2 logical CPU devices.

Logical devices can only be configured before TensorFlow initialises its
runtime, so this happens here, before any test module builds a tensor. Every
test can then use `tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])`.
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


@pytest.fixture
def two_cpu_strategy():
  return tf.distribute.MirroredStrategy(TWO_CPUS)


@pytest.fixture
def tiny_config():
  from rembert_tf.modeling import rembert_config
  return rembert_config.load_model_config("tiny")

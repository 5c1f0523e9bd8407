"""The `--strategy` and `--mixed_precision` names, without TensorFlow: the
commands define their flags and answer `--help` before TensorFlow loads.

Example:
```python
from rembert_tf.runtime import choices
choices.strategy_name("off")      # 'default' (Model Garden's spelling)
```
"""
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu",
              "default")
DEFAULT_STRATEGY = "one_device"
PRECISION_FLAG_VALUES = ("float32", "mixed_bfloat16")


def strategy_name(distribution_strategy):
  """Our --strategy name of a Model Garden `runtime.distribution_strategy`."""
  return "default" if distribution_strategy == "off" else distribution_strategy

"""The runtime's names a command line chooses from, without TensorFlow.

The `--strategy` names (`strategies` builds each one) and the
`--mixed_precision` names (`process_settings` applies each one) are defined
here, on their own, so that the commands define their flags and answer
`--help` without importing TensorFlow or Model Garden.

Example:
```python
from rembert_tf.runtime import choices
choices.DEFAULT_STRATEGY          # 'one_device'
"tpu" in choices.STRATEGIES       # True
choices.PRECISION_FLAG_VALUES     # ('float32', 'mixed_bfloat16')
```
"""
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu",
              "default")
DEFAULT_STRATEGY = "one_device"
# Our strategy names that Model Garden's `runtime.distribution_strategy`
# spells otherwise (its others are ours).
MODEL_GARDEN_STRATEGY_NAMES = {"default": "off"}


def strategy_name(distribution_strategy):
  """Our --strategy name of a Model Garden `runtime.distribution_strategy`
  (unchanged when it is none of Model Garden's own spellings)."""
  ours = {mg: name for name, mg in MODEL_GARDEN_STRATEGY_NAMES.items()}
  return ours.get(distribution_strategy, distribution_strategy)


# What the command line says about precision (process_settings maps each to
# a Keras policy).
PRECISION_FLAG_VALUES = ("float32", "mixed_bfloat16")

"""The `--strategy` and `--mixed_precision` names, without TensorFlow: the
commands define their flags and answer `--help` before TensorFlow loads.

Example:
```python
from rembert_tf.runtime import choices
choices.FLAG_SPELLING["off"]      # 'default': Model Garden's name of it
```
"""
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu",
              "default")
DEFAULT_STRATEGY = "one_device"
PRECISION_FLAG_VALUES = ("float32", "mixed_bfloat16")
# Model Garden's names of a runtime setting -> the flag's
# (runtime.distribution_strategy, runtime.mixed_precision_dtype).
FLAG_SPELLING = {"off": "default", "bfloat16": "mixed_bfloat16"}

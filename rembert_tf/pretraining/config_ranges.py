"""The range of every numeric field of an experiment config, checked in one walk.

Model Garden's config dataclasses (`official.core.config_definitions`,
`official.modeling.optimization`) declare types but not ranges: a negative
learning rate trains to the end, a batch of 0 or a dropout of 2 fail deep in
TensorFlow. The rules here go by field name, so a field of any part of the
experiment (task, data, trainer, optimizer, schedule) gets its range wherever
it sits; `experiments.load_experiment_config` raises the message as one line.

Example:
```python
from rembert_tf.pretraining import config_ranges
from rembert_tf.pretraining import experiments

config = experiments.load_experiment_config(["pretrain_tiny_demo"])
config.trainer.optimizer_config.learning_rate.polynomial.initial_learning_rate = -1.0
print(config_ranges.first_out_of_range(config))
# trainer.optimizer_config.learning_rate.polynomial.initial_learning_rate is
# -1.0; it must be above 0 (a learning rate, e.g. 1e-4).
```
"""
import dataclasses
import math
from typing import Any, Callable, Optional, Tuple

from official.modeling import hyperparams

_Rule = Tuple[Tuple[str, ...], Callable[[float], bool], str]

# (field names, whether a value fits, what it must be). The first rule whose
# names hold the field's name applies; a name ending in `_` is a suffix.
RULES = (
    (("initial_learning_rate", "learning_rate"), lambda v: v > 0,
     "above 0 (a learning rate, e.g. 1e-4)"),
    (("end_learning_rate", "warmup_learning_rate", "weight_decay_rate",
      "warmup_steps", "alpha", "offset", "gradient_clip_norm",
      "stop_check_steps"),
     lambda v: v >= 0, "at least 0"),
    (("epsilon", "clipnorm", "clipvalue", "global_clipnorm",
      "stop_check_seconds"),
     lambda v: v > 0, "above 0"),
    (("beta_1", "beta_2"), lambda v: 0 <= v < 1, "in [0, 1)"),
    (("_prob", "mask_token_rate", "random_token_rate", "dropout_rate"),
     lambda v: 0 <= v <= 1, "in [0, 1]"),
    (("global_batch_size", "seq_length", "max_predictions_per_seq",
      "decay_steps", "steps_per_loop", "train_steps", "cycle_length",
      "block_length", "shuffle_buffer_size", "num_shards",
      "checkpoint_interval", "max_to_keep",
      "encoder_export_every_n_checkpoints"),
     lambda v: v >= 1, "at least 1"),
)


def _rule_for(name: str) -> Optional[_Rule]:
  for names, fits, wanted in RULES:
    for rule_name in names:
      if name == rule_name or (rule_name.startswith("_") and
                               name.endswith(rule_name)):
        return names, fits, wanted
  return None


def _is_number(value: Any) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fields(config: Any):
  """The fields in use: of a one-of config (an optimizer, a schedule), only
  the one its `type` picks."""
  if isinstance(config, hyperparams.OneOfConfig):
    return [f for f in dataclasses.fields(config) if f.name == config.type]
  return dataclasses.fields(config)


def first_out_of_range(config: Any, path: str = "") -> Optional[str]:
  """`FIELD is VALUE; it must be RANGE.` for the first field out of its
  range (fields of every nested dataclass), or None. Not a finite number
  (nan, inf) is out of every range. Fields left unset (None) are not
  checked."""
  for field in _fields(config):
    value, name = getattr(config, field.name), f"{path}{field.name}"
    if dataclasses.is_dataclass(value):
      found = first_out_of_range(value, name + ".")
      if found:
        return found
      continue
    if not _is_number(value):
      continue
    rule = _rule_for(field.name)
    if not math.isfinite(value):
      return f"{name} is {value!r}; it must be a finite number."
    if rule and not rule[1](value):
      return f"{name} is {value!r}; it must be {rule[2]}."
  return None

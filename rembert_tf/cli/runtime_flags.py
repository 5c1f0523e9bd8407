"""The runtime flags `rembert-train` and `rembert-finetune` share, defined once
(their names come from `rembert_tf.runtime.choices`, which imports no
TensorFlow: `--help` answers at once).

absl keeps one flag registry per process, and a flag name can be defined only
once in it: when the train and fine-tune command modules each defined
`--strategy`, they could not both be imported into one process (the test
suite; the ablation suite, which pre-trains and fine-tunes in-process).
"""
from absl import flags

from rembert_tf.runtime import choices

flags.DEFINE_enum(
    "strategy", choices.DEFAULT_STRATEGY, list(choices.STRATEGIES),
    "tf.distribute strategy (`default`: TensorFlow's default strategy, no "
    "tf.distribute scope).")
flags.DEFINE_string(
    "tpu", None, "TPU name or grpc://host:port (TPUClusterResolver); omit on a "
    "TPU VM.")
flags.DEFINE_enum(
    "mixed_precision", None, list(choices.PRECISION_FLAG_VALUES),
    "Compute precision; overrides the experiment's "
    "runtime.mixed_precision_dtype.")
flags.DEFINE_bool(
    "deterministic", False, "Op determinism and fixed seeds: a resumed run "
    "gives the same result as an uninterrupted one.")
flags.DEFINE_integer(
    "seed", None, "Random seed for weights, dropout and data order "
    "(fine-tuning: the first seed of the sweep, 0 when not given).",
    lower_bound=0)

"""The flags `rembert-train` and `rembert-finetune` share, defined once (absl
allows one definition of a name per process, and the ablation suite loads
both trainers), with names from `rembert_tf.runtime.choices`: no TensorFlow,
`--help` answers at once.

--strategy, --tpu and --mixed_precision stand for fields of an experiment's
`runtime` section (`EXPERIMENT_FIELDS`): the field holds unless the flag is
given.
"""
from typing import Dict, Tuple

from absl import flags

from rembert_tf.cli import experiment_flags  # noqa: F401  (--tpu)
from rembert_tf.runtime import choices

FLAGS = flags.FLAGS
EXPERIMENT_FIELDS = {"strategy": "distribution_strategy", "tpu": "tpu",
                     "mixed_precision": "mixed_precision_dtype"}

flags.DEFINE_enum(
    "strategy", choices.DEFAULT_STRATEGY, list(choices.STRATEGIES),
    "tf.distribute strategy (`default`: TensorFlow's default strategy, no "
    "tf.distribute scope); overrides an experiment's "
    "runtime.distribution_strategy.")
flags.declare_key_flag("tpu")  # Model Garden's (experiment_flags)
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
flags.DEFINE_bool(
    "allow_sentencepiece_mismatch", False, "Go on although the records were "
    "made with another SentencePiece model than the checkpoint's "
    "(fine-tuning) or model_dir's (resuming pre-training): a warning instead "
    "of an error.")


def given_fields() -> Dict[str, Tuple[str, str]]:
  """{runtime field: (the flag as given, its value)} of the flags given:
  `experiment_files.with_flags` sets them over the experiment's."""
  return {f"runtime.{field}": (f"--{flag} {FLAGS[flag].value}",
                               FLAGS[flag].value)
          for flag, field in EXPERIMENT_FIELDS.items() if FLAGS[flag].present}

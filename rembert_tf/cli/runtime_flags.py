"""The flags `rembert-train` and `rembert-finetune` share, defined once (absl
allows one definition of a name per process, and the ablation suite loads
both trainers), with names from `rembert_tf.runtime.choices`: no TensorFlow,
`--help` answers at once.

--strategy, --tpu and --mixed_precision stand for fields of an experiment's
`runtime` section (`EXPERIMENT_FIELDS`); `experiment_runtime` decides as
Model Garden's train.py users expect: the field holds unless the flag is
given, and a flag that overrides another value says so in one note.
"""
from typing import Dict, List, Optional, Tuple

from absl import flags

from rembert_tf.cli import experiment_flags  # noqa: F401  (--tpu)
from rembert_tf.common import errors
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


def _as_flag_value(flag: str, value) -> Optional[str]:
  """The flag value an experiment's runtime field means (None: not set)."""
  if value in (None, "") or flag == "tpu":
    return value or None
  if flag == "mixed_precision":
    return "mixed_bfloat16" if value == "bfloat16" else value
  if choices.strategy_name(value) not in choices.STRATEGIES:
    raise errors.UsageError(
        f"runtime.distribution_strategy {value!r}: expected one of "
        f"{', '.join(choices.STRATEGIES)} (Model Garden's 'off' is "
        "'default'); change the experiment YAML or give --strategy.")
  return choices.strategy_name(value)


def experiment_runtime(runtime) -> Tuple[Dict[str, Optional[str]], List[str]]:
  """--strategy, --tpu and --mixed_precision for a run of an experiment whose
  `runtime` section (Model Garden's `RuntimeConfig`) is `runtime`, and one
  note per flag given that overrides a different value of its field. A flag
  left out takes its field's value when set (--mixed_precision: None, the
  runner then keeps the field), else its own default."""
  chosen, notes = {}, []
  for flag, field in EXPERIMENT_FIELDS.items():
    written = getattr(runtime, field)
    from_experiment = _as_flag_value(flag, written)
    chosen[flag] = FLAGS[flag].value
    if not FLAGS[flag].present:
      if flag != "mixed_precision" and from_experiment is not None:
        chosen[flag] = from_experiment
    elif from_experiment not in (None, FLAGS[flag].value):
      notes.append(f"--{flag} {FLAGS[flag].value} overrides the experiment's "
                   f"runtime.{field}: {written}")
  return chosen, notes

"""The flags `rembert-train` and `rembert-finetune` share, defined once
(their names come from `rembert_tf.runtime.choices`, which imports no
TensorFlow: `--help` answers at once).

absl keeps one flag registry per process, and a flag name can be defined only
once in it: when the train and fine-tune command modules each defined
`--strategy`, they could not both be imported into one process (the test
suite; the ablation suite, which pre-trains and fine-tunes in-process).

An experiment config (Model Garden's `runtime` section) holds the same three
settings; `experiment_runtime` decides between a flag and its field as Model
Garden's train.py users expect: the field holds unless the flag is given, and
a flag that overrides a different field value says so in one note.
"""
from typing import Dict, List, Optional, Tuple

from absl import flags

from rembert_tf.cli import experiment_flags  # noqa: F401  (--tpu)
from rembert_tf.common import errors
from rembert_tf.runtime import choices

FLAGS = flags.FLAGS
# A runtime flag -> the field of an experiment's `runtime` it stands for.
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


def _field_as_flag_value(flag: str, value) -> Optional[str]:
  """The flag value an experiment's runtime field means (None: not set)."""
  if value in (None, ""):
    return None
  if flag == "strategy":
    ours = choices.strategy_name(value)
    if ours not in choices.STRATEGIES:
      raise errors.UsageError(
          f"runtime.distribution_strategy {value!r}: expected one of "
          f"{', '.join(choices.STRATEGIES)} (Model Garden's 'off' is "
          "'default'); change the experiment YAML or give --strategy.")
    return ours
  if flag == "mixed_precision":
    from rembert_tf.runtime import process_settings  # pylint: disable=g-import-not-at-top
    try:
      return process_settings.keras_policy(value)  # bfloat16: mixed_bfloat16
    except process_settings.PrecisionError:
      return value  # float16: the task refuses it with its own line
  return value


def experiment_runtime(runtime) -> Tuple[Dict[str, Optional[str]], List[str]]:
  """--strategy, --tpu and --mixed_precision for a run of an experiment whose
  `runtime` section (Model Garden's `RuntimeConfig`) is `runtime`, and one
  note per flag given that overrides a different value of its field.

  A flag left out takes its field's value when the experiment sets one
  (--mixed_precision: None, the runner then keeps the field), else its own
  default. Imports TensorFlow: call it inside a command's `main`.
  """
  chosen, notes = {}, []
  for flag, field in EXPERIMENT_FIELDS.items():
    written = getattr(runtime, field)
    from_experiment = _field_as_flag_value(flag, written)
    if not FLAGS[flag].present:
      keep_field = flag != "mixed_precision" and from_experiment is not None
      chosen[flag] = from_experiment if keep_field else FLAGS[flag].value
      continue
    chosen[flag] = FLAGS[flag].value
    if from_experiment is not None and from_experiment != FLAGS[flag].value:
      notes.append(f"--{flag} {FLAGS[flag].value} overrides the experiment's "
                   f"runtime.{field}: {written}")
  return chosen, notes

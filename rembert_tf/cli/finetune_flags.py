"""`rembert-finetune`'s flags: aliases of the fine-tuning experiment's fields.

The settings are defined once, in the experiment's dataclasses
(`finetuning.finetuning_experiment`); a flag is a short name for one field
(`FLAG_FIELDS`), has no default of its own and sets its field only when
given; beside a YAML or --params_override value for the same field the flag
wins, with one note (`given_flags`). No TensorFlow is imported here: --help
answers at once.

Example:
```python
from rembert_tf.cli import finetune_flags
finetune_flags.FLAG_FIELDS["warmup_proportion"]   # 'trainer.warmup_proportion'
finetune_flags.field_value("learning_rates", ["1e-5", "3e-5"])  # [1e-05, 3e-05]
```
"""
from typing import Any, Dict, Tuple

from absl import flags

from rembert_tf.cli import runtime_flags
from rembert_tf.cli import xtreme_source_flags
from rembert_tf.common import command
from rembert_tf.common import errors
from rembert_tf.evaluation import xtreme_tasks  # the task names; no TensorFlow

_TRAINER_FLAGS = ("learning_rate", "seed", "num_train_epochs", "num_train_steps",
                  "warmup_proportion", "train_batch_size", "eval_batch_size",
                  "steps_per_loop", "checkpoint_interval", "jit_compile",
                  "deterministic", "keep_checkpoints",
                  "freeze_input_embeddings")
_DATA_FLAGS = ("task", "records_dir", "data_dir", "data_source",
               "tfds_data_dir", "sentencepiece_model", "languages",
               "seq_length", "splits", "allow_unlabelled_dev",
               "allow_sentencepiece_mismatch")
# rembert-finetune flag -> the field of the fine-tuning experiment it sets.
FLAG_FIELDS = {
    **{name: f"data.{name}" for name in _DATA_FLAGS},
    "init_checkpoint": "encoder.init_checkpoint",
    "model_config": "encoder.model_config",
    "learning_rates": "sweep.learning_rates",
    "num_seeds": "sweep.num_seeds",
    "compare": "sweep.compare_paper",
    **{name: f"trainer.{name}" for name in _TRAINER_FLAGS},
    **{flag: f"runtime.{field}"
       for flag, field in runtime_flags.EXPERIMENT_FIELDS.items()},
}
# The modules of the flags of FLAG_FIELDS that several commands share
# (rembert-finetune lists their flags under --help; --tpu is Model Garden's).
SHARED_FLAG_MODULES = (runtime_flags, xtreme_source_flags)

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Predictions, scores, results table.")
flags.DEFINE_bool("overwrite", False, "Start --output_dir again: remove its "
                  "runs and results first (a rerun with other settings or "
                  "training files is refused without it).")
flags.DEFINE_enum("task", None, list(xtreme_tasks.FINETUNING_TASKS),
                  "XTREME task.")
flags.DEFINE_string("records_dir", None, "Records of the task "
                    "(rembert-create-finetuning-data OUTPUT_DIR/<task>).")
flags.DEFINE_string("data_dir", None, "Or: the XTREME download/ folder "
                    "(records are written under --output_dir/records).")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model for "
                    "--data_dir or TFDS (default: "
                    "<init_checkpoint>/sentencepiece.model).")
flags.DEFINE_list("languages", None, "With --data_dir or TFDS: dev/test "
                  "languages (default: all present).")
flags.DEFINE_integer("seq_length", None, "With --data_dir or TFDS: sequence "
                     "length.", lower_bound=8)
flags.DEFINE_list("splits", None, "Splits to predict (and score when "
                  "labelled).")
flags.DEFINE_string("init_checkpoint", None, "Pre-training model_dir, "
                    "converted checkpoint dir, encoder ckpt prefix or "
                    "SavedModel dir.")
flags.DEFINE_string("model_config", None, "Model config name / YAML, when "
                    "the checkpoint does not carry model_config.yaml.")
flags.DEFINE_float("learning_rate", None, "Learning rate (one run).")
flags.DEFINE_list("learning_rates", None, "Sweep: rates to try; the best on "
                  "English dev is selected.")
flags.DEFINE_integer("num_seeds", None, "Runs per rate (mean / std reported).",
                     lower_bound=1)
flags.DEFINE_enum("compare", None, ["paper"], "Put the paper's coupled / "
                  "decoupled averages beside the results.")
flags.DEFINE_float("num_train_epochs", None, "Training epochs.")
flags.DEFINE_integer("num_train_steps", None, "Overrides --num_train_epochs.")
flags.DEFINE_float("warmup_proportion", None, "Linear warmup share of steps.",
                   lower_bound=0, upper_bound=1)
flags.DEFINE_integer("train_batch_size", None, "Global training batch size.",
                     lower_bound=1)
flags.DEFINE_integer("eval_batch_size", None, "Global prediction batch size.",
                     lower_bound=1)
flags.DEFINE_integer("steps_per_loop", None, "Training steps per host round "
                     "trip (one console line and summary per loop).",
                     lower_bound=1)
flags.DEFINE_integer("checkpoint_interval", None, "Checkpoint every N steps "
                     "(a killed sweep resumes from there).", lower_bound=1)
flags.DEFINE_bool("jit_compile", None, "Compile the training and prediction "
                  "steps with XLA (default: on for a TPU or GPU, off on a "
                  "CPU, where it is slower).")
flags.DEFINE_bool("freeze_input_embeddings", None, "Keep the encoder's "
                  "input embeddings (word, position, type, projection) at "
                  "their pre-trained values (zero-shot transfer from "
                  "English).")
flags.DEFINE_bool("keep_checkpoints", None, "Keep each finished run's last "
                  "checkpoint (default: removed once its predictions "
                  "exist).")
flags.DEFINE_bool("allow_unlabelled_dev", None, "Go on when dev files have "
                  "no labels or no examples (no dev score; a sweep of "
                  "several rates then takes the smallest).")
command.require("learning_rate", lambda rate: rate > 0, "a learning rate "
                "must be a positive number (e.g. 2e-5)")
command.require("num_train_epochs", lambda epochs: epochs > 0,
                "must be above 0")
command.require("num_train_steps", lambda steps: steps >= 1, "train at "
                "least 1 step, or leave it out to train --num_train_epochs "
                "epochs")
for _flag, _field in FLAG_FIELDS.items():
  if FLAGS.find_module_defining_flag(_flag) == __name__:
    FLAGS[_flag].help += f" Sets {_field}."


def field_value(flag: str, value: Any) -> Any:
  """The field value a flag's parsed value stands for."""
  if flag == "compare":
    return value == "paper"
  if flag == "learning_rates":
    try:
      return [float(rate) for rate in value]
    except ValueError:
      raise errors.UsageError(f"--learning_rates {','.join(value)}: give "
                              "numbers, e.g. 1e-5,2e-5,3e-5.") from None
  return value


def given_flags() -> Dict[str, Tuple[str, Any]]:
  """{field: (the flag as given, the field's value)} of every flag of the
  table given on the command line, for `experiment_files.with_flags` (a flag
  wins, and a note names the value it overrides). One rate (--learning_rate)
  also empties the list of rates, which would otherwise be swept instead."""
  values = {flag: field_value(flag, FLAGS[flag].value)
            for flag in FLAG_FIELDS if FLAGS[flag].present}
  given = {FLAG_FIELDS[flag]: (f"--{flag} {value}", value)
           for flag, value in values.items()}
  if "trainer.learning_rate" in given and "sweep.learning_rates" not in given:
    given["sweep.learning_rates"] = (given["trainer.learning_rate"][0], [])
  return given

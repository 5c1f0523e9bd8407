r"""Runs the ablation suite: pre-train, fine-tune, compare, tabulate. Resumable.

Every row (default: the paper's base-scale experiments
`configs/experiments/ablation_*.yaml`) is pre-trained on the same records with
the same schedule, fine-tuned on each task with the paper's protocol, and
compared layer by layer; the table and figures go under --output_dir
(docs/ablation.md). The same command again skips every finished step.

Examples:

  # the whole suite at demo size on this machine (CPU, < 30 minutes)
  rembert-run-ablation --scale demo --output_dir runs/ablation_demo
  # base scale on TPUs
  rembert-run-ablation --output_dir gs://BUCKET/ablation \
    --train_records 'gs://BUCKET/records/train/*.tfrecord' \
    --eval_records 'gs://BUCKET/records/eval/*.tfrecord' \
    --xtreme_records_dir gs://BUCKET/xtreme_records \
    --strategy tpu --tpu NAME --mixed_precision mixed_bfloat16 \
    --finetune_params_override=runtime.distribution_strategy=tpu,runtime.tpu=NAME2
"""
import sys

from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: F401,E402  (--strategy, --tpu, --mixed_precision)
from rembert_tf.common import errors  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-run-ablation
FLAGS = flags.FLAGS


def define_flags() -> None:
  """The suite's flags, defined only when it runs as a command: several are
  also rembert-finetune's or rembert-train's, which a process importing this
  module may hold (absl keeps one flag registry per process)."""
  for name in ("strategy", "tpu", "mixed_precision"):  # pre-training's, under --help
    flags.declare_key_flag(name)
  flags.DEFINE_string("output_dir", None, "Everything goes here (local or gs://).")
  flags.DEFINE_enum("scale", "base", ["base", "demo", "small"], "base: the "
                    "paper's rows on your records and XTREME data; demo: "
                    "demo-size rows on the demo corpus (minutes); small: the "
                    "same rows trained longer, three seeds (about an hour).")
  flags.DEFINE_list("experiments", None, "Base scale: experiment YAMLs / names "
                    "(default: every ablation_*).")
  flags.DEFINE_list("models", None, "Only these rows (by name, e.g. "
                    "coupled_768,decoupled_768).")
  flags.DEFINE_string("train_records", None, "Base scale: pre-training records "
                      "(glob).")
  flags.DEFINE_string("eval_records", None, "Base scale: held-out records "
                      "(glob; default the training records).")
  flags.DEFINE_string("xtreme_data_dir", None, "The XTREME download/ folder "
                      "(each task's records are made once).")
  flags.DEFINE_string("xtreme_records_dir", None, "Or: the --output_dir of "
                      "rembert-create-finetuning-data (OUTPUT/<task>/ per task).")
  flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model for "
                      "--xtreme_data_dir (default: the pre-training run's).")
  flags.DEFINE_list("tasks", None, "XTREME tasks (default: all six; demo: xnli).")
  flags.DEFINE_list("learning_rates", None, "Fine-tuning rates swept per task "
                    "(default base 1e-5,2e-5,3e-5; demo 3e-4,1e-3).")
  flags.register_validator("learning_rates", _are_numbers, "expected "
                           "comma-separated numbers, e.g. 1e-5,2e-5")
  flags.DEFINE_integer("num_seeds", None, "Fine-tuning runs per rate (default "
                       "base 3, demo 2).")
  flags.DEFINE_string("finetune_params_override", None, "Fields of the "
                      "fine-tuning experiment for every fine-tuning run "
                      "(rembert-finetune's --params_override), e.g. "
                      "trainer.num_train_epochs=2,runtime.tpu=NAME.")
  flags.declare_key_flag("params_override")  # Model Garden's (runtime_flags)
  FLAGS["params_override"].help = ("Applied to every row's experiment (dotted "
                                   "keys or YAML), e.g. "
                                   "trainer.train_steps=100000.")
  flags.DEFINE_bool("allow_different_schedules", False, "Run rows whose "
                    "experiments differ outside the model.")
  flags.DEFINE_string("similarity_sentences", None, "Sentences for the layer "
                      "similarity (text, or TSV: first column; XNLI English dev).")
  flags.DEFINE_integer("similarity_max_sentences", 256, "Sentences used for "
                       "the layer similarity.")
  flags.DEFINE_float("corpus_megabytes", 3.0, "Demo corpus size.")


def _are_numbers(values) -> bool:
  try:
    [float(v) for v in values or ()]  # pylint: disable=expression-not-assigned
  except ValueError:
    return False
  return True


def _names(values):
  """A list flag's values without empty ones (`--tasks xnli,`); None if unset."""
  return None if values is None else [v for v in values if v]


def suite_options():
  """The flags as the suite's `SuiteOptions`."""
  from rembert_tf.ablation import suite  # pylint: disable=g-import-not-at-top
  values = {name: FLAGS[name].value for name in (
      "output_dir", "scale", "train_records", "eval_records", "xtreme_data_dir",
      "xtreme_records_dir", "sentencepiece_model", "num_seeds",
      "finetune_params_override", "params_override", "strategy", "tpu",
      "mixed_precision", "allow_different_schedules", "similarity_sentences",
      "similarity_max_sentences", "corpus_megabytes")}
  for name in ("experiments", "models", "tasks"):  # `--tasks xnli,` too
    values[name] = _names(FLAGS[name].value)
  rates = _names(FLAGS.learning_rates)
  return suite.SuiteOptions(
      **values, learning_rates=rates and [float(r) for r in rates])


def run_suite(options) -> int:
  """Runs the suite of `options` (a `suite.SuiteOptions`) under its output
  lock, refusing an output that is, holds or lies in an input; the exit code
  (42 when preempted)."""
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.ablation import suite  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import output_overlap  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import preemption  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import strategies  # pylint: disable=g-import-not-at-top
  inputs = {f"--{name}": getattr(options, name) for name in (
      "xtreme_data_dir", "xtreme_records_dir", "similarity_sentences",
      "sentencepiece_model")}
  for name in ("train_records", "eval_records"):
    for path in fileio.glob(getattr(options, name)) if getattr(options, name) else ():
      inputs[f"--{name} ({path})"] = path
  output_overlap.refuse_overlap(options.output_dir, inputs, "--output_dir")
  try:
    # One suite per directory; several workers of one suite: the chief's.
    with strategies.writing_shared_output(options.output_dir):
      suite.run_suite(options)
  except preemption.TrainingPreempted as e:
    print(f"{PROG}: preempted: {e}", file=sys.stderr)
    return errors.EXIT_PREEMPTED
  return errors.EXIT_OK


@errors.command(PROG)
def main(argv) -> int:
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments {argv[1:]}; see --help "
                            "(fine-tuning settings go in --finetune_params_override).")
  return run_suite(suite_options())


def run() -> None:
  """Console-script entry point: logs to OUTPUT_DIR/logs/, errors as one line."""
  define_flags()
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              required=["output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

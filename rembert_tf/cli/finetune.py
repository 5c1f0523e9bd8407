r"""Fine-tunes RemBERT on an XTREME task (English) and evaluates every language.

Restores only the encoder (a pre-training --model_dir, a converted checkpoint
directory, an encoder checkpoint prefix or an exported SavedModel; the output
embedding is never loaded), adds the task head, trains with AdamW + warmup +
linear decay (Model Garden's train_lib / orbit loop), writes predictions in the
benchmark layout and a results table.

Each run of a sweep checkpoints every --checkpoint_interval steps. Killed, the
same command again skips the finished runs (the console says which) and
resumes the interrupted one from its newest checkpoint; with --deterministic
the final results.json equals an uninterrupted sweep's. SIGTERM saves a
checkpoint of the step reached (within about a second) and exits with code 42.

Example:

  # records made by rembert-create-finetuning-data --task xnli --output_dir records
  rembert-finetune --task xnli --records_dir records/xnli \
    --init_checkpoint pretrain_dir --output_dir ft/xnli \
    --learning_rates 1e-5,2e-5,3e-5 --num_seeds 3 --compare paper
  # or straight from the XTREME download (records written under output_dir)
  rembert-finetune --task panx --data_dir download \
    --init_checkpoint export/saved_model --model_config rembert \
    --sentencepiece_model sentencepiece.model --output_dir ft/panx \
    --strategy tpu --tpu NAME \
    --mixed_precision mixed_bfloat16
  # or from TFDS datasets prepared on Cloud Storage
  rembert-finetune --task udpos --data_source tfds \
    --tfds_data_dir gs://bucket/tensorflow_datasets \
    --init_checkpoint pretrain_dir --output_dir ft/udpos
"""
import sys

from absl import flags

from rembert_tf.common import console  # noqa: E402
console.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.cli import command_names  # noqa: E402
from rembert_tf.cli import flag_checks  # noqa: E402
from rembert_tf.cli import harness  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: F401  (--strategy, --tpu, ...)
from rembert_tf.cli import xtreme_source_flags  # (--data_source, --tfds_data_dir)
from rembert_tf.common import errors
from rembert_tf.evaluation import xtreme_tasks  # the task names; no TensorFlow

PROG = command_names.console_script(__spec__.name)  # rembert-finetune

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(runtime_flags)  # listed under --help
flags.adopt_module_key_flags(xtreme_source_flags)  # without --records_dir
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
flags.DEFINE_list("splits", ["dev", "test"], "Splits to predict (and score "
                  "when labelled).")
flags.DEFINE_string("init_checkpoint", None, "Pre-training model_dir, converted "
                    "checkpoint dir, encoder ckpt prefix or SavedModel dir.")
flags.DEFINE_string("model_config", None, "Model config name / YAML, when the "
                    "checkpoint does not carry model_config.yaml.")
flags.DEFINE_string("output_dir", None, "Predictions, scores, results table.")
flags.DEFINE_float("learning_rate", 2e-5, "Learning rate (one run).")
flags.DEFINE_list("learning_rates", None, "Sweep: rates to try; the best on "
                  "English dev is selected.")
flags.DEFINE_integer("num_seeds", 1, "Runs per rate (mean / std reported).",
                     lower_bound=1)
flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
flags.DEFINE_integer("num_train_steps", None, "Overrides --num_train_epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Linear warmup share of steps.",
                   lower_bound=0, upper_bound=1)
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.",
                     lower_bound=1)
flags.DEFINE_integer("eval_batch_size", 32, "Global prediction batch size.",
                     lower_bound=1)
flags.DEFINE_enum("compare", None, ["paper"], "Put the paper's coupled / "
                  "decoupled averages beside the results.")
flags.DEFINE_integer("steps_per_loop", 100, "Training steps per host round "
                     "trip (one console line and summary per loop).",
                     lower_bound=1)
flags.DEFINE_integer("checkpoint_interval", 1000, "Checkpoint every N steps "
                     "(a killed sweep resumes from there).", lower_bound=1)
flag_checks.require("learning_rate", lambda rate: rate > 0, "a learning rate "
                    "must be a positive number (e.g. 2e-5)")
flag_checks.require_above("num_train_epochs", 0)
flag_checks.require("num_train_steps", lambda steps: steps >= 1, "train at "
                    "least 1 step, or leave it out to train --num_train_epochs "
                    "epochs")
flags.DEFINE_bool("jit_compile", None, "Compile the training and prediction "
                  "steps with XLA (default: on for a TPU or GPU, off on a CPU, "
                  "where it is slower).")
flags.DEFINE_bool("freeze_input_embeddings", False, "Keep the encoder's input "
                  "embeddings (word, position, type, projection) at their "
                  "pre-trained values (zero-shot transfer from English).")
flags.DEFINE_bool("keep_checkpoints", False, "Keep each finished run's last "
                  "checkpoint (default: removed once its predictions exist).")
flags.DEFINE_bool("allow_unlabelled_dev", False, "Go on when dev files have "
                  "no labels or no examples (no dev score; a sweep of "
                  "several rates then takes the smallest).")


def _learning_rates():
  if not FLAGS.learning_rates:
    return [FLAGS.learning_rate]
  try:
    return [float(r) for r in FLAGS.learning_rates]
  except ValueError:
    raise errors.UsageError(f"--learning_rates {','.join(FLAGS.learning_rates)}"
                            ": give numbers, e.g. 1e-5,2e-5,3e-5.") from None


@errors.command(PROG)
def main(argv):
  del argv
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import preemption  # pylint: disable=g-import-not-at-top
  if (not FLAGS.records_dir and not FLAGS.data_dir and
      FLAGS.data_source != "tfds"):
    raise errors.UsageError("Give --records_dir (rembert-create-finetuning-data"
                            " output), --data_dir (the XTREME download/), or "
                            "--data_source tfds.")
  try:
    finetuning_runner.run_finetuning(**_finetuning_arguments())
  except preemption.TrainingPreempted as e:
    print(f"{PROG}: {e}", file=sys.stderr, flush=True)
    sys.exit(e.exit_code)


def _finetuning_arguments():
  """run_finetuning's arguments from the flags."""
  return dict(
      task=FLAGS.task, output_dir=FLAGS.output_dir,
      init_checkpoint=FLAGS.init_checkpoint, records_dir=FLAGS.records_dir,
      data_dir=FLAGS.data_dir, sp_model=FLAGS.sentencepiece_model,
      data_source=FLAGS.data_source, tfds_data_dir=FLAGS.tfds_data_dir,
      model_config=FLAGS.model_config,
      learning_rates=_learning_rates(), num_seeds=FLAGS.num_seeds,
      seed=FLAGS.seed if FLAGS.seed is not None else 0,
      num_train_epochs=FLAGS.num_train_epochs,
      num_train_steps=FLAGS.num_train_steps,
      warmup_proportion=FLAGS.warmup_proportion,
      train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.eval_batch_size, seq_length=FLAGS.seq_length,
      languages=FLAGS.languages, splits=FLAGS.splits, strategy=FLAGS.strategy,
      tpu=FLAGS.tpu,
      mixed_precision=FLAGS.mixed_precision,
      compare_paper=FLAGS.compare == "paper",
      steps_per_loop=FLAGS.steps_per_loop,
      checkpoint_interval=FLAGS.checkpoint_interval,
      jit_compile=FLAGS.jit_compile, deterministic=FLAGS.deterministic,
      keep_checkpoints=FLAGS.keep_checkpoints,
      freeze_input_embeddings=FLAGS.freeze_input_embeddings,
      allow_sp_model_mismatch=FLAGS.allow_sentencepiece_mismatch,
      allow_unlabelled_dev=FLAGS.allow_unlabelled_dev)


def run():
  """Console-script entry point. The process ends without the interpreter's
  teardown once the log is written (every result and checkpoint is complete
  by then; with the datasets and the strategy alive, the teardown takes
  seconds, a minute and more on a busy CPU)."""
  flags.mark_flags_as_required(["task", "output_dir"])
  harness.run_command(main, __doc__, program=PROG,
                      output_dir_flag="output_dir", exit_without_teardown=True)


if __name__ == "__main__":
  run()

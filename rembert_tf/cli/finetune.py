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

The settings are the fields of the fine-tuning experiment
(`rembert_finetuning`; configs/experiments/xtreme_<task>.yaml set the task):
--config_file and --params_override set them as rembert-train's do, and each
flag below is an alias of one field (`rembert_tf.cli.finetune_flags`); a flag
given beside a YAML or override value of its field wins, and a note says so.

Example:

  # records made by rembert-create-finetuning-data --task xnli --output_dir records
  rembert-finetune --config_file xtreme_xnli --output_dir ft/xnli \
    --params_override "data.records_dir=records/xnli,encoder.init_checkpoint=pretrain_dir,sweep.learning_rates=[1e-5,2e-5,3e-5],sweep.num_seeds=3"
  # or with flags, the paper's averages beside the results
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

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.cli import experiment_flags  # noqa: E402
from rembert_tf.cli import finetune_flags  # noqa: E402
from rembert_tf.common import errors  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-finetune

FLAGS = flags.FLAGS
for _module in finetune_flags.SHARED_FLAG_MODULES:
  flags.adopt_module_key_flags(_module)  # listed under --help
flags.adopt_module_key_flags(finetune_flags)
for _name in ("config_file", "params_override"):  # Model Garden's
  flags.declare_key_flag(_name)


@errors.command(PROG)
def main(argv):
  del argv
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import preemption  # pylint: disable=g-import-not-at-top
  for name in ("experiment", "mode", "model_dir"):  # Model Garden's as well
    if FLAGS[name].present:
      raise errors.UsageError(f"--{name} is rembert-train's; rembert-finetune "
                              "runs every run of its sweep into --output_dir.")
  try:
    finetuning_runner.run_finetuning(experiment_config(), FLAGS.output_dir,
                                     overwrite=FLAGS.overwrite)
  except preemption.TrainingPreempted as e:
    print(f"{PROG}: {e}", file=sys.stderr, flush=True)
    sys.exit(e.exit_code)


def experiment_config():
  """The experiment of --config_file and --params_override, with the flags given
  set over it (a note for each flag that overrides another value)."""
  from rembert_tf.finetuning import finetuning_experiment  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import experiment_files  # pylint: disable=g-import-not-at-top
  values, notes = experiment_files.with_flags(
      experiment_files.layered_values(FLAGS.config_file or (),
                                      FLAGS.params_override,
                                      experiment_files.FINETUNING),
      finetune_flags.given_flags())
  for note in notes:
    print(f"{PROG}: note: {note}.", flush=True)
  return finetuning_experiment.load_finetuning_config(params_override=values)


def run():
  """Console-script entry point. The process ends without the interpreter's
  teardown once the log is written (every result and checkpoint is complete
  by then; with the datasets and the strategy alive, the teardown takes
  seconds, a minute and more on a busy CPU)."""
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              exit_without_teardown=True, required=["output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

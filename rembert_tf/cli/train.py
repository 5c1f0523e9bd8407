r"""The pre-training command: `rembert-train` (or `python -m rembert_tf.train`).

A thin absl front end over `rembert_tf.pretraining.runner.run` (Model
Garden's `official.core.train_lib` and orbit, like Model Garden's
`official/nlp/train.py`), with its flags --experiment, --config_file
(repeated: YAMLs layered in order; --config is an older name),
--params_override, --mode, --model_dir and --tpu. --strategy, --tpu and
--mixed_precision override the experiment's runtime fields (a note says so).

  rembert-train --config_file configs/experiments/pretrain_tiny_demo.yaml \
    --params_override "task.train_data.input_path=/tmp/records/train/*.tfrecord,task.validation_data.input_path=/tmp/records/eval/*.tfrecord" \
    --model_dir /tmp/pretrain_tiny --mode train_and_eval --strategy one_device

The same command resumes from the newest checkpoint in --model_dir (any
TensorFlow filesystem); after the end it says the job is complete and writes
nothing. `--mode continuous_eval` evaluates each new checkpoint of a live
trainer's --model_dir. Exit codes: 0 done, 1 error (one line naming the cause
and the fix), 3 non-finite loss (the last good checkpoint kept), 42
preempted (SIGTERM: the step reached is saved). The full log ends in
MODEL_DIR/logs/ once the run got past its checks (one per worker process).
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.cli import experiment_flags  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: E402  (--strategy, --tpu, ...)
from rembert_tf.common import errors  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-train

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(runtime_flags)  # listed under --help
flags.adopt_module_key_flags(experiment_flags)  # Model Garden's: --mode ...


@errors.command(PROG)
def main(argv):
  del argv
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import run_failures  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import experiment_files  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import preemption  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import strategies  # pylint: disable=g-import-not-at-top
  command.set_log_label("evaluator" if FLAGS.mode == "continuous_eval"
                        else strategies.process_label())
  values, notes = experiment_files.with_flags(
      experiment_files.layered_values(FLAGS.config_file, FLAGS.params_override,
                                      experiment_files.PRETRAINING),
      runtime_flags.given_fields())
  for note in notes:
    _say(f"{PROG}: note: {note}.")
  config = experiments.load_experiment_config(
      params_override=values,
      experiment=FLAGS.experiment or experiments.EXPERIMENT_NAME)
  try:
    metrics = runner.run(
        config, FLAGS.model_dir, mode=FLAGS.mode or "train",
        deterministic=FLAGS.deterministic, seed=FLAGS.seed,
        allow_sentencepiece_mismatch=FLAGS.allow_sentencepiece_mismatch,
        print_fn=_say)
  except preemption.TrainingPreempted as e:
    _say(f"{PROG}: {e}", sys.stderr)
    sys.exit(e.exit_code)
  except run_failures.NonFiniteLossError as e:
    errors.report(PROG, e)
    sys.exit(e.exit_code)
  _say(f"{PROG}: done: " + " | ".join(
      f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
      for k, v in metrics.items()))


def _say(line: str, stream=None) -> None:
  """A console line, also in the log (which holds everything the run said)."""
  print(line, file=stream or sys.stdout, flush=True)
  logging.info(line)


def _log_kept(exit_code: int, model_dir: str) -> bool:
  """Done, preempted and a non-finite loss keep the log, an error once the
  run got past its checks: a refused start writes nothing into model_dir."""
  if exit_code in (errors.EXIT_OK, errors.EXIT_NON_FINITE_LOSS,
                   errors.EXIT_PREEMPTED):
    return True
  if exit_code != errors.EXIT_ERROR:
    return False
  from rembert_tf.pretraining import runner  # pylint: disable=g-import-not-at-top
  return runner.holds_a_run(model_dir)


def run():
  """Console-script entry point. The process ends without the interpreter's
  teardown once the log is written: every checkpoint is complete by then."""
  FLAGS.set_default("experiment", "rembert_pretraining")
  FLAGS.set_default("mode", "train")
  command.run(main, __doc__, PROG, output_dir_flag="model_dir",
              keep_log=_log_kept, exit_without_teardown=True,
              required=["config_file", "model_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

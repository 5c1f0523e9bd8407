r"""The pre-training command: `python -m rembert_tf.train`.

A thin absl front end over `rembert_tf.pretraining.run` (Model Garden's
`official.core.train_lib` / orbit underneath, like Model Garden's
`official/nlp/train.py`).

Example (CPU, the tiny demo experiment on records made by the data tools):
```bash
python -m rembert_tf.train \
  --config configs/experiments/pretrain_tiny_demo.yaml \
  --params_override "task.train_data.input_path=/tmp/records/train/*.tfrecord,task.validation_data.input_path=/tmp/records/eval/*.tfrecord" \
  --model_dir /tmp/pretrain_tiny --mode train_and_eval --strategy one_device
```
Run the same command again to resume from the newest checkpoint in
--model_dir (any TensorFlow filesystem: a local path, gs://...). Exit codes:
0 done, 1 error (one line on stderr naming the file / field and the fix),
42 preempted (SIGTERM; checkpoint saved at the step reached, run again to
resume), 3 non-finite loss (last good checkpoint kept).
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from rembert_tf.common import console  # noqa: E402
console.quiet_tensorflow_import()  # before anything below imports TensorFlow
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

from rembert_tf import pretraining  # noqa: E402
from rembert_tf.cli import harness  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: E402  (--strategy, --tpu, ...)
from rembert_tf.common import errors  # noqa: E402

PROG = "rembert_tf.train"

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(runtime_flags)  # listed under --help
flags.DEFINE_multi_string(
    "config", None,
    "Experiment YAML (configs/experiments/NAME.yaml or a bare NAME); repeat to "
    "layer several files, later ones win.")
flags.DEFINE_string(
    "params_override", None,
    "Dotted overrides applied after --config, e.g. "
    "'trainer.train_steps=1000,task.train_data.global_batch_size=64', or a "
    "YAML/JSON mapping or file.")
flags.DEFINE_string("experiment", "rembert_pretraining",
                    "Registered experiment giving the defaults (exp_factory).")
flags.DEFINE_string("model_dir", None,
                    "Checkpoints, summaries, encoder export (local or gs://).")
flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval"],
                  "What to run.")
flags.DEFINE_bool("allow_sentencepiece_mismatch", False,
                  "Resume although the records were made with another "
                  "SentencePiece model than model_dir's (warns).")


def _exit_now(code: int) -> None:
  """Exits without TensorFlow's slow interpreter teardown (seconds with a
  strategy and datasets alive): the checkpoint is already complete."""
  sys.stdout.flush()
  sys.stderr.flush()
  logging.flush()
  os._exit(code)  # pylint: disable=protected-access


@errors.command(PROG)
def main(argv):
  del argv
  try:
    config = pretraining.load_experiment_config(
        FLAGS.config, FLAGS.params_override, experiment=FLAGS.experiment)
    metrics = pretraining.run(
        config, FLAGS.model_dir, mode=FLAGS.mode, strategy=FLAGS.strategy,
        tpu=FLAGS.tpu, mixed_precision=FLAGS.mixed_precision,
        deterministic=FLAGS.deterministic, seed=FLAGS.seed,
        allow_sentencepiece_mismatch=FLAGS.allow_sentencepiece_mismatch)
  except pretraining.TrainingPreempted as e:
    print(f"{PROG}: {e}", file=sys.stderr)
    _exit_now(errors.EXIT_PREEMPTED)
  except pretraining.NonFiniteLossError as e:
    errors.report(PROG, e)
    sys.exit(errors.EXIT_NON_FINITE_LOSS)
  summary = " | ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in metrics.items())
  print(f"{PROG}: done: {summary}", flush=True)
  logging.info("final metrics: %s", metrics)


def run():
  """Console-script entry point; the log ends in MODEL_DIR/logs/ (also after a
  preemption or a non-finite loss: the directory holds that run's checkpoints)."""
  # Required only when run as a command: importing this module must not
  # constrain the flags of other commands in the same process.
  flags.mark_flag_as_required("config")
  flags.mark_flag_as_required("model_dir")
  harness.run_command(main, __doc__, "rembert-train",
                      output_dir_flag="model_dir",
                      keep_log_exit_codes=(errors.EXIT_OK,
                                           errors.EXIT_NON_FINITE_LOSS,
                                           errors.EXIT_PREEMPTED))


if __name__ == "__main__":
  run()

r"""The demo end to end: `rembert-demo` (`python -m rembert_tf.demo`, `bash run.sh demo`).

Generates a multilingual corpus, trains a vocabulary, makes records,
pre-trains the tiny decoupled model, exports it, fine-tunes it on English
XNLI-like pairs and prints zero-shot accuracy in six other languages beside
chance and the same fine-tuning from a random encoder (see
rembert_tf/demo/runner.py). Exits 1 when the held-out MLM accuracy is below
2x the most-frequent-token baseline.

USAGE:
  rembert-demo [--run_dir runs/demo] [--seed 0] [--train_steps N]
      [--corpus_megabytes 3] [--nofinetune] [--norandom_init_baseline] [--verbose]
"""
import sys
import time

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from absl import flags  # noqa: E402  pylint: disable=g-bad-import-order

from rembert_tf.common import errors  # noqa: E402
from rembert_tf.common import fileio  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-demo
FLAGS = flags.FLAGS
flags.DEFINE_string("run_dir",
                    fileio.join("runs", time.strftime("demo-%Y%m%d-%H%M%S")),
                    "Where everything goes (any file system); the full log "
                    "ends up in RUN_DIR/logs/.")
flags.DEFINE_integer("seed", 0, "Seeds the corpus, vocabulary, records, "
                     "pre-training and fine-tuning.", lower_bound=0)
flags.DEFINE_integer("train_steps", None, "Pre-training steps (default: the "
                     "pretrain_tiny_demo experiment's).",
                     lower_bound=1)
flags.DEFINE_float("corpus_megabytes", 3.0, "Size of the demo corpus.")
command.require("corpus_megabytes", lambda size: size > 0,
                "give a size above 0 (e.g. --corpus_megabytes 3)")
flags.DEFINE_integer("num_workers", 2, "Processes making the records.",
                     lower_bound=1)
flags.DEFINE_bool("finetune", True, "Fine-tune and evaluate zero-shot.")
flags.DEFINE_bool("random_init_baseline", True, "Also fine-tune a randomly "
                  "initialised encoder (the table's random-init column).")


@errors.command(PROG)
def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments {argv[1:]}; the demo takes "
                            "only flags (see --help).")
  from rembert_tf.demo import runner  # pylint: disable=g-import-not-at-top
  run_dir = FLAGS.run_dir
  settings = runner.DemoSettings(
      seed=FLAGS.seed, train_steps=FLAGS.train_steps,
      corpus_megabytes=FLAGS.corpus_megabytes, num_workers=FLAGS.num_workers,
      finetune=FLAGS.finetune,
      random_init_baseline=FLAGS.random_init_baseline)
  results = runner.run_demo(run_dir, settings)
  if results["mlm_accuracy"] < runner.REQUIRED_MLM_RATIO * results["baseline_accuracy"]:
    print(f"{PROG}: error: held-out MLM accuracy "
          f"{results['mlm_accuracy']:.3f} is below "
          f"{runner.REQUIRED_MLM_RATIO:.0f}x the most-frequent-token baseline "
          f"({results['baseline_accuracy']:.3f}): pre-training did not learn.",
          file=sys.stderr, flush=True)
    sys.exit(errors.EXIT_ERROR)


def run():
  """Console-script entry point (`rembert-demo`)."""
  command.run(main, __doc__, program=PROG, output_dir_flag="run_dir",
              keep_log=lambda code, run_dir: code in (0, errors.EXIT_ERROR))


if __name__ == "__main__":
  run()

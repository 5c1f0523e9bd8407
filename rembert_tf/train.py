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
--model_dir. Exit codes: 0 done, 1 error, 42 preempted (SIGTERM; checkpoint
saved, run again to resume), 3 non-finite loss (last good checkpoint kept).
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging

FLAGS = flags.FLAGS
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
flags.DEFINE_string("model_dir", None, "Checkpoints, summaries, encoder export.")
flags.DEFINE_enum("mode", "train", ["train", "eval", "train_and_eval"],
                  "What to run.")
flags.DEFINE_enum("strategy", "one_device",
                  ["tpu", "mirrored", "multi_worker_mirrored", "one_device"],
                  "tf.distribute strategy.")
flags.DEFINE_string("tpu", None,
                    "TPU name or grpc://host:port (TPUClusterResolver); "
                    "omit on a TPU VM.")
flags.DEFINE_enum("mixed_precision", None, ["float32", "mixed_bfloat16"],
                  "Overrides runtime.mixed_precision_dtype of the config.")
flags.DEFINE_bool("deterministic", False,
                  "Op determinism and fixed seeds (resumed == uninterrupted).")
flags.DEFINE_integer("seed", None, "Random seed for weights and dropout.")
flags.mark_flag_as_required("config")
flags.mark_flag_as_required("model_dir")


def main(argv):
  del argv
  from rembert_tf import pretraining  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import checkpoints  # pylint: disable=g-import-not-at-top
  from rembert_tf.data.pretrain_dataloader import DataMismatchError  # pylint: disable=g-import-not-at-top
  try:
    config = pretraining.load_experiment_config(
        FLAGS.config, FLAGS.params_override, experiment=FLAGS.experiment)
    metrics = pretraining.run(
        config, FLAGS.model_dir, mode=FLAGS.mode, strategy=FLAGS.strategy,
        tpu=FLAGS.tpu, mixed_precision=FLAGS.mixed_precision,
        deterministic=FLAGS.deterministic, seed=FLAGS.seed)
  except pretraining.TrainingPreempted as e:
    print(f"[rembert_tf.train] {e}", file=sys.stderr, flush=True)
    sys.exit(42)
  except pretraining.NonFiniteLossError as e:
    print(f"[rembert_tf.train] ERROR: {e}", file=sys.stderr, flush=True)
    sys.exit(3)
  except (pretraining.PretrainingError, pretraining.ExperimentConfigError,
          rembert_config.ConfigError, checkpoints.CheckpointError,
          DataMismatchError) as e:
    print(f"[rembert_tf.train] ERROR: {e}", file=sys.stderr, flush=True)
    sys.exit(1)
  summary = " | ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in metrics.items())
  print(f"[rembert_tf.train] done: {summary}", flush=True)
  logging.info("final metrics: %s", metrics)


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == "__main__":
  run()

"""Shared fixtures of the pre-training tests: tiny records and experiment configs."""
import os
import pathlib
import sys

import numpy as np
import yaml

from rembert_tf.data import pretraining_record_format
from rembert_tf.pretraining import experiments

SEQ, PREDS, VOCAB = 32, 5, 2000
REPO = str(pathlib.Path(__file__).resolve().parents[2])


def write_records(root, num_shards=1, num_examples=96, extra_metadata=None,
                  splits=(("train", 1), ("eval", 2))):
  """ROOT/train and ROOT/eval: static-masked records of a 2000-token vocab."""
  rng = np.random.default_rng(0)
  examples = [list(5 + (rng.zipf(1.6, size=rng.integers(10, 28)) % 200))
              for _ in range(num_examples)]
  for split, seed in splits:
    pretraining_record_format.write_pretraining_records(
        str(pathlib.Path(root) / split), examples, seq_length=SEQ,
        max_predictions_per_seq=PREDS, vocab_size=VOCAB, seed=seed,
        num_shards=num_shards, extra_metadata=extra_metadata)
  return root


def experiment_values(records_dir, train_steps=4, steps_per_loop=2,
                      checkpoint_interval=2, eval_data=True):
  values = {
      "task": {
          "model_preset": "tiny",
          "model": {"num_hidden_layers": 1, "hidden_dropout_prob": 0.0,
                    "attention_probs_dropout_prob": 0.0},
          "train_data": {"input_path": f"{records_dir}/train/*.tfrecord",
                         "global_batch_size": 8, "seq_length": SEQ,
                         "max_predictions_per_seq": PREDS, "seed": 3,
                         "shuffle_buffer_size": 32, "is_training": True},
      },
      "trainer": {
          "train_steps": train_steps, "steps_per_loop": steps_per_loop,
          "summary_interval": steps_per_loop,
          "checkpoint_interval": checkpoint_interval, "max_to_keep": 3,
          "validation_steps": 2, "validation_interval": 100,
          "optimizer_config": {
              "learning_rate": {"polynomial": {"initial_learning_rate": 1e-3,
                                               "decay_steps": 100}},
              "warmup": {"linear": {"warmup_steps": 1}}},
      },
  }
  if eval_data:
    values["task"]["validation_data"] = {
        "input_path": f"{records_dir}/eval/*.tfrecord", "global_batch_size": 8,
        "seq_length": SEQ, "max_predictions_per_seq": PREDS,
        "is_training": False}
  return values


def make_config(records_dir, train_steps=4, **kwargs):
  return experiments.load_experiment_config(
      [], experiment_values(records_dir, train_steps, **kwargs))


def write_experiment_yaml(path, records_dir, **kwargs):
  values = experiment_values(records_dir, eval_data=False, **kwargs)
  pathlib.Path(path).write_text(yaml.safe_dump(values))
  return str(path)


def train_command(config_path, model_dir, *extra):
  # --verbose keeps absl's log lines on stderr, where the signal and
  # multi-worker tests read them (without it they go to MODEL_DIR/logs).
  return [sys.executable, "-m", "rembert_tf.train", "--config", config_path,
          "--model_dir", model_dir, "--verbose", *extra]


def subprocess_env(**extra):
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.update(extra)
  return env

"""Shared fixtures of the pre-training tests: tiny records, experiment configs,
and the first batch's loss a run started from a checkpoint must report."""
import os
import pathlib
import sys

import numpy as np
import yaml

from rembert_tf.data import pretraining_record_creation
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.runtime import process_settings

SEQ, PREDS, VOCAB = 32, 5, 2000
REPO = str(pathlib.Path(__file__).resolve().parents[2])


def write_records(root, num_shards=1, num_examples=96, extra_metadata=None,
                  splits=(("train", 1), ("eval", 2))):
  """ROOT/train and ROOT/eval: static-masked records of a 2000-token vocab."""
  rng = np.random.default_rng(0)
  examples = [list(5 + (rng.zipf(1.6, size=rng.integers(10, 28)) % 200))
              for _ in range(num_examples)]
  for split, seed in splits:
    pretraining_record_creation.write_pretraining_records(
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
  return [sys.executable, "-m", "rembert_tf.train", "--config_file", config_path,
          "--model_dir", model_dir, "--verbose", *extra]


def subprocess_env(**extra):
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.update(extra)
  return env


# A run started from a checkpoint reports, at step 1, the restored weights'
# loss on the first batch: the tests compare it with a forward pass of those
# weights on the first batch of a second input pipeline. Both pipelines read
# under the trainers' determinism (the run: `runner.run(deterministic=True)`,
# what `rembert-train --deterministic` does), and `first_batch` checks that two
# pipelines agree, so the comparison never hangs on which reader thread
# finishes first. The run's compiled step and the eager forward pass agree
# exactly (measured: 8 runs beside two CPU hogs; without the determinism, to
# rel 1.3e-7 at most in 3 runs); allowed: rel 1e-5.
STEP_ONE_LOSS_REL = 1e-5


def first_batch(config):
  """(task, the first training batch), read under the trainers' determinism
  and checked to be the same from two pipelines."""
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  with process_settings.training_settings("float32", deterministic=True,
                                          seed=0):
    task = task_factory.get_task(config.task)
    first, again = (next(iter(task.build_inputs(config.task.train_data)))
                    for _ in range(2))
  for name, values in first.items():
    np.testing.assert_array_equal(values.numpy(), again[name].numpy(), name)
  return task, first


def first_batch_loss(config, pretrainer):
  """`pretrainer`'s masked-LM loss on the first training batch."""
  task, batch = first_batch(config)
  outputs = pretrainer({k: batch[k] for k in masked_lm_task.MODEL_INPUT_KEYS})
  return float(task.build_losses(batch, outputs))

"""`python -m rembert_tf.train` killed with SIGKILL / SIGTERM, then resumed (issue 4).

Runs the train command in subprocesses (op determinism is process-wide):
an uninterrupted deterministic run, a run SIGKILLed mid-way and resumed, and
a run stopped by SIGTERM, side by side.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml

from rembert_tf.data import pretraining_records

SEQ, PREDS, VOCAB = 32, 5, 2000
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE_SECONDS = 150


def experiment_yaml(path, records_dir, train_steps, checkpoint_interval):
  values = {
      "task": {
          "model_preset": "tiny",
          "model": {"num_hidden_layers": 1, "hidden_dropout_prob": 0.0,
                    "attention_probs_dropout_prob": 0.0},
          "train_data": {"input_path": f"{records_dir}/*.tfrecord",
                         "global_batch_size": 8, "seq_length": SEQ,
                         "max_predictions_per_seq": PREDS, "seed": 5,
                         "shuffle_buffer_size": 16, "is_training": True},
      },
      "trainer": {
          "train_steps": train_steps, "steps_per_loop": 1,
          "summary_interval": 1, "checkpoint_interval": checkpoint_interval,
          "max_to_keep": 3,
          "optimizer_config": {
              "learning_rate": {"polynomial": {"initial_learning_rate": 1e-3,
                                               "decay_steps": 50}},
              "warmup": {"linear": {"warmup_steps": 2}}},
      },
  }
  path.write_text(yaml.safe_dump(values))
  return str(path)


def start(config_path, model_dir, log_path):
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.Popen(
      [sys.executable, "-m", "rembert_tf.train", "--config", config_path,
       "--model_dir", model_dir, "--deterministic"],
      cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
      stderr=open(log_path, "w"))


def read_until_step(proc, step):
  """Reads progress lines until `step N/` with N >= step; returns N."""
  deadline = time.time() + DEADLINE_SECONDS
  for line in proc.stdout:
    if line.startswith("step "):
      current = int(line.split()[1].split("/")[0])
      if current >= step:
        return current
    if time.time() > deadline:
      break
  proc.kill()
  raise AssertionError(f"no progress line for step {step}")


def model_weights(checkpoint):
  return {name: tf.train.load_variable(checkpoint, name)
          for name, _ in tf.train.list_variables(checkpoint)
          if name.split("/")[0] in ("model", "encoder")
          and "OPTIMIZER_SLOT" not in name}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  rng = np.random.default_rng(0)
  examples = [list(rng.integers(5, 300, size=rng.integers(10, 28)))
              for _ in range(64)]
  pretraining_records.write_pretraining_records(
      str(root), examples, seq_length=SEQ, max_predictions_per_seq=PREDS,
      vocab_size=VOCAB)
  return root


def test_sigkill_resume_and_sigterm_save(records, tmp_path):
  steps = 8
  config = experiment_yaml(tmp_path / "exp.yaml", records, steps, 2)
  long_config = experiment_yaml(tmp_path / "long.yaml", records, 1000, 1000)
  whole_dir, killed_dir, term_dir = (str(tmp_path / n)
                                     for n in ("whole", "killed", "term"))
  whole = start(config, whole_dir, tmp_path / "whole.log")
  killed = start(config, killed_dir, tmp_path / "killed.log")
  term = start(long_config, term_dir, tmp_path / "term.log")
  try:
    # SIGKILL at some point after step 5: checkpoints exist at 2 and 4 (maybe 6).
    read_until_step(killed, 5)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    # SIGTERM: the run saves a checkpoint at the current step and exits 42,
    # although its checkpoint interval (1000) was never reached.
    reached = read_until_step(term, 3)
    term.send_signal(signal.SIGTERM)
    assert term.wait(timeout=DEADLINE_SECONDS) == 42, (
        tmp_path / "term.log").read_text()[-2000:]
    assert whole.wait(timeout=DEADLINE_SECONDS) == 0, (
        tmp_path / "whole.log").read_text()[-2000:]
  finally:
    for proc in (whole, killed, term):
      if proc.poll() is None:
        proc.kill()

  term_ckpt = tf.train.latest_checkpoint(term_dir)
  saved_step = int(term_ckpt.rsplit("-", 1)[1])
  assert saved_step >= reached
  assert "SIGTERM received: saved" in (tmp_path / "term.log").read_text()
  assert os.path.exists(os.path.join(term_dir, "encoder", f"ckpt-{saved_step}.index"))

  lost_at = tf.train.latest_checkpoint(killed_dir)
  assert lost_at is not None and int(lost_at.rsplit("-", 1)[1]) in (4, 6)
  resumed = start(config, killed_dir, tmp_path / "resumed.log")
  out, _ = resumed.communicate(timeout=DEADLINE_SECONDS)
  assert resumed.returncode == 0, (tmp_path / "resumed.log").read_text()[-2000:]
  assert "resumed from" in out

  whole_ckpt = tf.train.latest_checkpoint(whole_dir)
  resumed_ckpt = tf.train.latest_checkpoint(killed_dir)
  assert whole_ckpt.endswith(f"ckpt-{steps}")
  assert resumed_ckpt.endswith(f"ckpt-{steps}")
  want, got = model_weights(whole_ckpt), model_weights(resumed_ckpt)
  assert set(want) == set(got) and len(want) > 20
  for name in want:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)

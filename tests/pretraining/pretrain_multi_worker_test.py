"""Pre-training with MultiWorkerMirroredStrategy over two local worker processes.

The two workers (TF_CONFIG on 127.0.0.1) train, checkpoint and export the
encoder together (every collective joined by both), are killed, resume from
the chief's checkpoint and finish. The chief writes into model_dir; the other
worker writes its copies into temporary directories.
"""
import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf
from official.core import task_factory

import pretrain_testlib

DEADLINE_SECONDS = 240


def free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def start_workers(config_path, model_dir, log_dir, attempt):
  ports = free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  procs = []
  for index in range(2):
    env = pretrain_testlib.subprocess_env(TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    log = open(os.path.join(log_dir, f"worker{index}-{attempt}.log"), "w")
    procs.append(subprocess.Popen(
        pretrain_testlib.train_command(config_path, model_dir, "--strategy",
                                       "multi_worker_mirrored"),
        cwd=pretrain_testlib.REPO, env=env, stdout=subprocess.PIPE,
        stderr=log, text=True))
  return procs


def read_log(log_dir, index, attempt):
  with open(os.path.join(log_dir, f"worker{index}-{attempt}.log")) as f:
    return f.read()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  return pretrain_testlib.write_records(root, num_shards=4,
                                        splits=(("train", 1),))


def test_two_workers_train_checkpoint_export_are_killed_and_resume(
    records, tmp_path):
  config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "exp.yaml", records, train_steps=6, steps_per_loop=1,
      checkpoint_interval=2)
  model_dir = str(tmp_path / "model")
  first = start_workers(config, model_dir, str(tmp_path), 1)
  try:
    # Kill both once the chief reports step 4 (checkpoints at 2 and 4 exist
    # or are being written).
    deadline = time.time() + DEADLINE_SECONDS
    for line in first[0].stdout:
      if line.startswith("step 4/") or time.time() > deadline:
        break
    assert tf.train.latest_checkpoint(model_dir) is not None, read_log(
        str(tmp_path), 0, 1)[-3000:]
    for proc in first:
      proc.send_signal(signal.SIGKILL)
      proc.wait(timeout=30)
  finally:
    for proc in first:
      if proc.poll() is None:
        proc.kill()
  killed_at = int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])
  assert killed_at in (2, 4)
  assert os.path.exists(os.path.join(model_dir, "encoder", "ckpt-2.index"))

  second = start_workers(config, model_dir, str(tmp_path), 2)
  try:
    outputs = [proc.communicate(timeout=DEADLINE_SECONDS)[0] for proc in second]
  finally:
    for proc in second:
      if proc.poll() is None:
        proc.kill()
  for index, proc in enumerate(second):
    assert proc.returncode == 0, read_log(str(tmp_path), index, 2)[-3000:]
    assert f"resumed from {model_dir}/ckpt-{killed_at}" in outputs[index]
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-6")
  assert tf.train.latest_checkpoint(
      os.path.join(model_dir, "encoder")).endswith("ckpt-6")
  # Only the chief wrote into model_dir; each worker read its own file shard.
  assert not [n for n in os.listdir(model_dir) if "worker" in n]
  for index in range(2):
    log = read_log(str(tmp_path), index, 2)
    assert f"training input: pipeline {index} of 2 (2 replicas)" in log, log[-2000:]


def test_two_input_pipelines_read_disjoint_files_after_a_resume(records):
  """Resumed without replay: both hosts derive the same seed from the step,
  so their file shards stay disjoint."""
  config = pretrain_testlib.make_config(records, eval_data=False)
  config.task.replay_data_on_resume = False
  config.task.train_data.shuffle_buffer_size = 1
  config.task.train_data.cycle_length = 1
  seen = []
  for pipeline_id in range(2):
    task = task_factory.get_task(config.task)
    task.initial_train_step = 100
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=pipeline_id,
        num_replicas_in_sync=2)
    dataset = task.build_inputs(config.task.train_data, context)
    # One epoch of this pipeline's 2 files (24 examples each), 4 per batch.
    seen.append({tuple(row) for batch in dataset.take(12)
                 for row in batch["input_word_ids"].numpy()[:, :12].tolist()})
  assert seen[0] and seen[1] and not seen[0] & seen[1]

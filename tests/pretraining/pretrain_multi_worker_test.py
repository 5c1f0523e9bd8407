"""A two-worker pre-training job (MultiWorkerMirroredStrategy, TF_CONFIG on
127.0.0.1) through every restart a scheduler puts it through.

One job, one model_dir, one run after the other, each started with the same
command as a scheduler would:

1. both workers killed in the middle of a checkpoint save (its shards lie in
   `ckpt-N_temp/`);
2. restarted: the half-written save is removed and the run resumes from the
   newest complete checkpoint; one worker gets SIGTERM: both save at the
   same step and exit 42;
3. restarted: resumes from that save; one worker is SIGKILLed: the other
   exits 1 within the heartbeat timeout, with one line naming the lost peer;
4. restarted: resumes and finishes (exit 0 on both);
5. restarted after the end: both say the job is complete, exit 0 and write
   nothing.

No console shows a traceback or a "--- Logging error ---"; every run leaves
each worker's log in model_dir/logs. The chief writes into model_dir; the
other worker writes its copies into temporary directories.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from official.core import task_factory

import pretrain_testlib

DEADLINE_SECONDS = 300
STALLED_SAVE = os.path.join(os.path.dirname(__file__),
                            "train_with_stalled_save.py")
POLL_SECONDS = 0.2
# A worker that sends no heartbeat for this long is declared lost by the
# cluster's coordination service (its default), which then fails every
# worker's pending collective.
HEARTBEAT_TIMEOUT_SECONDS = 10


def free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


class Job:
  """The two worker processes of one run; their consoles go to files."""

  def __init__(self, name, root, train_args, launcher=()):
    self.name, self.root = name, root
    ports = free_ports(2)
    self.cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    self.procs = []
    for index in range(2):
      env = pretrain_testlib.subprocess_env(TF_CONFIG=json.dumps(
          {"cluster": self.cluster, "task": {"type": "worker",
                                             "index": index}}))
      command = ([sys.executable, *launcher, *train_args] if launcher else
                 [sys.executable, "-m", "rembert_tf.train", *train_args])
      self.procs.append(subprocess.Popen(
          command, cwd=pretrain_testlib.REPO, env=env,
          stdout=open(self._path(index, "out"), "w"),
          stderr=open(self._path(index, "err"), "w")))

  def _path(self, index, kind):
    return os.path.join(self.root, f"{self.name}-worker{index}.{kind}")

  def console(self, index):
    with open(self._path(index, "out")) as out, open(self._path(index, "err")) as err:
      return out.read() + err.read()

  def step(self, index=0):
    steps = re.findall(r"^step +(\d+)/", self.console(index), re.M)
    return int(steps[-1]) if steps else 0

  def wait_until(self, condition, what):
    deadline = time.time() + DEADLINE_SECONDS
    while not condition():
      if time.time() > deadline or any(p.poll() is not None for p in self.procs):
        self.kill()
        raise AssertionError(f"{self.name}: {what} never happened\n" +
                             self.console(0)[-2000:] + self.console(1)[-2000:])
      time.sleep(POLL_SECONDS)

  def wait(self, timeout=DEADLINE_SECONDS):
    try:
      return [p.wait(timeout=timeout) for p in self.procs]
    finally:
      self.kill()

  def kill(self):
    for p in self.procs:
      if p.poll() is None:
        p.kill()
        p.wait()

  def assert_clean_consoles(self):
    for index in range(2):
      console = self.console(index)
      assert "Logging error" not in console, console[-3000:]
      assert "Traceback" not in console, console[-3000:]


def model_dir_files(model_dir):
  """Every file but the logs: (path, mtime, size)."""
  paths = [os.path.join(d, f) for d, _, names in os.walk(model_dir)
           for f in names]
  return sorted((p, os.path.getmtime(p), os.path.getsize(p)) for p in paths
                if "/logs/" not in p)


def chief_save_held(marker, prefix) -> bool:
  """Whether the stalled-save launcher holds the merge of `prefix`."""
  if not os.path.exists(marker):
    return False
  with open(marker, encoding="utf-8") as f:
    return f"{prefix}\n" in f.read()


def checkpoint_step(path):
  return int(path.rsplit("-", 1)[1])


def latest_step(model_dir) -> int:
  """model_dir's newest complete step; -1 before the first (or while its
  state file is being replaced)."""
  try:
    latest = tf.train.latest_checkpoint(model_dir)
  except (tf.errors.OpError, ValueError):
    return -1
  return checkpoint_step(latest) if latest else -1


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  return pretrain_testlib.write_records(root, num_shards=4,
                                        splits=(("train", 1),))


def test_a_two_worker_job_survives_every_restart(records, tmp_path):
  # Loops of 2 steps: each is cut into device calls whose size the workers
  # agree on (runtime.orbit_loop.LoopSteps).
  config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "exp.yaml", records, train_steps=1000, steps_per_loop=2,
      checkpoint_interval=2)
  model_dir = str(tmp_path / "model")
  args = ["--config_file", config, "--model_dir", model_dir, "--strategy",
          "multi_worker_mirrored"]
  root = str(tmp_path)

  # 1. Killed while the chief's ckpt-6 is being written. The other worker
  # holds its own copy's merge too (in a temporary directory), and may get
  # there first: wait for the chief's line.
  marker = str(tmp_path / "stalled")
  job = Job("stalled", root, ["6", marker, *args], launcher=[STALLED_SAVE])
  job.wait_until(lambda: chief_save_held(marker, f"{model_dir}/ckpt-6"),
                 "the chief's save of ckpt-6")
  job.kill()
  assert os.path.isdir(os.path.join(model_dir, "ckpt-6_temp"))
  assert checkpoint_step(tf.train.latest_checkpoint(model_dir)) == 4

  # 2. Restarted: the partial save is removed, the run resumes from ckpt-4;
  # SIGTERM to worker 1 stops both at the same step.
  job = Job("sigterm", root, args)
  # Once this run's own ckpt-6 is complete, no ckpt-6_temp may remain (while
  # it is written, its shards lie in a ckpt-6_temp of its own).
  job.wait_until(lambda: latest_step(model_dir) >= 6, "this run's ckpt-6")
  assert not os.path.exists(os.path.join(model_dir, "ckpt-6_temp"))
  job.procs[1].send_signal(signal.SIGTERM)
  assert job.wait() == [42, 42], job.console(0)[-3000:] + job.console(1)[-3000:]
  job.assert_clean_consoles()
  saved = tf.train.latest_checkpoint(model_dir)
  saved_step = checkpoint_step(saved)
  for index in range(2):
    console = job.console(index)
    assert f"resumed from {model_dir}/ckpt-4 at step 4" in console
    assert f"saved {saved} at step {saved_step} and stopped" in console
  assert saved_step >= 6
  assert os.path.exists(f"{model_dir}/encoder/ckpt-{saved_step}.index")

  # 3. Restarted; worker 1 is SIGKILLed: worker 0 names it and stops.
  job = Job("sigkill", root, args)
  job.wait_until(lambda: job.step() >= saved_step + 1, "a step after the resume")
  job.procs[1].send_signal(signal.SIGKILL)
  killed_at = time.time()
  assert job.procs[0].wait(timeout=DEADLINE_SECONDS) == 1
  assert (time.time() - killed_at
          < HEARTBEAT_TIMEOUT_SECONDS + 20)
  job.wait()
  job.assert_clean_consoles()
  assert f"resumed from {saved} at step {saved_step}" in job.console(0)
  error_lines = [l for l in job.console(0).splitlines() if "error:" in l]
  peer = job.cluster["worker"][1]
  assert len(error_lines) == 1 and (
      f"lost contact with worker 1 ({peer})" in error_lines[0]), error_lines
  assert "disk" not in error_lines[0] and "permission" not in error_lines[0]

  # 4. Restarted: resumes from the newest complete checkpoint and finishes.
  newest = tf.train.latest_checkpoint(model_dir)
  final_step = checkpoint_step(newest) + 3
  args += ["--params_override", f"trainer.train_steps={final_step}"]
  job = Job("finish", root, args)
  assert job.wait() == [0, 0], job.console(0)[-3000:] + job.console(1)[-3000:]
  job.assert_clean_consoles()
  for index in range(2):
    assert f"resumed from {newest}" in job.console(index)
  final = tf.train.latest_checkpoint(model_dir)
  assert checkpoint_step(final) == final_step
  assert tf.train.latest_checkpoint(f"{model_dir}/encoder").endswith(
      f"ckpt-{final_step}")
  assert not [n for n in os.listdir(model_dir) if "worker" in n or "_temp" in n]
  log = open(f"{model_dir}/logs/" + next(
      n for n in sorted(os.listdir(f"{model_dir}/logs"))[::-1]
      if n.endswith("-worker1.log"))).read()
  assert "training input: pipeline 1 of 2 (2 replicas)" in log

  # 5. Restarted after the end: complete, nothing written.
  before = model_dir_files(model_dir)
  job = Job("after_the_end", root, args)
  assert job.wait() == [0, 0], job.console(0)[-3000:] + job.console(1)[-3000:]
  job.assert_clean_consoles()
  for index in range(2):
    assert f"the job is complete: {final} is at step {final_step}" in (
        job.console(index))
  assert model_dir_files(model_dir) == before
  # Every run that ended (all but the SIGKILLed processes) left its log.
  logs = os.listdir(f"{model_dir}/logs")
  assert [len([n for n in logs if n.endswith(f"-worker{index}.log")])
          for index in range(2)] == [4, 3], logs


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

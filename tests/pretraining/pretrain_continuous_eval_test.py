"""`rembert-train --mode continuous_eval`: the evaluator job beside a trainer.

The evaluator starts on an empty model_dir, evaluates each checkpoint the
trainer (another process) saves as it appears, and ends with exit code 0
after the checkpoint at trainer.train_steps. Its metrics go where Model
Garden's go (model_dir/validation/ summaries); it writes no checkpoint.

The trainer runs twice (to step 2, then on to step 4) so that the evaluator
has evaluated step 2 before step 4 exists, whatever the machine's speed.
"""
import glob
import os
import subprocess
import threading

import pytest
import tensorflow as tf
import yaml

import pretrain_testlib

DEADLINE_SECONDS = 300


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  return pretrain_testlib.write_records(tmp_path_factory.mktemp("records"))


def start(command, **kwargs):
  """The command as a process, killed if it outlives DEADLINE_SECONDS."""
  process = subprocess.Popen(command, cwd=pretrain_testlib.REPO,
                             env=pretrain_testlib.subprocess_env(),
                             text=True, **kwargs)
  timer = threading.Timer(DEADLINE_SECONDS, process.kill)
  timer.daemon = True
  timer.start()
  return process


def read_until(process, prefix):
  """The console lines of `process` up to the one starting with `prefix`."""
  lines = []
  for line in process.stdout:
    lines.append(line)
    if line.startswith(prefix):
      return lines
  raise AssertionError(f"no line {prefix!r}; exit {process.wait()}: {lines}")


def summary_steps(model_dir, subdir, tag):
  steps = set()
  for path in glob.glob(os.path.join(model_dir, subdir, "events.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      if any(value.tag == tag for value in event.summary.value):
        steps.add(event.step)
  return steps


def files_outside(model_dir, *subdirs):
  """path -> modification time of model_dir's files, but under `subdirs`."""
  found = {}
  for root, _, names in os.walk(model_dir):
    if os.path.relpath(root, model_dir).split(os.sep)[0] not in subdirs:
      for name in names:
        path = os.path.join(root, name)
        found[path] = os.stat(path).st_mtime_ns
  return found


def test_evaluator_follows_a_live_trainer_to_its_last_checkpoint(
    records, tmp_path):
  values = pretrain_testlib.experiment_values(records, train_steps=4)
  values["trainer"]["continuous_eval_timeout"] = 1  # seconds between checks
  config = tmp_path / "exp.yaml"
  config.write_text(yaml.safe_dump(values))
  model_dir = str(tmp_path / "run")
  log = open(tmp_path / "processes.log", "w")
  evaluator = start(pretrain_testlib.train_command(
      str(config), model_dir, "--mode", "continuous_eval"),
                    stdout=subprocess.PIPE, stderr=log)
  to_step_2 = start(pretrain_testlib.train_command(
      str(config), model_dir, "--params_override", "trainer.train_steps=2"),
                    stdout=subprocess.DEVNULL, stderr=log)
  try:
    lines = read_until(evaluator, "eval at step 2 ")
    assert to_step_2.wait() == 0
    # The evaluator goes on waiting for trainer.train_steps (4).
    assert evaluator.poll() is None
    assert start(pretrain_testlib.train_command(str(config), model_dir),
                 stdout=subprocess.DEVNULL, stderr=log).wait() == 0
    trained = files_outside(model_dir, "validation", "logs")
    lines += evaluator.stdout.readlines()
    assert evaluator.wait() == 0, lines
  finally:
    for process in (evaluator, to_step_2):
      if process.poll() is None:
        process.kill()
        process.wait()
  evaluations = [l for l in lines if l.startswith("eval at step ")]
  assert [l.split()[3] for l in evaluations] == ["2", "4"], lines
  assert lines[-1].startswith("rembert-train: done: global_step 4 "), lines
  # Model Garden's place for an evaluator's metrics: model_dir/validation.
  for tag in ("masked_lm_accuracy", "lm_example_loss"):
    assert summary_steps(model_dir, "validation", tag) == {2, 4}, tag
  # No checkpoint (nor any other file) but the trainer's.
  assert files_outside(model_dir, "validation", "logs") == trained
  assert sorted(os.path.basename(p) for p in glob.glob(
      os.path.join(model_dir, "ckpt-*.index"))) == ["ckpt-2.index",
                                                     "ckpt-4.index"]
  assert [os.path.basename(p) for p in glob.glob(
      os.path.join(model_dir, "logs", "rembert-train-*-evaluator.log"))]

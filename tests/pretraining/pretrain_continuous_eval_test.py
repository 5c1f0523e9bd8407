"""`rembert-train --mode continuous_eval`: the evaluator job beside a trainer.

The evaluator starts on an empty model_dir, evaluates each checkpoint the
trainer (another process) saves as it appears, and ends with exit code 0
after the checkpoint at trainer.train_steps. Its metrics go where Model
Garden's go (model_dir/validation/ summaries); it writes no checkpoint.

The trainer's save of step 4 is held (`train_with_stalled_save.py`) until the
evaluator has evaluated step 2, so that step 4 does not exist before then,
whatever the machine's speed.
"""
import glob
import os
import subprocess
import sys
import threading

import pytest
import tensorflow as tf
import yaml

import pretrain_testlib

DEADLINE_SECONDS = 300
STALLED_SAVE = os.path.join(os.path.dirname(__file__),
                            "train_with_stalled_save.py")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  return pretrain_testlib.write_records(tmp_path_factory.mktemp("records"))


def start(command, env=None, **kwargs):
  """The command as a process, killed if it outlives DEADLINE_SECONDS."""
  process = subprocess.Popen(command, cwd=pretrain_testlib.REPO,
                             env=env or pretrain_testlib.subprocess_env(),
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
  # The trainer, its save of ckpt-4 held until the release file exists.
  release = tmp_path / "release"
  trainer = start(
      [sys.executable, STALLED_SAVE, "4", str(tmp_path / "held"),
       *pretrain_testlib.train_command(str(config), model_dir)[3:]],
      env=pretrain_testlib.subprocess_env(
          STALLED_SAVE_RELEASE_FILE=str(release)),
      stdout=subprocess.DEVNULL, stderr=log)
  try:
    lines = read_until(evaluator, "eval at step 2 ")
    # The evaluator goes on waiting for trainer.train_steps (4).
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")
    assert evaluator.poll() is None
    release.write_text("")
    assert trainer.wait() == 0
    trained = files_outside(model_dir, "validation", "logs")
    lines += evaluator.stdout.readlines()
    assert evaluator.wait() == 0, lines
  finally:
    for process in (evaluator, trainer):
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

"""`python -m rembert_tf.train` killed with SIGKILL / SIGTERM, then resumed;
every way a run ends leaves its full log in MODEL_DIR/logs.

One test, several train processes side by side (a signal needs a process):
a run SIGKILLed mid-way and resumed (the same final weights as an
uninterrupted deterministic run, trained in this process meanwhile); a run with
`steps_per_loop=1000` stopped by SIGTERM after its first steps: it saves at
the step reached and exits 42 within seconds, not at the end of the loop, and
its rerun resumes from that step and, with asynchronous checkpoints, gets
SIGTERM while a checkpoint write is held in flight: it waits for the write,
saves the step reached and exits 42; a run whose loss becomes NaN (exit 3) and
one whose records turn out corrupted mid-run (exit 1). Each ended run's log
(done 0, preempted 42, error 1, non-finite loss 3) is in its model_dir/logs,
complete to its last line, and no console shows "--- Logging error ---".
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import runner

import pretrain_testlib

DEADLINE_SECONDS = 300
SIGTERM_EXIT_SECONDS = 10
STALLED_SAVE = os.path.join(os.path.dirname(__file__),
                            "train_with_stalled_save.py")


def start(config_path, model_dir, log_path, *extra, stderr=None):
  return subprocess.Popen(
      pretrain_testlib.train_command(config_path, model_dir, "--deterministic",
                                     *extra),
      cwd=pretrain_testlib.REPO, env=pretrain_testlib.subprocess_env(),
      stdout=subprocess.PIPE, text=True,
      stderr=stderr if stderr is not None else open(log_path, "w"))


def read_until(stream, predicate, proc, seen=None):
  """Reads lines (appended to `seen`) until predicate(line) is truthy;
  returns its value."""
  deadline = time.time() + DEADLINE_SECONDS
  for line in stream:
    if seen is not None:
      seen.append(line)
    value = predicate(line)
    if value:
      return value
    if time.time() > deadline:
      break
  proc.kill()
  raise AssertionError("the expected line never came")


def progress_step_at_least(step):
  def predicate(line):
    if line.startswith("step "):
      current = int(line.split()[1].split("/")[0])
      return current if current >= step else None
    return None
  return predicate


def kept_log(model_dir, exit_code):
  """The one log of a run in model_dir/logs, complete to its exit line (a
  SIGKILLed run leaves none)."""
  logs = glob.glob(os.path.join(model_dir, "logs", "rembert-train-*.log"))
  assert len(logs) == 1, logs
  text = open(logs[0]).read()
  assert text.startswith("rembert-train started"), text[:200]
  assert text.rstrip().endswith(f"(exit code {exit_code})"), text[-500:]
  return text


def assert_clean_console(text):
  assert "Logging error" not in text, text[-3000:]
  assert "I/O operation on closed file" not in text, text[-3000:]


def model_weights(checkpoint):
  return {name: tf.train.load_variable(checkpoint, name)
          for name, _ in tf.train.list_variables(checkpoint)
          if name.split("/")[0] in ("model", "encoder", "masked_lm")
          and "OPTIMIZER_SLOT" not in name}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  pretrain_testlib.write_records(root, splits=(("train", 1),))
  return root


def test_sigkill_resume_and_prompt_sigterm_save(records, tmp_path):
  steps = 8
  config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "exp.yaml", records, train_steps=steps, steps_per_loop=1,
      checkpoint_interval=2)
  long_config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "long.yaml", records, train_steps=3000, steps_per_loop=1000,
      checkpoint_interval=1000)
  whole_dir, killed_dir, term_dir, nan_dir, corrupt_dir = (
      str(tmp_path / n) for n in ("whole", "killed", "term", "nan", "corrupt"))
  corrupt_records = tmp_path / "corrupt_records"
  shutil.copytree(records, corrupt_records)
  shard = glob.glob(str(corrupt_records / "train" / "*.tfrecord"))[0]
  data = open(shard, "rb").read()
  with open(shard, "wb") as f:  # the last record cut in the middle
    f.write(data[:len(data) - 5])
  corrupt_config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "corrupt.yaml", corrupt_records, train_steps=40,
      steps_per_loop=1, checkpoint_interval=2)
  killed = start(config, killed_dir, tmp_path / "killed.log")
  term = start(long_config, term_dir, None, stderr=subprocess.PIPE)
  procs = [killed, term]
  try:
    # SIGKILL at some point after step 5: checkpoints exist at 2 and 4 (maybe 6).
    read_until(killed.stdout, progress_step_at_least(5), killed)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    # SIGTERM inside the first loop of 1000 steps, once a step is done.
    read_until(term.stderr, lambda l: "training: at step" in l, term)
    signalled = time.time()
    term.send_signal(signal.SIGTERM)
    term_log = term.stderr.read()
    assert term.wait(timeout=DEADLINE_SECONDS) == 42, term_log[-3000:]
    exit_seconds = time.time() - signalled

    # Saved at the step reached, long before the loop's end (step 1000).
    term_ckpt = tf.train.latest_checkpoint(term_dir)
    saved_step = int(term_ckpt.rsplit("-", 1)[1])
    assert 1 <= saved_step < 1000
    assert f"saved {term_ckpt} at step {saved_step} and stopped" in term_log
    assert exit_seconds < SIGTERM_EXIT_SECONDS, exit_seconds
    assert os.path.exists(os.path.join(term_dir, "encoder",
                                       f"ckpt-{saved_step}.index"))
    assert not [n for n in os.listdir(term_dir) if n.endswith("_temp")]

    assert f"saved {term_ckpt} at step {saved_step}" in kept_log(term_dir, 42)
    assert_clean_console(term_log)

    # Once the timed SIGTERM is done: the reruns, a NaN loss, records
    # corrupted mid-run.
    lost_at = tf.train.latest_checkpoint(killed_dir)
    assert lost_at is not None and int(lost_at.rsplit("-", 1)[1]) in (4, 6)
    resumed = start(config, killed_dir, tmp_path / "resumed.log")
    # The rerun saves each step, asynchronously; the write of the first is
    # held (train_with_stalled_save.py) until the release file exists.
    held = saved_step + 1
    marker, release = tmp_path / "held", tmp_path / "release"
    term_rerun = subprocess.Popen(
        [sys.executable, STALLED_SAVE, str(held), str(marker),
         *pretrain_testlib.train_command(
             long_config, term_dir, "--params_override",
             "trainer.steps_per_loop=1,trainer.summary_interval=1,"
             "trainer.checkpoint_interval=1,"
             "trainer.enable_async_checkpointing=true")[3:]],
        cwd=pretrain_testlib.REPO, stdout=subprocess.PIPE, text=True,
        stderr=subprocess.STDOUT, env=pretrain_testlib.subprocess_env(
            STALLED_SAVE_RELEASE_FILE=str(release)))
    nan = start(config, nan_dir, tmp_path / "nan.log", "--params_override",
                "trainer.optimizer_config.learning_rate.polynomial."
                "initial_learning_rate=1e30")
    corrupt = start(corrupt_config, corrupt_dir, tmp_path / "corrupt.log")
    procs += [resumed, term_rerun, nan, corrupt]
    # Meanwhile, the uninterrupted run: what `rembert-train --deterministic`
    # runs, in this process (the determinism is restored after it).
    runner.run(experiments.load_experiment_config([config]), whole_dir,
               deterministic=True, print_fn=lambda _: None)
    rerun_console = assert_sigterm_waits_for_the_write_in_flight(
        term_rerun, term_dir, term_ckpt, held, marker, release)
    assert f"resumed from {term_ckpt} at step {saved_step}" in rerun_console
    nan.communicate(timeout=DEADLINE_SECONDS)
    assert nan.returncode == 3
    nan_console = (tmp_path / "nan.log").read_text()
    assert "training loss is" in kept_log(nan_dir, 3)
    corrupt.communicate(timeout=DEADLINE_SECONDS)
    assert corrupt.returncode == 1
    corrupt_console = (tmp_path / "corrupt.log").read_text()
    assert "corrupted or truncated" in corrupt_console
    assert "corrupted or truncated" in kept_log(corrupt_dir, 1)
    for console in (nan_console, corrupt_console):
      assert_clean_console(console)
      assert "Traceback" not in console

    out, _ = resumed.communicate(timeout=DEADLINE_SECONDS)
    assert resumed.returncode == 0, (tmp_path / "resumed.log").read_text()[-2000:]
    assert "resumed from" in out
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()

  kept_log(killed_dir, 0)
  for name in ("killed", "resumed"):
    assert_clean_console((tmp_path / f"{name}.log").read_text())
  whole_ckpt = tf.train.latest_checkpoint(whole_dir)
  resumed_ckpt = tf.train.latest_checkpoint(killed_dir)
  assert whole_ckpt.endswith(f"ckpt-{steps}")
  assert resumed_ckpt.endswith(f"ckpt-{steps}")
  want, got = model_weights(whole_ckpt), model_weights(resumed_ckpt)
  assert set(want) == set(got) and len(want) > 20
  for name in want:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def assert_sigterm_waits_for_the_write_in_flight(proc, model_dir, newest, held,
                                                marker, release):
  """`proc` trains past step `held` while its asynchronous write of
  ckpt-`held` is held; SIGTERM lands then: the run waits for the write, saves
  the step reached and exits 42, every checkpoint named intact. Returns the
  console."""
  seen = []
  try:
    read_until(proc.stdout, progress_step_at_least(held + 1), proc, seen)
    prefix = f"{model_dir}/ckpt-{held}\n"
    deadline = time.time() + DEADLINE_SECONDS
    while not (marker.exists() and prefix in marker.read_text()) and (
        time.time() < deadline):
      time.sleep(0.2)
    assert prefix in marker.read_text()
    assert tf.train.latest_checkpoint(model_dir) == newest
    proc.send_signal(signal.SIGTERM)
    time.sleep(2)  # the stop is under way while the write is still held
    assert proc.poll() is None
    assert tf.train.latest_checkpoint(model_dir) == newest
    release.write_text("")
    console = "".join(seen) + proc.stdout.read()
    assert proc.wait(timeout=DEADLINE_SECONDS) == 42, console[-3000:]
  finally:
    if proc.poll() is None:
      proc.kill()
  latest = tf.train.latest_checkpoint(model_dir)
  step = int(latest.rsplit("-", 1)[1])
  assert step > held, latest
  assert f"saved {latest} at step {step} and stopped" in console
  # (TensorFlow's own probe for a GPU may say "failed call to cuInit".)
  failures = [l for l in console.splitlines()
              if "failed" in l and "cuInit" not in l]
  assert not failures, failures
  assert_clean_console(console)
  for prefix in (f"{model_dir}/ckpt-{held}", latest,
                 f"{model_dir}/encoder/ckpt-{step}"):
    assert checkpoint_integrity.problem(prefix) is None, prefix
  assert tf.train.load_variable(
      latest, "global_step/.ATTRIBUTES/VARIABLE_VALUE") == step
  assert not glob.glob(f"{model_dir}/**/*_temp", recursive=True)
  return console

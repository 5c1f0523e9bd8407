"""Masked-LM pre-training on JAX killed part-way (SIGKILL) and rerun resumes to the asked steps.

pretraining_resume_child.py pre-trains under Keras' `BackupAndRestore`
(its own process, KERAS_BACKEND=jax) and SIGKILLs itself once step 5 of 12
is backed up; the same command, rerun, restores the backup and trains the 7
steps left: 12 optimizer steps in all, not 17. Skipped when JAX or keras-hub
is not installed.
"""
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from pretraining import pretrain_testlib

REPO = pathlib.Path(__file__).resolve().parents[2]
CHILD = pathlib.Path(__file__).with_name("pretraining_resume_child.py")
STEPS, KILL_AT = 12, 5

_MISSING = [m for m in ("jax", "keras_hub") if importlib.util.find_spec(m) is None]
if _MISSING:
  pytest.skip(f"Keras backend jax: {', '.join(_MISSING)} not installed",
              allow_module_level=True)


def _child(records, backup, kill_at, out, compiled):
  """The child on JAX. compiled: a folder for JAX's persistent compilation
  cache, every program kept, so the rerun reuses what the killed run of the
  same model compiled."""
  env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=os.pathsep.join(
      [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  env.update(JAX_COMPILATION_CACHE_DIR=str(compiled),
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  env.pop("TF_USE_LEGACY_KERAS", None)
  return subprocess.run(
      [sys.executable, CHILD, records, backup, str(STEPS), str(kill_at), out],
      capture_output=True, text=True, cwd=REPO, env=env, timeout=900,
      check=False)


def test_killed_run_resumes_to_the_asked_steps(tmp_path):
  pretrain_testlib.write_records(tmp_path / "records", splits=(("train", 1),))
  records = str(tmp_path / "records" / "train" / "*.tfrecord")
  backup = str(tmp_path / "backup")
  compiled = tmp_path / "jax_compilation_cache"
  killed = _child(records, backup, KILL_AT, str(tmp_path / "killed.json"),
                  compiled)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert not (tmp_path / "killed.json").exists()
  assert (tmp_path / "backup").is_dir()
  rerun = _child(records, backup, 0, str(tmp_path / "rerun.json"), compiled)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  report = json.loads((tmp_path / "rerun.json").read_text())
  assert report == {"batches": STEPS - KILL_AT, "optimizer_steps": STEPS}
  # Finished: Keras removes the backup, so a third run starts afresh.
  assert not (tmp_path / "backup").exists()

"""rembert_tf.keras_hub.windowed_tasks and the in-graph preprocessors agree.

windowed_tasks_checks.py runs in its own process with Keras 3 on JAX (this
process holds tf-keras); skipped when JAX or keras-hub is not installed.
"""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECKS = pathlib.Path(__file__).with_name("windowed_tasks_checks.py")

_MISSING = [m for m in ("jax", "keras_hub") if importlib.util.find_spec(m) is None]
if _MISSING:
  pytest.skip(f"Keras backend jax: {', '.join(_MISSING)} not installed",
              allow_module_level=True)


def test_in_graph_rows_equal_the_python_rows():
  env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPO))
  env.pop("TF_USE_LEGACY_KERAS", None)
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
       str(CHECKS)],
      capture_output=True, text=True, cwd=REPO, env=env, timeout=900,
      check=False)
  assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
  # 3 tagging lengths, 4 window settings, the answer's text, the readers.
  assert "9 passed" in result.stdout, result.stdout[-2000:]

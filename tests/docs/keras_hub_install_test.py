"""docs/keras_hub.md's PyTorch step leaves the core environment whole.

PyTorch asks for a recent setuptools; setuptools 81 removed `pkg_resources`,
which TensorFlow Hub imports (docs/export.md). The guide's `pip install
torch` command therefore carries the core's setuptools cap itself, so pip
cannot move setuptools past it, and this environment (the test packages,
CPU PyTorch included, installed as tests/requirements-keras3.txt says) is
whole: `pip check` is clean and `import tensorflow_hub` works beside torch.
"""
import importlib.util
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _core_setuptools_cap() -> str:
  found = re.findall(r'"(setuptools<\d+)"', (REPO / "setup.py").read_text())
  assert found, "setup.py no longer caps setuptools"
  return found[0]


def _torch_install_commands():
  text = (REPO / "docs" / "keras_hub.md").read_text(encoding="utf-8")
  return [shlex.split(line, comments=True) for line in text.splitlines()
          if re.match(r"^\s*pip install torch\b", line)]


def test_the_guide_installs_torch_with_the_setuptools_cap():
  commands = _torch_install_commands()
  assert commands, "docs/keras_hub.md shows no `pip install torch` line"
  for argv in commands:
    assert _core_setuptools_cap() in argv, argv


def test_the_test_requirements_keep_the_cap():
  requirements = (REPO / "tests" / "requirements-keras3.txt").read_text()
  cap = re.search(r"^setuptools[^\n]*<(\d+)", requirements, re.M)
  assert cap and int(cap.group(1)) <= int(_core_setuptools_cap().split("<")[1])


def test_environment_with_torch_is_whole():
  if importlib.util.find_spec("torch") is None:
    pytest.skip("torch is not installed (tests/requirements-keras3.txt)")
  check = subprocess.run([sys.executable, "-m", "pip", "check"],
                         capture_output=True, text=True, timeout=300,
                         check=False)
  assert check.returncode == 0, check.stdout + check.stderr
  hub = subprocess.run(
      [sys.executable, "-c", "import torch, tensorflow_hub; "
       "print(tensorflow_hub.__version__)"],
      capture_output=True, text=True, timeout=300, check=False)
  assert hub.returncode == 0, hub.stderr[-3000:]

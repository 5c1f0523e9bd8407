"""The wheel works outside the repository: presets, experiments, console scripts.

Builds the wheel from a copy of the sources, installs it into a fresh virtual
environment in a temporary directory (the dependencies are borrowed from the
running environment through a .pth file, so nothing is downloaded), and runs
the console scripts from a directory that holds no checkout. The training run
also checks the console: one line per loop, TensorFlow's and orbit's lines
only in the log file.
"""
import importlib.util
import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys
import sysconfig

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ("setup.py", "README.md", "rembert_tf", "configs")


def _run(args, **kwargs):
  return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                        check=False, timeout=600, **kwargs)


def _build_wheel(tmp: pathlib.Path) -> pathlib.Path:
  missing = [m for m in ("setuptools", "wheel") if importlib.util.find_spec(m) is None]
  if missing:
    pytest.skip(f"cannot build the wheel offline: {', '.join(missing)} not "
                "installed in this environment (pip install setuptools wheel)")
  source = tmp / "src"
  for name in SOURCES:
    path = REPO / name
    if path.is_dir():
      shutil.copytree(path, source / name,
                      ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
      source.mkdir(parents=True, exist_ok=True)
      shutil.copy(path, source / name)
  built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                "--no-build-isolation", "--no-index", "-q", "-w", tmp / "dist",
                source])
  assert built.returncode == 0, built.stdout + built.stderr
  (wheel,) = (tmp / "dist").glob("rembert_tf-*.whl")
  return wheel


def _fresh_venv(tmp: pathlib.Path, wheel: pathlib.Path) -> pathlib.Path:
  venv = tmp / "venv"
  made = _run([sys.executable, "-m", "venv", "--without-pip", venv])
  assert made.returncode == 0, made.stderr
  python = venv / "bin" / "python"
  installed = _run([sys.executable, "-m", "pip", "--python", python, "install",
                    "--no-deps", "--no-index", "-q", wheel])
  assert installed.returncode == 0, installed.stdout + installed.stderr
  # The dependencies (TensorFlow, Model Garden, ...) of the running
  # environment; .pth files inside them are not run, so an editable install
  # of rembert_tf there stays invisible.
  purelib = _run([python, "-c",
                  "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
  borrowed = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]]
              if os.path.isdir(p)]
  pathlib.Path(purelib.stdout.strip(), "borrowed_dependencies.pth").write_text(
      "\n".join(dict.fromkeys(borrowed)) + "\n")
  return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("wheel")
  venv = _fresh_venv(tmp, _build_wheel(tmp))
  elsewhere = tmp / "elsewhere"
  elsewhere.mkdir()
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
  env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
  env["VIRTUAL_ENV"] = str(venv)

  def run(*args):
    return _run(args, cwd=elsewhere, env=env)
  return venv, elsewhere, run


def test_wheel_ships_the_package_and_its_configs(installed):
  venv, _, run = installed
  done = run(venv / "bin" / "python", "-c",
             "import importlib.resources as r, rembert_tf\n"
             "print(rembert_tf.__file__)\n"
             "configs = r.files('rembert_tf') / 'configs'\n"
             "print(sorted(p.name for p in (configs / 'models').iterdir()))\n"
             "print(sorted(p.name for p in (configs / 'experiments').iterdir()))")
  assert done.returncode == 0, done.stderr
  module, models, experiments = done.stdout.splitlines()
  assert module.startswith(str(venv)) and str(REPO) not in module
  assert "'tiny.yaml'" in models and "'rembert.yaml'" in models
  assert "'pretrain_tiny_demo.yaml'" in experiments
  scripts = {p.name for p in (venv / "bin").glob("rembert-*")}
  assert {"rembert-train", "rembert-finetune", "rembert-demo",
          "rembert-train-sentencepiece", "rembert-create-pretraining-data",
          "rembert-create-finetuning-data", "rembert-export", "rembert-convert",
          "rembert-evaluate-xtreme", "rembert-param-table",
          "rembert-make-demo-corpus", "rembert-retrieve"} <= scripts


def test_console_scripts_resolve_and_list_their_flags(installed):
  _, _, run = installed
  demo = run("rembert-demo", "--help")
  assert "Traceback" not in demo.stderr and "USAGE" in demo.stdout, demo.stderr
  train = run("rembert-train", "--help")
  assert "Traceback" not in train.stderr, train.stderr
  for flag in ("--config_file", "--mode", "--model_dir", "--params_override", "--[no]verbose",
               "--log_dir"):
    assert flag in train.stdout, flag


def test_metadata_states_the_python_range_per_extra_and_tensorboard(installed):
  venv, _, run = installed
  done = run(venv / "bin" / "python", "-c",
             "import importlib.metadata as m, json\n"
             "d = m.metadata('rembert_tf')\n"
             "print(json.dumps([d['Requires-Python'], d.get_all('Requires-Dist')]))")
  assert done.returncode == 0, done.stderr
  python, requires = json.loads(done.stdout)
  assert sorted(python.split(",")) == ["<3.13", ">=3.10"]
  assert "tensorboard~=2.20.0" in requires
  keras = [r for r in requires if 'extra == "keras"' in r]
  assert len(keras) == 3 and all('python_version >= "3.11"' in r for r in keras)


def test_param_table_on_a_shipped_preset(installed):
  _, _, run = installed
  done = run("rembert-param-table", "tiny", "--json")
  assert done.returncode == 0, done.stderr
  (row,) = json.loads(done.stdout.strip().splitlines()[-1])
  assert row["config"] == "tiny" and row["pt_params"] == 1_105_360
  assert "cuInit" not in done.stderr and "oneDNN" not in done.stderr


def test_tiny_training_run_with_a_shipped_experiment(installed):
  _, elsewhere, run = installed
  overrides = ("task.train_data.input_path=synthetic,"
               "task.validation_data.input_path=synthetic,"
               "task.train_data.global_batch_size=4,"
               "task.validation_data.global_batch_size=4,"
               "trainer.train_steps=4,trainer.steps_per_loop=2,"
               "trainer.validation_interval=4,trainer.validation_steps=1")
  done = run("rembert-train", "--config_file", "pretrain_tiny_demo",
             "--params_override", overrides, "--model_dir", "run",
             "--mode", "train_and_eval")
  assert done.returncode == 0, done.stdout + done.stderr
  model_dir = elsewhere / "run"
  assert (model_dir / "ckpt-4.index").exists()
  # The console: one line per loop, no orbit dump, no TensorFlow start-up.
  loop_lines = [l for l in done.stdout.splitlines() if l.startswith("step ")]
  assert [l.split(" | ")[0] for l in loop_lines] == ["step 2/4", "step 4/4"]
  assert "mlm_acc" in loop_lines[1] and "ex/s" in loop_lines[1]
  assert "ETA" in loop_lines[1]
  console = done.stdout + done.stderr
  for noise in ("train | step", "restoring or initializing", "oneDNN",
                "cpu_feature_guard", "cuInit", "output: "):
    assert noise not in console, noise
  assert not re.search(r"^[IWE]\d{4} ", console, re.MULTILINE)
  # The log file in the run directory holds everything.
  (log,) = (model_dir / "logs").glob("rembert-train-*.log")
  text = log.read_text()
  assert "train | step" in text and "step 4/4" in text
  assert f"full log: {log.relative_to(elsewhere)}" in done.stderr

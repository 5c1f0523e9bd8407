"""Folders transformers itself writes, and damaged presets, on every Keras 3 backend.

transformers' `save_pretrained` (CPU PyTorch, its own process:
transformers_fixtures.py) writes a tiny `RemBertModel` (names without a
prefix), `RemBertForSequenceClassification` (under `rembert.`, with the
pooler), `RemBertForMaskedLM` (under `rembert.`, no pooler) and a `BertModel`
with transformers' outputs; `rembert-convert --to keras_hub` converts the
masked-LM folder to a preset. Then transformers_folders_checks.py runs in
one process per backend (the harness of keras_backends_test.py): each
folder's `from_preset` against transformers' outputs, keras-hub's own loading
of other models unchanged, and one line for each damaged folder or preset.
On JAX and PyTorch those processes cannot import TensorFlow
(`sitecustomize` below). Here: `rembert-convert --from keras_hub` on
damaged presets.
"""
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import testlib
from keras3 import keras_backends_test as harness

HERE = pathlib.Path(__file__).parent
CHECKS = HERE / "transformers_folders_checks.py"
TOLERANCE = 1e-5
# On sys.path first in the JAX and PyTorch processes: TensorFlow is then as
# absent as if it were not installed (`find_spec` finds nothing).
NO_TENSORFLOW = '''import importlib.machinery
_find_spec = importlib.machinery.PathFinder.find_spec.__func__
def _without_tensorflow(cls, name, path=None, target=None):
  if name.split(".")[0] in ("tensorflow", "tf_keras", "tensorflow_text"):
    return None
  return _find_spec(cls, name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(_without_tensorflow)
'''
_CONVERT = """
import json, sys
from rembert_tf.conversion import converter
converter.convert_checkpoint(**json.loads(sys.argv[1]))
"""


def _run_backends(root: pathlib.Path):
  no_tensorflow = root / "no_tensorflow"
  no_tensorflow.mkdir()
  (no_tensorflow / "sitecustomize.py").write_text(NO_TENSORFLOW)
  children, results = {}, {}
  for backend, module in sorted(harness.BACKEND_MODULES.items()):
    if importlib.util.find_spec(module) is None:
      results[backend] = (None, f"{module} is not installed")
      continue
    out = root / f"run_{backend}"
    out.mkdir()
    extra = {} if backend == "tensorflow" else {"PYTHONPATH": ":".join(
        [str(no_tensorflow), harness._python_env()["PYTHONPATH"]])}  # pylint: disable=protected-access
    children[backend] = (out, harness._start(  # pylint: disable=protected-access
        [sys.executable, "-m", "pytest", "-q", "-rs", "--noconftest",
         "-p", "no:cacheprovider", "-p", "no:warnings", "--rootdir", HERE,
         CHECKS],
        root / f"{backend}.log", KERAS_BACKEND=backend,
        REMBERT_HF_FIXTURES=str(root), REMBERT_HF_OUTPUT=str(out),
        **harness.BACKEND_ENV.get(backend, {}), **extra))
  for backend, (out, child) in children.items():
    try:
      results[backend] = (out, harness._finish(child))  # pylint: disable=protected-access
    except AssertionError as e:
      results[backend] = (out, e)
  return results


@pytest.fixture(scope="module")
def hf_fixtures(tmp_path_factory):
  for module in ("torch", "transformers"):
    if importlib.util.find_spec(module) is None:
      pytest.skip(f"{module} is not installed (tests/requirements-keras3.txt)")
  root = tmp_path_factory.mktemp("hf_folders")
  harness._finish(harness._start(  # pylint: disable=protected-access
      [sys.executable, HERE / "transformers_fixtures.py", root,
       testlib.SENTENCEPIECE_VOCAB_SIZE], root / "transformers.log"))
  harness._finish(harness._start(  # pylint: disable=protected-access
      [sys.executable, "-c", _CONVERT, json.dumps(dict(
          from_format="hf", to_format="keras_hub",
          input_path=str(root / "hf" / "mlm"),
          output_dir=str(root / "presets" / "mlm"),
          sp_model=str(testlib.sentencepiece_model()),
          allow_missing_pooler=True, with_output_side=True))],
      root / "convert.log"))
  return dict(root=root, runs=_run_backends(root))


@pytest.mark.parametrize("backend", sorted(harness.BACKEND_MODULES))
def test_transformers_folders(backend, hf_fixtures, capsys):
  out, result = hf_fixtures["runs"][backend]
  if out is None:
    pytest.skip(result)
  if isinstance(result, AssertionError):
    raise result
  assert re.search(r"^\d+ passed", result.splitlines()[-1]), result[-3000:]
  report = json.loads((out / "report.json").read_text())
  assert sorted(report) == ["base", "mlm", "mlm_logits", "prefixed"], report
  worst = {name: max(errors.values()) for name, errors in report.items()}
  assert max(worst.values()) <= TOLERANCE, (backend, report)
  with capsys.disabled():
    print(f"\n[{backend}] max |keras - transformers|: " + ", ".join(
        f"{name} {output} {error:.2e}" for name, errors in report.items()
        for output, error in errors.items()))


def _damaged(preset: pathlib.Path, tmp: pathlib.Path):
  """name -> (folder, the file its line names)."""
  cases = {}
  for name in ("huge", "no_head", "empty", "config", "vocabulary"):
    cases[name] = pathlib.Path(shutil.copytree(preset, tmp / name))
  weights = cases["huge"] / "model.weights.h5"
  data = bytearray(weights.read_bytes())
  start = len(data) // 2
  data[start:start + 4096] = np.full([1024], 1e30, "<f4").tobytes()
  weights.write_bytes(bytes(data))
  (cases["no_head"] / "task.weights.h5").unlink()
  (cases["empty"] / "model.weights.h5").write_bytes(b"")
  config = cases["config"] / "config.json"
  config.write_text(config.read_text()[:100])
  spm = cases["vocabulary"] / "assets" / "tokenizer" / "vocabulary.spm"
  spm.write_bytes(b"")
  return {"huge": (cases["huge"], weights),
          "no_head": (cases["no_head"], cases["no_head"] / "task.weights.h5"),
          "empty": (cases["empty"], cases["empty"] / "model.weights.h5"),
          "config": (cases["config"], config),
          "vocabulary": (cases["vocabulary"], spm)}


# One process (each pays for importing TensorFlow and Keras): the converter
# on every damaged preset but one, then `rembert-convert` as its console
# script runs it (its run(), which exits with the command's status) on that
# one.
_CONVERT_EACH = """
import json, sys
from rembert_tf.cli import convert_checkpoint as command
from rembert_tf.common import errors
from rembert_tf.conversion import converter
lines = {}
for name, folder, out in json.loads(sys.argv[1]):
  try:
    converter.convert_checkpoint("keras_hub", "rembert_tf", folder, out)
    lines[name] = None
  except errors.RemBertError as e:
    lines[name] = str(e)
print(json.dumps(lines), flush=True)
sys.argv = ["rembert-convert", *json.loads(sys.argv[2])]
command.run()
"""


def test_damaged_presets_refused_by_conversion(hf_fixtures, tmp_path):
  """`rembert-convert --from keras_hub`: one line naming the file, nothing
  written; the command itself once (exit 1), the converter for the rest."""
  cases = _damaged(hf_fixtures["root"] / "presets" / "mlm", tmp_path)
  folder, named = cases.pop("no_head")
  out = tmp_path / "out_no_head"
  result = subprocess.run(
      [sys.executable, "-c", _CONVERT_EACH, json.dumps([
          (name, str(damaged), str(tmp_path / f"out_{name}"))
          for name, (damaged, _) in cases.items()]), json.dumps([
              "--from=keras_hub", "--to=rembert_tf", f"--checkpoint={folder}",
              f"--output_dir={out}"])],
      capture_output=True, text=True, env=harness._python_env(),  # pylint: disable=protected-access
      cwd=harness.REPO, timeout=600)
  lines = [line for line in result.stderr.splitlines()
           if line.startswith("rembert-convert: error:")]
  assert result.returncode == 1, result.stderr[-3000:]
  assert len(lines) == 1 and str(named) in lines[0], result.stderr[-3000:]
  assert "Traceback" not in result.stderr and not out.exists()
  (messages,) = [json.loads(line) for line in result.stdout.splitlines()
                 if line.startswith("{")]
  for name, (_, named) in cases.items():
    assert messages[name] and "\n" not in messages[name], (name, messages)
    assert str(named) in messages[name], (name, messages[name])
    assert not (tmp_path / f"out_{name}").exists()

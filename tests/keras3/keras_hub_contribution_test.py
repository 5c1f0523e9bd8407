"""tools/keras_hub_contribution: the port laid out in keras-hub's tree, and its conversion script.

This process holds tf-keras (tests/conftest.py): the layout command, the
import of the laid-out package and the conversion script run in processes
of their own, with Keras 3 on TensorFlow.
"""
import ast
import importlib.util
import os
import pathlib
import py_compile
import re
import shutil
import subprocess
import sys

import pytest

import testlib
from conversion import conversion_testlib

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "keras_hub_contribution"
MODELS = "keras_hub/src/models/rembert"
UPSTREAM_TESTS = TOOLS / "upstream"
LAID_OUT = sorted(
    [f"{MODELS}/{p.name}" for p in (REPO / "rembert_tf" / "keras_hub").glob("*.py")
     if p.stem not in ("__init__", "transformers_checkpoint", "windowed_tasks",
                       "pretraining_records", "masked_lm_pretraining")]
    + [str(p.relative_to(UPSTREAM_TESTS)) for p in UPSTREAM_TESTS.rglob("*.py")]
    + [f"{MODELS}/__init__.py", f"{MODELS}/rembert_presets.py",
       "keras_hub/src/utils/transformers/convert_rembert.py",
       "keras_hub/src/tests/test_data/rembert_test_vocab.spm",
       "tools/checkpoint_conversion/convert_rembert_checkpoints.py",
       "tools/sentencepiece_testing/create_rembert_test_proto.py",
       "UPSTREAM.md"])
# One test file per class, as keras-hub's albert/ has.
PER_CLASS_TESTS = sorted(
    f"{MODELS}/{p.stem}_test.py" for p in (REPO / "rembert_tf" / "keras_hub").glob(
        "rembert_*.py"))

# Imports the laid-out package into the installed keras-hub (its folders
# added to keras-hub's package paths) and builds a tiny backbone.
_IMPORT_LAID_OUT = """
import sys
import keras
import numpy as np
import keras_hub.src.models
import keras_hub.src.utils.transformers
root = sys.argv[1]
keras_hub.src.models.__path__.append(root + "/keras_hub/src/models")
keras_hub.src.utils.transformers.__path__.append(
    root + "/keras_hub/src/utils/transformers")
from keras_hub.src.models import rembert
from keras_hub.src.utils.transformers import convert_rembert
backbone = rembert.RemBertBackbone(
    vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    intermediate_dim=16, embedding_dim=4, max_sequence_length=8)
outputs = backbone({"token_ids": np.ones([1, 5], "int32"),
                    "segment_ids": np.zeros([1, 5], "int32"),
                    "padding_mask": np.ones([1, 5], "int32")})
print("registered", keras.saving.get_registered_name(rembert.RemBertBackbone))
print("presets", sorted(rembert.RemBertBackbone.presets))
print("shape", tuple(outputs["pooled_output"].shape))
print("hf_name", convert_rembert.hf_name("bert/pooler/dense/kernel"))
"""


def _run(args, timeout=600):
  env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=str(REPO))
  env.pop("TF_USE_LEGACY_KERAS", None)
  return subprocess.run([sys.executable, *map(str, args)], capture_output=True,
                        text=True, cwd=REPO, env=env, timeout=timeout,
                        check=False)


def _imported_modules(path: pathlib.Path):
  names = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.ImportFrom) and node.module:
      names.add(node.module)
    elif isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
  return names


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory):
  """The lay-out command's output, once for this file's tests."""
  out = tmp_path_factory.mktemp("lay_out") / "keras-hub"
  result = _run([TOOLS / "lay_out.py", f"--output_dir={out}"])
  assert result.returncode == 0, result.stderr[-3000:]
  return out


def test_lay_out_writes_keras_hubs_tree_and_it_imports(laid_out):
  out = laid_out
  assert sorted(str(p.relative_to(out)) for p in out.rglob("*")
                if p.is_file()) == LAID_OUT
  assert set(PER_CLASS_TESTS) <= set(LAID_OUT), PER_CLASS_TESTS
  vocab = (out / "keras_hub/src/tests/test_data/rembert_test_vocab.spm")
  assert b"[CLS]" in vocab.read_bytes() and b"[MASK]" in vocab.read_bytes()
  for path in out.rglob("*.py"):
    py_compile.compile(str(path), doraise=True)
    imported = _imported_modules(path)
    assert not [m for m in imported if m.startswith(("rembert_tf", "harness"))], (
        path, imported)
  converter = (out / "keras_hub/src/utils/transformers/convert_rembert.py")
  assert "RemBertAwarePresetLoader" not in converter.read_text()
  assert "def hf_name" in converter.read_text()
  presets = (out / MODELS / "rembert_presets.py").read_text()
  assert '"params": 575920384' in presets   # the released backbone
  again = _run([TOOLS / "lay_out.py", f"--output_dir={out}"])
  assert again.returncode == 1
  assert [line for line in again.stderr.splitlines()
          if line.startswith("keras-hub-lay-out:")] == [
      f"keras-hub-lay-out: error: {out} already exists; choose another output "
      "or pass --overwrite to replace it (the old output stays until the new "
      "one is complete)."], again.stderr[-2000:]
  assert (out / MODELS / "rembert_presets.py").read_text() == presets
  result = _run(["-c", _IMPORT_LAID_OUT, out])
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.splitlines()
  assert "registered keras_hub>RemBertBackbone" in lines
  assert "presets ['rembert_multi']" in lines
  assert "shape (1, 8)" in lines
  assert "hf_name ('rembert.pooler.dense.weight', True)" in lines


def test_conversion_script_from_the_released_layout(tmp_path):
  """A TF1 checkpoint in the released layout -> a keras-hub preset, equal
  to the source; `--help` answers."""
  result = _run([TOOLS / "convert_rembert_checkpoints.py", "--help"])
  assert result.returncode == 0 and "--source" in result.stdout, result.stderr
  cfg = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE)
  (tmp_path / "release").mkdir()
  _, prefix = conversion_testlib.write_released_checkpoint(
      tmp_path / "release", cfg)
  out = tmp_path / "rembert_multi"
  result = _run([TOOLS / "convert_rembert_checkpoints.py",
                 "--preset=rembert_multi", "--source=tf1", f"--checkpoint={prefix}",
                 f"--sentencepiece_model={testlib.released_layout_sentencepiece()}",
                 f"--output_dir={out}"])
  assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
  differences = {line.split()[4].rstrip(":"): float(line.split()[-1])
                 for line in result.stdout.splitlines()
                 if line.startswith("max |keras - source|")}
  assert sorted(differences) == ["mlm_logits", "pooled_output",
                                 "sequence_output"], result.stdout
  assert max(differences.values()) <= 1e-5, differences
  assert sorted(p.name for p in out.iterdir()) == [
      "assets", "config.json", "metadata.json", "model.weights.h5",
      "preprocessor.json", "task.json", "task.weights.h5", "tokenizer.json"]


def test_an_import_with_no_home_in_keras_hub_is_refused():
  """A module of the port that reaches into the project's TensorFlow code
  cannot be laid out: the rewrite names the file, line and import."""
  source_rewrite = _tool_module("source_rewrite")
  context = source_rewrite.Context(["rembert_backbone"], {}, [])
  rewritten = source_rewrite.rewrite_module(
      "def f():\n  from rembert_tf.keras_hub import rembert_backbone\n",
      context, "m.py")
  assert rewritten == ("def f():\n  from keras_hub.src.models.rembert "
                       "import rembert_backbone\n")
  with pytest.raises(source_rewrite.LayoutError,
                     match=r"m.py:2: imports rembert_encoder from "
                     r"rembert_tf.modeling"):
    source_rewrite.rewrite_module(
        "import os\nfrom rembert_tf.modeling import rembert_encoder\n",
        context, "m.py")


# keras-hub's CI: its pyproject.toml and root conftest.py (the wheel holds
# neither), and the edit UPSTREAM.md asks of preset_loader.py where the
# laid-out tree does not carry it.
CI = TOOLS / "keras_hub_ci"
# Tests of tools/keras_hub_contribution/upstream/ that run without
# --run_large (keras-hub's TestCase adds a `test_session` to each class).
EXPECTED_PASSED = 38
PRESET_LOADER = "keras_hub/src/utils/transformers/preset_loader.py"
REGISTRATION = (
    ("from keras_hub.src.utils.transformers import convert_qwen\n",
     "from keras_hub.src.utils.transformers import convert_rembert\n"),
    ('        elif model_type == "bert":\n',
     '        elif model_type == "rembert":\n'
     "            self.converter = convert_rembert\n"))


def _keras_hub_checkout(root: pathlib.Path, laid_out: pathlib.Path):
  """A keras-hub tree: the installed package, keras-hub's CI files, the
  laid-out files on top."""
  package = importlib.util.find_spec("keras_hub").submodule_search_locations[0]
  shutil.copytree(package, root / "keras_hub",
                  ignore=shutil.ignore_patterns("__pycache__"))
  for name in ("pyproject.toml", "conftest.py"):
    shutil.copy(CI / name, root / name)
  shutil.copytree(laid_out, root, dirs_exist_ok=True)
  if not (laid_out / PRESET_LOADER).exists():
    loader = root / PRESET_LOADER
    text = loader.read_text(encoding="utf-8")
    for anchor, added in REGISTRATION:
      assert text.count(anchor) == 1, anchor   # keras-hub moved its lookup
      text = text.replace(anchor, anchor + added if anchor.startswith(
          "from") else added + anchor)
    loader.write_text(text, encoding="utf-8")


def test_laid_out_tree_passes_keras_hubs_ci(laid_out, tmp_path):
  """keras-hub's own CI commands in a keras-hub tree holding the laid-out
  files: `ruff format --check` and `ruff check` with its settings report
  nothing on them, and its pytest run of the model's folder and converter
  test passes on JAX with no variable of this project set (`large` and
  `extra_large` tests skipped, as keras-hub's CI runs by default). It is
  the JAX run of the harness methods keras-hub's files share with
  keras_backends_test.py (its _HARNESS_RUN_BY_KERAS_HUB_CI), which leaves
  them to this test there."""
  root = tmp_path / "keras-hub"
  _keras_hub_checkout(root, laid_out)
  python_files = sorted(str(p.relative_to(laid_out))
                        for p in laid_out.rglob("*.py"))
  for command in (["format", "--check"], ["check"]):
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache",
         "--config", "pyproject.toml", *python_files], capture_output=True,
        text=True, cwd=root, check=False, timeout=120)
    assert ruff.returncode == 0, (command, ruff.stdout[-3000:], ruff.stderr)
  env = {k: v for k, v in os.environ.items()
         if not k.startswith("REMBERT") and k != "TF_USE_LEGACY_KERAS"}
  env.update(KERAS_BACKEND="jax", PYTHONPATH=str(root))
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
       MODELS,
       "keras_hub/src/utils/transformers/convert_rembert_test.py"],
      capture_output=True, text=True, cwd=root, env=env, timeout=900,
      check=False)
  summary = result.stdout.strip().splitlines()[-1] if result.stdout else ""
  assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
  counts = {word: int(number) for number, word in
            re.findall(r"(\d+) (passed|failed|skipped|error)", summary)}
  print(f"keras-hub pytest on JAX: {summary}")
  assert counts.get("passed", 0) >= EXPECTED_PASSED, summary
  assert not counts.get("failed") and not counts.get("error"), summary


def _tool_module(name):
  spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_lines_past_keras_hubs_width_are_wrapped():
  """What ruff format leaves over 80 columns: a comment, a trailing
  comment, a docstring line, a string literal, a long import; a table
  line stays."""
  style = _tool_module("keras_hub_style")
  words = " ".join(["word"] * 20)
  source = (
      f"from keras_hub.src.models.rembert.{'x' * 60} import (\n    A,\n)\n"
      f"# {words}\n"
      "def f():\n"
      f'    """{words}\n\n    | {words} |\n    """\n'
      f"    x = 1  # {words}\n"
      f'    return (\n        "{words}"\n    )\n')
  wrapped = style.wrap_long_lines(source)
  long_lines = [line for line in wrapped.splitlines() if len(line) > 80]
  assert long_lines == [
      f"from keras_hub.src.models.rembert.{'x' * 60} import (  # noqa: E501",
      f"    | {words} |"], wrapped
  compile(wrapped, "wrapped.py", "exec")
  assert wrapped.count("word") == source.count("word")
  assert "    # word" in wrapped and "    x = 1\n" in wrapped
  assert style.drop_pylint_comments(
      "a = 1  # pylint: disable=x\n# pylint: disable=y\nb = 2\n") == (
          "a = 1\nb = 2\n")

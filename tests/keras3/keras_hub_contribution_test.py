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
import subprocess
import sys

import pytest

import testlib
from conversion import conversion_testlib

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "keras_hub_contribution"
MODELS = "keras_hub/src/models/rembert"
LAID_OUT = sorted(
    [f"{MODELS}/{p.name}" for p in (REPO / "rembert_tf" / "keras_hub").glob("*.py")
     if p.stem not in ("__init__", "transformers_checkpoint", "windowed_tasks",
                       "pretraining_records", "masked_lm_pretraining")]
    + [f"{MODELS}/__init__.py", f"{MODELS}/rembert_presets.py",
       f"{MODELS}/rembert_layers_test.py", f"{MODELS}/rembert_tasks_test.py",
       "keras_hub/src/utils/transformers/convert_rembert.py",
       "tools/checkpoint_conversion/convert_rembert_checkpoints.py",
       "UPSTREAM.md"])

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


def test_lay_out_writes_keras_hubs_tree_and_it_imports(tmp_path):
  out = tmp_path / "keras-hub"
  result = _run([TOOLS / "lay_out.py", f"--output_dir={out}"])
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(str(p.relative_to(out)) for p in out.rglob("*")
                if p.is_file()) == LAID_OUT
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
  spec = importlib.util.spec_from_file_location(
      "source_rewrite", TOOLS / "source_rewrite.py")
  source_rewrite = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(source_rewrite)
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

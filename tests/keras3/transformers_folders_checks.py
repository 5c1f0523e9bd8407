"""Hugging Face folders and damaged presets through `from_preset`, on this process's backend.

Run by keras_backends_test.py on each backend (`KERAS_BACKEND`): on
TensorFlow in its process beside backend_checks.py, on JAX and PyTorch in a
process of its own; with `REMBERT_HF_FIXTURES` (the folders transformers wrote,
its outputs, a preset `rembert-convert --to keras_hub` wrote from the
masked-LM folder) and `REMBERT_HF_OUTPUT` (where the parity figures go). On
JAX and PyTorch the process cannot import TensorFlow (a `sitecustomize` on
its path hides it), so these checks also show the classes need none there.
"""
import inspect
import json
import logging
import os
import pathlib
import shutil
import sys

import pytest

FIXTURES = os.environ.get("REMBERT_HF_FIXTURES")
OUTPUT = os.environ.get("REMBERT_HF_OUTPUT")
if not (FIXTURES and OUTPUT):   # before Keras 3 is imported
  pytest.skip("run by tests/keras3/keras_backends_test.py (it writes the "
              "fixtures)", allow_module_level=True)

# pylint: disable=g-import-not-at-top,wrong-import-position
import h5py
import keras
import keras_hub
import numpy as np
from keras_hub.src.utils import preset_utils
from keras_hub.src.utils.transformers import preset_loader

from rembert_tf import keras_hub as rk
from rembert_tf.conversion import keras_hub_loading
from rembert_tf.keras_hub import transformers_checkpoint
# pylint: enable=g-import-not-at-top,wrong-import-position

ROOT, OUT = pathlib.Path(FIXTURES), pathlib.Path(OUTPUT)
HF, PRESET = ROOT / "hf", ROOT / "presets" / "mlm"
REFERENCE = np.load(ROOT / "reference.npz")
INPUTS = {"token_ids": REFERENCE["ids"], "segment_ids": REFERENCE["types"],
          "padding_mask": REFERENCE["mask"]}


def _report(key, value):
  path = OUT / "report.json"
  report = json.loads(path.read_text()) if path.exists() else {}
  report[key] = value
  path.write_text(json.dumps(report, indent=2))


def _max_error(actual, expected):
  return float(np.max(np.abs(keras.ops.convert_to_numpy(actual) - expected)))


@pytest.mark.parametrize("name", ["base", "prefixed", "mlm"])
def test_backbone_equals_transformers(name, caplog):
  with caplog.at_level(logging.WARNING):
    backbone = rk.RemBertBackbone.from_preset(str(HF / name))
  outputs = backbone(INPUTS)
  errors = {"sequence_output": _max_error(
      outputs["sequence_output"], REFERENCE[f"{name}/sequence_output"])}
  warnings = [r.getMessage() for r in caplog.records
              if "pooler" in r.getMessage()]
  if name == "mlm":   # no pooler: left as the layer initialises it
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert str(HF / name) in warnings[0]
    kernel = keras.ops.convert_to_numpy(backbone.pooled_dense.kernel)
    assert 0.01 < np.std(kernel) < 0.03   # truncated normal, stddev 0.02
  else:
    assert not warnings, warnings
    errors["pooled_output"] = _max_error(
        outputs["pooled_output"], REFERENCE[f"{name}/pooled_output"])
  _report(name, errors)
  assert max(errors.values()) <= 1e-5, errors


def test_masked_lm_equals_transformers():
  masked_lm = rk.RemBertMaskedLM.from_preset(str(HF / "mlm"),
                                             preprocessor=None)
  assert masked_lm.output_embedding_dim == 24
  logits = masked_lm({**INPUTS, "mask_positions": REFERENCE["positions"]})
  error = _max_error(logits, REFERENCE["mlm/mlm_logits"])
  _report("mlm_logits", {"mlm_logits": error})
  assert error <= 1e-5


def test_no_other_model_loads_differently():
  """keras-hub's loader stays keras-hub's: another architecture's folder
  loads with keras-hub's own class as before."""
  assert preset_loader.TransformersPresetLoader.__module__ == (
      "keras_hub.src.utils.transformers.preset_loader")
  loader = preset_utils.get_preset_loader(str(HF / "bert"))
  assert type(loader) is preset_loader.TransformersPresetLoader  # pylint: disable=unidiomatic-typecheck
  bert = keras_hub.models.BertBackbone.from_preset(str(HF / "bert"))
  assert bert.hidden_dim == 16
  with pytest.raises(ValueError):   # keras-hub has no RemBERT of its own
    preset_utils.get_preset_loader(str(HF / "base"))


def test_keras_hub_loader_calls_the_converter():
  """What the RemBERT classes' loader relies on: keras-hub's Hugging Face
  loader calls the converter's functions. Fails when keras-hub changes it."""
  base = keras_hub_loading.RemBertTransformersLoader.__mro__[1]
  assert base is preset_loader.TransformersPresetLoader
  source = inspect.getsource(base)
  for call in ("self.converter.convert_backbone_config",
               "self.converter.convert_weights",
               "self.converter.convert_tokenizer",
               "self.converter.backbone_cls"):
    assert call in source, call
  loader = keras_hub_loading.RemBertTransformersLoader(
      str(HF / "base"), {"model_type": "rembert"})
  assert loader.converter is transformers_checkpoint


def test_tensorflow_not_imported():
  if keras.backend.backend() == "tensorflow":
    pytest.skip("TensorFlow is this backend")
  assert not [m for m in sys.modules if m.split(".")[0] == "tensorflow"]
  with pytest.raises(ImportError):
    import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import


def _one_line(call, *expected):
  with pytest.raises(keras_hub_loading.PresetError) as raised:
    call()
  message = str(raised.value)
  assert "\n" not in message, message
  for part in expected:
    assert str(part) in message, (part, message)
  return message


def _copy(src, tmp_path, name="copy"):
  return shutil.copytree(src, tmp_path / name)


def test_bad_hugging_face_folders(tmp_path):
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(HF / "bert")),
            HF / "bert" / "config.json", "'bert'")
  # save_pretrained of a model writes no tokenizer.
  _one_line(lambda: rk.RemBertTextClassifier.from_preset(str(HF / "base"),
                                                         num_classes=2),
            HF / "base" / "sentencepiece.model", "preprocessor=None")
  missing = _copy(HF / "base", tmp_path, "missing")
  (missing / "model.safetensors").unlink()
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(missing)),
            missing / "model.safetensors", "not found")
  cut = _copy(HF / "base", tmp_path, "cut")
  data = (cut / "model.safetensors").read_bytes()
  (cut / "model.safetensors").write_bytes(data[:len(data) // 2])
  _one_line(lambda: rk.RemBertMaskedLM.from_preset(str(cut)),
            cut / "model.safetensors", f"{len(data) // 2} bytes")
  lost = _copy(HF / "prefixed", tmp_path, "lost_tensor")
  from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top
  tensors = safetensors_numpy.load_file(lost / "model.safetensors")
  del tensors["rembert.encoder.layer.1.output.dense.weight"]
  safetensors_numpy.save_file(tensors, lost / "model.safetensors")
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(lost)),
            lost / "model.safetensors",
            "rembert.encoder.layer.1.output.dense.weight")


def _dataset_offset(path, largest=True):
  """Byte offset of the largest dataset of an HDF5 file."""
  found = []
  with h5py.File(path, "r") as f:
    f.visititems(lambda key, item: found.append(
        (item.size, item.id.get_offset())) if isinstance(
            item, h5py.Dataset) and item.id.get_offset() else None)
  return max(found)[1] if largest else min(found)[1]


def _overwrite(path, offset, data):
  with open(path, "r+b") as f:
    f.seek(offset)
    f.write(data)


def test_damaged_presets(tmp_path):
  loads = rk.RemBertMaskedLM.from_preset(str(PRESET))   # whole: loads
  assert loads.output_embedding_dim == 24
  # 4 KB of large finite values: only the checksum written at save time sees it.
  huge = _copy(PRESET, tmp_path, "huge")
  weights = huge / "model.weights.h5"
  _overwrite(weights, _dataset_offset(weights),
             np.full([1024], 1e30, "<f4").tobytes())
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(huge)), weights,
            "checksum")
  # A preset keras-hub's save_to_preset wrote carries none: NaN are found.
  saved = tmp_path / "saved"
  loads.backbone.save_to_preset(str(saved))
  weights = saved / "model.weights.h5"
  _overwrite(weights, _dataset_offset(weights),
             np.full([1024], np.nan, "<f4").tobytes())
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(saved)), weights,
            "non-finite")
  no_head = _copy(PRESET, tmp_path, "no_head")
  (no_head / "task.weights.h5").unlink()
  _one_line(lambda: rk.RemBertMaskedLM.from_preset(str(no_head)),
            no_head / "task.weights.h5", "task.json")
  for case, damage in (("empty", lambda p: p.write_bytes(b"")),
                       ("cut", lambda p: p.write_bytes(p.read_bytes()[:3000])),
                       ("missing", lambda p: p.unlink())):
    folder = _copy(PRESET, tmp_path, case)
    damage(folder / "model.weights.h5")
    _one_line(lambda: rk.RemBertBackbone.from_preset(str(folder)),  # pylint: disable=cell-var-from-loop
              folder / "model.weights.h5")
  config = _copy(PRESET, tmp_path, "config")
  text = (config / "config.json").read_text()
  (config / "config.json").write_text(text[:len(text) // 2])
  _one_line(lambda: rk.RemBertBackbone.from_preset(str(config)),
            config / "config.json", "not valid JSON")
  vocabulary = _copy(PRESET, tmp_path, "vocabulary")
  (vocabulary / "assets" / "tokenizer" / "vocabulary.spm").write_bytes(b"")
  _one_line(lambda: rk.RemBertMaskedLM.from_preset(str(vocabulary)),
            vocabulary / "assets" / "tokenizer" / "vocabulary.spm", "0 bytes")
  _one_line(lambda: rk.RemBertTokenizer.from_preset(str(vocabulary)),
            "vocabulary.spm")

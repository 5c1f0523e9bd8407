"""Lazy, name-by-name readers of canonical tensors from each checkpoint format.

A source exposes `shapes()` (canonical name -> shape, read from the index
only, no tensor data), `get(name)` (one numpy array, read on demand) and
`display(name)` (the name as the user's file spells it, for error messages).
Reading one tensor at a time keeps memory at the size of the target model plus
one tensor, which is what makes the 12 GB released checkpoint convertible.

- `Tf1Source`: a TF1 name-based checkpoint (tf.train.load_checkpoint), the
  released RemBERT layout; optimizer slots and global_step are skipped, names
  outside `bert/` (the undocumented output side) are skipped and reported.
- `HfSource`: Hugging Face `model.safetensors` (or sharded) read with the
  safetensors package on numpy; torch Linear weights are transposed.
- `ModelSource`: the variables of a built rembert_tf model.

Example:
```python
source = tensor_sources.Tf1Source("rembert/model.ckpt")
shapes = source.shapes()                    # no tensor read yet
kernel = source.get("bert/pooler/dense/kernel")
```
"""
import json
import pathlib
import re
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from rembert_tf.conversion import weight_layout

HF_WEIGHTS_FILE = "model.safetensors"
HF_INDEX_FILE = "model.safetensors.index.json"
HF_CONFIG_FILE = "config.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")

PICKLE_REFUSAL = (
    "{path}: refusing to read a pickle-based PyTorch checkpoint. Loading "
    "pytorch_model.bin unpickles it, and unpickling runs arbitrary code from "
    "the file. Convert it to safetensors first in an environment you trust "
    "(e.g. `RemBertModel.from_pretrained(dir).save_pretrained(out, "
    "safe_serialization=True)` with transformers + torch, or download the "
    "model.safetensors the Hub publishes), then pass that directory.")


class Tf1Source:
  """Canonical tensors of a released-style TF1 checkpoint (bert/... names)."""

  def __init__(self, path):
    path = str(path)
    if tf.io.gfile.isdir(path):
      latest = tf.train.latest_checkpoint(path)
      if latest is None:
        raise weight_layout.ConversionError(
            f"{path}: no TF1 checkpoint (no `checkpoint` file). Pass the "
            "checkpoint prefix, e.g. DIR/model.ckpt (the part before "
            ".index).")
      path = latest
    try:
      self._reader = tf.train.load_checkpoint(path)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError) as e:
      raise weight_layout.ConversionError(
          f"{path}: cannot open as a TF1 checkpoint ({e}). Pass the prefix "
          "before .index / .data-*.") from None
    self.path = path
    all_shapes = self._reader.get_variable_to_shape_map()
    self._shapes = {}
    self.skipped_optimizer: List[str] = []
    self.skipped_output_side: List[str] = []
    for name, shape in all_shapes.items():
      if weight_layout.is_optimizer_or_bookkeeping(name):
        self.skipped_optimizer.append(name)
      elif not name.startswith(weight_layout.ENCODER_PREFIX):
        self.skipped_output_side.append(name)
      else:
        self._shapes[name] = tuple(shape)
    logging.info("%s: %d encoder tensors; skipping %d optimizer/bookkeeping "
                 "and %d output-side tensors (not used for fine-tuning)",
                 path, len(self._shapes), len(self.skipped_optimizer),
                 len(self.skipped_output_side))

  def shapes(self) -> Dict[str, Tuple[int, ...]]:
    return dict(self._shapes)

  def get(self, name) -> np.ndarray:
    return np.asarray(self._reader.get_tensor(name))

  def display(self, name) -> str:
    return name

  @property
  def description(self):
    return f"TF1 checkpoint {self.path}"


_HF_LAYER_PART = re.compile(r"\.layer\.(\d+)\.")


def canonical_from_hf(key: str) -> Optional[Tuple[str, bool]]:
  """HF transformers name -> (canonical name, transpose?); None if not a RemBERT weight."""
  if key.startswith("cls.predictions."):
    rest = key[len("cls.predictions."):]
    fixed = {"decoder.weight": ("cls/predictions/output_embedding", False),
             "decoder.bias": ("cls/predictions/output_bias", False),
             "dense.weight": ("cls/predictions/transform/dense/kernel", True),
             "dense.bias": ("cls/predictions/transform/dense/bias", False),
             "LayerNorm.weight": ("cls/predictions/transform/LayerNorm/gamma", False),
             "LayerNorm.bias": ("cls/predictions/transform/LayerNorm/beta", False)}
    return fixed.get(rest)
  if key.startswith("rembert."):
    key = key[len("rembert."):]
  if not key.startswith(("embeddings.", "encoder.", "pooler.")):
    return None
  key = _HF_LAYER_PART.sub(lambda m: f".layer_{m.group(1)}.", key)
  parts = key.split(".")
  leaf, owner = parts[-1], parts[-2]
  if leaf == "weight":
    if owner.endswith("_embeddings"):
      parts, transpose = parts[:-1], False
    elif owner == "LayerNorm":
      parts[-1], transpose = "gamma", False
    else:
      parts[-1], transpose = "kernel", True
  elif leaf == "bias":
    transpose = False
    if owner == "LayerNorm":
      parts[-1] = "beta"
  else:
    return None
  return "bert/" + "/".join(parts), transpose


class HfSource:
  """Canonical tensors of a Hugging Face RemBERT safetensors checkpoint."""

  def __init__(self, path):
    from safetensors import safe_open  # pylint: disable=g-import-not-at-top
    path = pathlib.Path(path)
    refuse_pickle(path)
    if path.is_dir():
      if (path / HF_INDEX_FILE).exists():
        index = json.loads((path / HF_INDEX_FILE).read_text(encoding="utf-8"))
        files = sorted({path / f for f in index["weight_map"].values()})
      elif (path / HF_WEIGHTS_FILE).exists():
        files = [path / HF_WEIGHTS_FILE]
      else:
        raise weight_layout.ConversionError(
            f"{path}: no {HF_WEIGHTS_FILE} (or {HF_INDEX_FILE}). A Hugging Face "
            f"RemBERT directory holds {HF_CONFIG_FILE} and {HF_WEIGHTS_FILE}.")
    else:
      files = [path]
    self.path = path
    self._handles = [safe_open(str(f), framework="np") for f in files]
    self._where = {}
    self._shapes = {}
    self.unparsed: List[str] = []
    self.prefix = "rembert."
    saw_prefixed = saw_bare = False
    for handle in self._handles:
      for key in handle.keys():
        if key.endswith("position_ids"):  # A buffer, not a weight.
          continue
        parsed = canonical_from_hf(key)
        if parsed is None:
          self.unparsed.append(key)
          continue
        saw_prefixed |= key.startswith("rembert.")
        saw_bare |= key.startswith(("embeddings.", "encoder.", "pooler."))
        name, transpose = parsed
        shape = tuple(handle.get_slice(key).get_shape())
        if transpose:
          shape = shape[::-1]
        self._where[name] = (handle, key, transpose)
        self._shapes[name] = shape
    if saw_bare and not saw_prefixed:
      self.prefix = ""

  def shapes(self):
    shapes = dict(self._shapes)
    shapes.update({k: () for k in self.unparsed})
    return shapes

  def get(self, name) -> np.ndarray:
    handle, key, transpose = self._where[name]
    try:
      array = handle.get_tensor(key)
    except (TypeError, ValueError) as e:  # e.g. bfloat16: numpy has no such dtype.
      raise weight_layout.ConversionError(
          f"{self.path}: cannot read {key} with numpy ({e}). Save the "
          "checkpoint in float32 (or float16) safetensors and retry.") from None
    if array.dtype != np.float32:
      logging.warning("%s: %s is %s; converting to float32", self.path, key,
                      array.dtype)
      array = array.astype(np.float32)
    return np.ascontiguousarray(array.T) if transpose else array

  def display(self, name) -> str:
    if name in self.unparsed:
      return name
    try:
      return weight_layout.hf_name(name, self.prefix)[0]
    except weight_layout.ConversionError:
      return name

  @property
  def description(self):
    return f"Hugging Face checkpoint {self.path}"


def refuse_pickle(path: pathlib.Path):
  """Raises for pytorch_model.bin (and friends): unpickling executes code."""
  path = pathlib.Path(path)
  if path.is_file() and (path.name in PICKLE_FILES
                         or path.suffix in (".bin", ".pt", ".pth", ".pkl")):
    raise weight_layout.ConversionError(PICKLE_REFUSAL.format(path=path))
  if path.is_dir() and not ((path / HF_WEIGHTS_FILE).exists()
                            or (path / HF_INDEX_FILE).exists()):
    for name in PICKLE_FILES:
      if (path / name).exists():
        raise weight_layout.ConversionError(
            PICKLE_REFUSAL.format(path=path / name))


class ModelSource:
  """Canonical tensors held by a built rembert_tf model (list of Slots)."""

  def __init__(self, slots, description="rembert_tf model"):
    self._slots = {s.name: s for s in slots}
    self.description = description

  def shapes(self):
    return {n: s.shape for n, s in self._slots.items()}

  def get(self, name):
    return self._slots[name].read()

  def display(self, name):
    return name

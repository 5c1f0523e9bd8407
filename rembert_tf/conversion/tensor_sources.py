"""Name-by-name readers of canonical tensors, and a streaming safetensors writer.

A source has `shapes()` (from the index or header alone), `get(name)`,
`read(names)`, `display(name)` (the user's spelling, for errors) and
`close()`, so a conversion holds the target model plus one batch:
`Tf1Source` (a TF1 checkpoint, read in batches per RestoreV2), `HfSource`
(safetensors, memory-mapped) and `ModelSource` (a built rembert_tf model).
"""
import contextlib
import json
import struct
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.conversion import weight_layout
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_reading

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
    path = fileio.as_str(path)
    # A prefix first: some filesystems (ram://) call any prefix a directory.
    if not fileio.exists(path + ".index") and fileio.isdir(path):
      latest = checkpoint_layout.latest_checkpoint(path)
      if latest is None:
        raise weight_layout.ConversionError(
            f"{path}: no TF1 checkpoint (no `checkpoint` file). Pass the "
            "checkpoint prefix, e.g. DIR/model.ckpt (the part before "
            ".index).")
      checkpoint_layout.announce_fallback(latest)
      path = latest
    elif fileio.exists(path + ".index"):
      checkpoint_layout.check_intact(path)
    try:
      self._reader = checkpoint_reading.CheckpointReader(path)
    except (tf.errors.OpError, ValueError) as e:
      raise weight_layout.ConversionError(
          f"{path}: cannot open as a TF1 checkpoint "
          f"({errors.one_line(e)[:300]}). Pass the prefix before .index / "
          ".data-*.") from None
    self.description = f"TF1 checkpoint {path}"
    self._shapes: Dict[str, Tuple[int, ...]] = {}
    self._file_names: Dict[str, str] = {}
    self.outside_encoder: Dict[str, Tuple[int, ...]] = {}
    skipped = 0
    for name, shape in self._reader.shapes.items():
      if weight_layout.is_optimizer_or_bookkeeping(name):
        skipped += 1
      elif (name.startswith(weight_layout.ENCODER_PREFIX)
            and "output_embedding" not in name):
        self._shapes[name] = tuple(shape)
      else:  # the output side (undocumented names)
        self.outside_encoder[name] = tuple(shape)
    logging.info("%s: %d encoder tensors, %d output-side tensors; skipping %d "
                 "optimizer/bookkeeping tensors", path, len(self._shapes),
                 len(self.outside_encoder), skipped)

  def add_output_side(self, cfg) -> None:
    """Adds the output side, matched by role and shape."""
    matched = weight_layout.match_output_side(self.description,
                                              self.outside_encoder, cfg)
    for canonical, name in matched.items():
      self._shapes[canonical] = self.outside_encoder[name]
      self._file_names[canonical] = name

  def shapes(self) -> Dict[str, Tuple[int, ...]]:
    return dict(self._shapes)

  def get(self, name) -> tf.Tensor:
    """One tensor as a float32 tf.Tensor (RestoreV2: read once, no numpy copy)."""
    ((_, value),) = self.read([name])
    return value

  def read(self, names: Iterable[str]) -> Iterator[Tuple[str, tf.Tensor]]:
    """(name, float32 tf.Tensor) for each name, in order, batched per RestoreV2."""
    names = list(names)
    stream = self._reader.read([self._file_names.get(n, n) for n in names])
    for name in names:
      _, value = next(stream)
      yield name, value if value.dtype == tf.float32 else tf.cast(value,
                                                                  tf.float32)
      del value  # nothing holds it while the next batch is read

  def display(self, name) -> str:
    return self._file_names.get(name, name)

  def close(self):
    pass


def _hf_names(cfg) -> Dict[str, Tuple[str, bool]]:
  """Hugging Face name, with and without `rembert.` -> (canonical name,
  transposed?), for every tensor a RemBERT of `cfg` may hold."""
  names = {}
  for name in weight_layout.expected_canonical_shapes(
      cfg, with_projection=True, output_side=True):
    for prefix in ("rembert.", ""):
      if not name.startswith("cls/output_layers/"):
        hf, transpose = weight_layout.hf_name(name, prefix)
        names[hf] = (name, transpose)
  return names


def hf_weight_files(path: str) -> List[str]:
  """The safetensors files of a Hugging Face input (directory, index or file)."""
  if fileio.isdir(path):
    index_path = fileio.join(path, HF_INDEX_FILE)
    if not fileio.exists(index_path):
      if fileio.exists(fileio.join(path, HF_WEIGHTS_FILE)):
        return [fileio.join(path, HF_WEIGHTS_FILE)]
      raise weight_layout.ConversionError(
          f"{path}: no {HF_WEIGHTS_FILE} (or {HF_INDEX_FILE}). A Hugging Face "
          f"RemBERT directory holds {HF_CONFIG_FILE} and {HF_WEIGHTS_FILE}.")
  elif not fileio.exists(path):
    raise weight_layout.ConversionError(
        f"{path} does not exist; pass the Hugging Face model directory (with "
        f"{HF_CONFIG_FILE} and {HF_WEIGHTS_FILE}).")
  elif path.endswith(".index.json"):
    index_path = path
  elif path.endswith(".json"):
    raise weight_layout.ConversionError(
        f"{path} is a JSON file, not weights; --from hf takes the directory "
        f"holding {HF_CONFIG_FILE} and {HF_WEIGHTS_FILE} (or the .safetensors "
        "file itself).")
  else:
    return [path]
  return [fileio.join(fileio.dirname(index_path), f) for f in
          weight_layout.hf_shard_files(index_path, fileio.read_text)]


class ReadOneByOne:
  """`read(names)` for sources whose `get` costs no round trip."""

  def read(self, names: Iterable[str]) -> Iterator[Tuple[str, object]]:
    return ((name, self.get(name)) for name in names)


class HfSource(ReadOneByOne):
  """Canonical tensors of a Hugging Face RemBERT safetensors checkpoint."""

  def __init__(self, path, cfg):
    path = fileio.as_str(path)
    self.description = f"Hugging Face checkpoint {path}"
    self._stack = contextlib.ExitStack()
    self._where, self._shapes, self._display = {}, {}, {}
    try:
      self._open(hf_weight_files(path), _hf_names(cfg))
    except BaseException:
      self._stack.close()
      raise
    # How the file names the encoder: "" as RemBertModel saves it, else
    # "rembert." (the task models).
    keys = self._display.values()
    bare = any(k.startswith(("embeddings.", "encoder.")) for k in keys)
    self._prefix = "" if bare and not any(
        k.startswith("rembert.") for k in keys) else "rembert."

  def _open(self, files: Sequence[str], hf_names):
    from safetensors import safe_open  # pylint: disable=g-import-not-at-top
    for file in files:
      if not fileio.exists(file):
        raise weight_layout.ConversionError(
            f"{file}: shard listed in {HF_INDEX_FILE} does not exist; restore "
            "it or the index.")
      local = self._stack.enter_context(local_files.local_copy(file))
      try:
        handle = self._stack.enter_context(safe_open(local, framework="np"))
        keys = list(handle.keys())
      except Exception as e:  # SafetensorError and friends: a damaged file.
        raise weight_layout.ConversionError(
            f"{file}: not a readable safetensors file "
            f"({errors.one_line(e)[:300]}): it is truncated, corrupted or "
            "another format. Download it again.") from None
      for key in keys:
        if key.endswith("position_ids"):  # A buffer, not a weight.
          continue
        # A name no RemBERT of the config has is listed as it is.
        name, transpose = hf_names.get(key, (key, False))
        shape = tuple(handle.get_slice(key).get_shape())
        self._where[name] = (handle, key, transpose, file)
        self._shapes[name] = shape[::-1] if transpose else shape
        self._display[name] = key

  def shapes(self):
    return dict(self._shapes)

  def get(self, name) -> np.ndarray:
    handle, key, transpose, file = self._where[name]
    try:
      array = handle.get_tensor(key)
    except (TypeError, ValueError) as e:  # e.g. bfloat16: numpy has no such dtype.
      raise weight_layout.ConversionError(
          f"{file}: cannot read {key} with numpy ({errors.one_line(e)[:300]})."
          " Save the checkpoint in float32 (or float16) safetensors and "
          "retry.") from None
    except Exception as e:  # SafetensorError: data past a truncated end.
      raise weight_layout.ConversionError(
          f"{file}: cannot read {key} ({errors.one_line(e)[:300]}): the file "
          "is truncated or corrupted. Download it again.") from None
    if array.dtype != np.float32:
      logging.warning("%s: %s is %s; converting to float32", file, key,
                      array.dtype)
      array = array.astype(np.float32)
    return np.ascontiguousarray(array.T) if transpose else array

  def display(self, name) -> str:
    if name in self._display:
      return self._display[name]
    return weight_layout.hf_name(name, self._prefix)[0]

  def close(self):
    self._stack.close()


def refuse_pickle(path: str):
  """Raises for pytorch_model.bin (and friends): unpickling executes code."""
  name = fileio.basename(path)
  if fileio.isdir(path):
    if not (fileio.exists(fileio.join(path, HF_WEIGHTS_FILE))
            or fileio.exists(fileio.join(path, HF_INDEX_FILE))):
      for pickled in PICKLE_FILES:
        if fileio.exists(fileio.join(path, pickled)):
          raise weight_layout.ConversionError(
              PICKLE_REFUSAL.format(path=fileio.join(path, pickled)))
  elif name in PICKLE_FILES or name.endswith((".bin", ".pt", ".pth", ".pkl")):
    raise weight_layout.ConversionError(PICKLE_REFUSAL.format(path=path))


class ModelSource(ReadOneByOne):
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

  def close(self):
    self._slots = {}


# === writing ===
_WRITE_CHUNK = 1 << 26  # 64 MB: bytes() copies, and TF filesystems want bytes.


def write_safetensors(path: str, shapes: Dict[str, Tuple[int, ...]],
                      tensors: Iterable[Tuple[str, np.ndarray]],
                      metadata: Optional[Dict[str, str]] = None,
                      progress: Callable[[int, int, str], None] = None) -> None:
  """Writes float32 tensors as a safetensors file, taking one tensor at a time.

  `tensors` yields (name, array) for every name of `shapes` in sorted order.
  """
  names = sorted(shapes)
  header, offset = {}, 0
  if metadata:
    header["__metadata__"] = dict(metadata)
  for name in names:
    nbytes = 4 * int(np.prod(shapes[name], dtype=np.int64))
    header[name] = {"dtype": "F32", "shape": [int(d) for d in shapes[name]],
                    "data_offsets": [offset, offset + nbytes]}
    offset += nbytes
  encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
  encoded += b" " * (-len(encoded) % 8)
  with fileio.open_file(path, "wb") as out:
    out.write(struct.pack("<Q", len(encoded)))
    out.write(encoded)
    for i, (name, array) in enumerate(tensors, 1):
      array = np.ascontiguousarray(array, dtype="<f4")
      data = memoryview(array).cast("B")
      for start in range(0, len(data), _WRITE_CHUNK):
        out.write(bytes(data[start:start + _WRITE_CHUNK]))
      del data, array
      if progress:
        progress(i, len(names), name)

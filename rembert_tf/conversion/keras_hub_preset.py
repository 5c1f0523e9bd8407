"""Writes and reads keras-hub preset directories, one tensor at a time.

The output of `rembert-convert --to keras_hub` and the input of `--from
keras_hub` (`open_preset`): config.json and model.weights.h5 (the backbone),
metadata.json, tokenizer.json with its SentencePiece model, and with the
output side task.json, task.weights.h5 and preprocessor.json
(RemBertMaskedLM). Each `.weights.h5` carries the SHA-256 of its tensors.

Builds on keras-hub's `save_to_preset` without building the model at full
size: a skeleton with widths of 1-2 is saved with each weight filled by a
marker naming its canonical tensor, then the configs get the real sizes and
each marked HDF5 dataset is replaced by the real tensor. Reading inverts
that map (`PresetSource`).

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.conversion import converter
converter.convert_checkpoint("tf1", "keras_hub", "rembert/model.ckpt",
                             "presets/rembert", sp_model="rembert/sentencepiece.model",
                             with_output_side=True)
```
"""
import contextlib
import json
from typing import Dict, Iterator, Optional, Tuple

import h5py
import numpy as np
from absl import logging
from keras_hub.src.tokenizers import sentence_piece_tokenizer
from keras_hub.src.utils import preset_utils

from rembert_tf.common import console
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.conversion import config_json
from rembert_tf.conversion import weight_layout
from rembert_tf.keras_hub import canonical_weights
from rembert_tf.conversion import keras_hub_loading
from rembert_tf.conversion import tensor_sources
from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_masked_lm
from rembert_tf.keras_hub import rembert_masked_lm_preprocessor
from rembert_tf.keras_hub import rembert_tokenizer

# Skeleton weight k holds MARKER + k everywhere (exact in float32 up to 2^24).
MARKER = 1_000_000.0
_WEIGHT_FILES = ("model.weights.h5", "task.weights.h5")
_CONFIG_FILE, _TASK_FILE, _METADATA_FILE = ("config.json", "task.json",
                                            "metadata.json")


def _skeleton_config(cfg) -> Dict:
  """The same architecture (layers, heads, projection or not), tiny widths."""
  heads = cfg.num_attention_heads
  projected = cfg.input_embedding_size != cfg.hidden_size
  values = rembert_backbone.backbone_kwargs(cfg.as_dict())
  values.update(vocabulary_size=1, intermediate_dim=1, max_sequence_length=1,
                num_segments=1, hidden_dim=2 * heads if projected else heads,
                embedding_dim=1 if projected else heads)
  return values


def keras_shape(name: str, canonical_shape, cfg) -> Tuple[int, ...]:
  """The Keras variable's shape of a canonical tensor (attention kernels per head)."""
  heads = cfg.num_attention_heads
  head_dim = cfg.hidden_size // heads
  if "/attention/self/" in name:
    if name.endswith("/kernel"):
      return (canonical_shape[0], heads, head_dim)
    return (heads, head_dim)
  if name.endswith("/attention/output/dense/kernel"):
    return (heads, head_dim, canonical_shape[1])
  return tuple(canonical_shape)


def _fresh_value(name: str, shape, cfg) -> np.ndarray:
  """A tensor the source lacks (the pooler of an MLM-only export)."""
  if name.endswith(("/bias", "/beta")):
    return np.zeros(shape, np.float32)
  if name.endswith("/gamma"):
    return np.ones(shape, np.float32)
  std = cfg.initializer_range
  values = np.random.default_rng(0).normal(0.0, std, shape)
  return np.clip(values, -2 * std, 2 * std).astype(np.float32)


def _save_skeleton(cfg, with_output_side, sp_bytes, folder: str
                   ) -> Dict[str, Tuple[str, str]]:
  """Saves the skeleton preset into `folder`, weight k filled with MARKER + k;
  -> canonical name -> (weights file, dataset path)."""
  tokenizer = (rembert_tokenizer.RemBertTokenizer(proto=sp_bytes)
               if sp_bytes else None)
  backbone = rembert_backbone.RemBertBackbone(**_skeleton_config(cfg))
  model, head = backbone, None
  if with_output_side:
    preprocessor = None
    if tokenizer is not None:
      preprocessor = rembert_masked_lm_preprocessor.RemBertMaskedLMPreprocessor(
          tokenizer, sequence_length=min(512, cfg.max_position_embeddings))
    model = rembert_masked_lm.RemBertMaskedLM(
        backbone, output_embedding_dim=1, preprocessor=preprocessor)
    head = model.masked_lm_head
  pairs = canonical_weights.canonical_variables(backbone, head)
  for index, (_, variable) in enumerate(pairs):
    variable.assign(np.full(variable.shape, MARKER + index, np.float32))
  model.save_to_preset(folder)
  if tokenizer is not None and not fileio.exists(
      fileio.join(folder, "tokenizer.json")):
    tokenizer.save_to_preset(folder)
  marked = {}
  for file_name in _WEIGHT_FILES:
    if not fileio.exists(fileio.join(folder, file_name)):
      continue
    with h5py.File(fileio.join(folder, file_name), "r") as weights:
      def visit(key, item, file_name=file_name):
        index = (_marker_index(item) if isinstance(item, h5py.Dataset)
                 else None)
        if index is not None:
          marked[index] = (file_name, key)
      weights.visititems(visit)
  return {name: marked[index] for index, (name, _) in enumerate(pairs)}


def _patch_configs(folder: str, cfg, with_output_side: bool,
                   parameter_count: int) -> None:
  """The skeleton's JSON files with the real sizes."""
  real = rembert_backbone.backbone_kwargs(cfg.as_dict())
  path = fileio.join(folder, _CONFIG_FILE)
  config = fileio.read_json(path)
  config["config"].update(real)
  _write_json(path, config)
  path = fileio.join(folder, _METADATA_FILE)
  metadata = fileio.read_json(path)
  metadata["parameter_count"] = parameter_count
  _write_json(path, metadata)
  if with_output_side:
    path = fileio.join(folder, _TASK_FILE)
    task = fileio.read_json(path)
    task["config"]["backbone"]["config"].update(real)
    task["config"]["output_embedding_dim"] = cfg.output_embedding_size
    _write_json(path, task)


def _write_json(path, value):
  fileio.write_text(path, json.dumps(value, indent=4))


def _marker_index(dataset) -> Optional[int]:
  if dataset.dtype.kind != "f" or dataset.size == 0:
    return None
  values = np.asarray(dataset[()]).reshape([-1])
  index = values[0] - MARKER
  if index < 0 or index != int(index) or np.any(values != values[0]):
    return None
  return int(index)


@contextlib.contextmanager
def _local_folder(folder: str) -> Iterator[str]:
  """`folder` itself when local; else a local temporary copied there at the end
  (h5py and keras-hub write local files only)."""
  if not fileio.is_remote(folder):
    yield folder
    return
  # Owner-tagged: a killed run's copy is removed by the next run.
  with outputs.local_scratch_dir("rembert_tf-preset-") as local:
    yield local
    for relative in fileio.files_under(local):
      fileio.copy(fileio.join(local, relative), fileio.join(folder, relative))


def _warn_about(cfg, sp_model) -> None:
  """What the preset cannot keep (the converter refused what it cannot hold)."""
  if cfg.attention_probs_dropout_prob != cfg.hidden_dropout_prob:
    logging.warning("keras-hub's Transformer block has one dropout rate: the "
                    "preset uses hidden_dropout_prob=%s for attention too "
                    "(attention_probs_dropout_prob=%s).",
                    cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob)
  if sp_model is None:
    logging.warning("No SentencePiece model (--sentencepiece_model): the "
                    "preset holds no "
                    "tokenizer; the tasks' from_preset then needs one passed.")


def write_preset(cfg, source, names, with_output_side, output_dir,
                 sp_model) -> None:
  """Writes the preset of `names` (canonical tensors of `source`) into the
  (temporary) output_dir; a tensor not in `names` keeps a fresh initialisation."""
  _warn_about(cfg, sp_model)
  shapes = weight_layout.expected_canonical_shapes(
      cfg, output_side=with_output_side)
  given = set(names)
  for name in sorted(set(shapes) - given):
    logging.warning("%s is not in %s: it keeps a fresh initialisation.", name,
                    source.description)
  parameter_count = sum(int(np.prod(shape)) for name, shape in shapes.items()
                        if name.startswith(weight_layout.ENCODER_PREFIX))
  with _local_folder(output_dir) as folder, \
      console.progress("writing the keras-hub preset", total=len(shapes),
                       unit="tensors") as bar:
    where = _save_skeleton(cfg, with_output_side,
                           sp_model and fileio.read_bytes(sp_model), folder)
    _patch_configs(folder, cfg, with_output_side, parameter_count)
    for file_name in sorted({f for f, _ in where.values()}):
      path = fileio.join(folder, file_name)
      with h5py.File(path, "r+") as weights:  # each marked dataset replaced
        for name, (in_file, key) in where.items():
          if in_file != file_name:
            continue
          value = (source.get(name) if name in given
                   else _fresh_value(name, shapes[name], cfg))
          attributes = dict(weights[key].attrs)
          del weights[key]
          weights.create_dataset(key, data=np.asarray(value, np.float32).reshape(
              keras_shape(name, shapes[name], cfg))).attrs.update(attributes)
          del value
          bar.update(1)
      # Checked by every from_preset and --from keras_hub before use.
      keras_hub_loading.write_checksum(path)


# --- Reading a preset (`rembert-convert --from keras_hub`) ----------------------


def _registered_config(folder: str, file_name: str, class_name: str,
                       required: bool = True) -> Optional[Dict]:
  """FILE's `config` if it serializes rembert_tf's CLASS; else None (or an error if `required`)."""
  path = fileio.join(folder, file_name)
  if not fileio.isfile(path):
    if not required:
      return None
    raise weight_layout.ConversionError(
        f"{path}: not found; --from keras_hub reads a preset written by "
        "rembert_tf.keras_hub (save_to_preset or rembert-convert --to "
        "keras_hub).")
  serialized = fileio.read_json(path)
  expected = f"rembert_tf>{class_name}"
  if serialized.get("registered_name") != expected:
    if not required:
      return None
    raise weight_layout.ConversionError(
        f"{path}: registered_name is {serialized.get('registered_name')!r}, "
        f"expected {expected!r} (a preset of rembert_tf.keras_hub).")
  return serialized["config"]


class PresetSource(tensor_sources.ReadOneByOne):
  """Canonical tensors of a rembert_tf.keras_hub preset, one dataset at a time."""

  def __init__(self, folder: str, cfg, with_output_side: bool):
    self.description = f"keras-hub preset {folder}"
    self._folder, self._cfg = folder, cfg
    with outputs.local_scratch_dir("rembert_tf-skeleton-") as skeleton:
      self._where = _save_skeleton(cfg, with_output_side, None, skeleton)
    self._canonical = weight_layout.expected_canonical_shapes(
        cfg, output_side=with_output_side)
    self._stack = contextlib.ExitStack()
    self._files = {}
    try:
      for file_name in sorted({f for f, _ in self._where.values()}):
        path = fileio.join(folder, file_name)
        if not fileio.isfile(path):
          raise weight_layout.ConversionError(
              f"{path}: not found; the preset's config needs it.")
        local = self._stack.enter_context(fileio.local_copy(path))
        self._files[file_name] = self._stack.enter_context(
            h5py.File(local, "r"))
    except BaseException:
      self._stack.close()
      raise

  def _dataset(self, name):
    file_name, key = self._where[name]
    return self._files[file_name].get(key)

  def shapes(self) -> Dict[str, Tuple[int, ...]]:
    """Canonical shapes; a dataset of another shape keeps its own (the
    converter's check then names it)."""
    shapes = {}
    for name in self._where:
      dataset = self._dataset(name)
      if dataset is None:
        continue
      canonical = tuple(self._canonical[name])
      shapes[name] = (canonical if tuple(dataset.shape) == keras_shape(
          name, canonical, self._cfg) else tuple(dataset.shape))
    return shapes

  def get(self, name) -> np.ndarray:
    return np.asarray(self._dataset(name)[()], np.float32).reshape(
        self._canonical[name])

  def display(self, name) -> str:
    file_name, key = self._where[name]
    return f"{file_name}:{key} ({name})"

  def close(self):
    self._stack.close()


def open_preset(path: str, read_output_side: bool):
  """-> (RemBertConfig, PresetSource, SentencePiece model or None); the output
  side is read when asked for and the task is a RemBertMaskedLM."""
  folder = fileio.as_str(path).rstrip("/")
  try:
    keras_hub_loading.check_keras_preset(folder, weights=True,
                                      task=read_output_side, tokenizer=True)
  except keras_hub_loading.PresetError as e:
    raise weight_layout.ConversionError(str(e)) from None
  backbone = _registered_config(folder, _CONFIG_FILE, "RemBertBackbone")
  task = (_registered_config(folder, _TASK_FILE, "RemBertMaskedLM",
                             required=False) if read_output_side else None)
  cfg = config_json.model_config_from_json_dict(
      rembert_backbone.model_config_fields(backbone),
      fileio.join(folder, _CONFIG_FILE),
      output_embedding_size=task and task["output_embedding_dim"])
  source = PresetSource(folder, cfg, with_output_side=task is not None)
  sp_model = fileio.join(folder, preset_utils.TOKENIZER_ASSET_DIR,
                         sentence_piece_tokenizer.VOCAB_FILENAME)
  return cfg, source, sp_model if fileio.isfile(sp_model) else None

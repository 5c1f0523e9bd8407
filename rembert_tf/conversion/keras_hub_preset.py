"""Writes and reads keras-hub presets of `rembert_tf.keras_hub`, one tensor at a time.

`write_preset` (`rembert-convert --to keras_hub`) and `open_preset` (`--from
keras_hub`) never build the model at full size: keras-hub's `save_to_preset`
saves a skeleton of the same architecture at widths of 1-2 whose weight k
holds the marker MARKER + k; the configs then get the real sizes and each
marked HDF5 dataset is replaced by the real tensor, or read from
(`PresetSource`). Each `.weights.h5` carries the SHA-256 of its tensors.
"""
import contextlib
import json
from typing import Dict, Iterator, Optional, Tuple

import h5py
import numpy as np
from absl import logging
from keras_hub.src.tokenizers import sentence_piece_tokenizer
from keras_hub.src.utils import preset_utils

from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.common import progress
from rembert_tf.conversion import config_json
from rembert_tf.conversion import tensor_sources
from rembert_tf.conversion import weight_layout
# rembert_tf.keras_hub first: its __init__ imports keras_hub_loading.
from rembert_tf.keras_hub import canonical_weights
from rembert_tf.conversion import keras_hub_loading  # pylint: disable=g-bad-import-order
from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_masked_lm
from rembert_tf.keras_hub import rembert_masked_lm_preprocessor
from rembert_tf.keras_hub import rembert_tokenizer

MARKER = 1_000_000.0  # exact in float32, MARKER + k too, up to 2^24
_WEIGHT_FILES = (preset_utils.MODEL_WEIGHTS_FILE,
                 preset_utils.TASK_WEIGHTS_FILE)


def _skeleton(cfg, with_output_side, sp_bytes):
  """(the model to save, its canonical variables, its tokenizer or None):
  `cfg`'s architecture (layers, heads, projection or not) at tiny widths."""
  heads = cfg.num_attention_heads
  projected = cfg.input_embedding_size != cfg.hidden_size
  values = rembert_backbone.backbone_kwargs(cfg.as_dict())
  values.update(vocabulary_size=1, intermediate_dim=1, max_sequence_length=1,
                num_segments=1, hidden_dim=2 * heads if projected else heads,
                embedding_dim=1 if projected else heads)
  backbone = rembert_backbone.RemBertBackbone(**values)
  tokenizer = (rembert_tokenizer.RemBertTokenizer(proto=sp_bytes)
               if sp_bytes else None)
  if not with_output_side:
    return backbone, canonical_weights.canonical_variables(backbone), tokenizer
  preprocessor = None
  if tokenizer is not None:
    preprocessor = rembert_masked_lm_preprocessor.RemBertMaskedLMPreprocessor(
        tokenizer, sequence_length=min(512, cfg.max_position_embeddings))
  task = rembert_masked_lm.RemBertMaskedLM(
      backbone, output_embedding_dim=1, preprocessor=preprocessor)
  return (task, canonical_weights.canonical_variables(
      backbone, task.masked_lm_head), tokenizer)


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
  """Saves the skeleton preset into `folder`; -> canonical name -> (weights
  file, dataset path)."""
  model, pairs, tokenizer = _skeleton(cfg, with_output_side, sp_bytes)
  for index, (_, variable) in enumerate(pairs):
    variable.assign(np.full(variable.shape, MARKER + index, np.float32))
  model.save_to_preset(folder)
  if tokenizer is not None and not fileio.exists(
      fileio.join(folder, preset_utils.TOKENIZER_CONFIG_FILE)):
    tokenizer.save_to_preset(folder)
  marked = {}
  for file_name in _WEIGHT_FILES:
    if not fileio.exists(fileio.join(folder, file_name)):
      continue
    with h5py.File(fileio.join(folder, file_name), "r") as weights:
      def visit(key, item, file_name=file_name):
        index = _marker_index(item)
        if index is not None:
          marked[index] = (file_name, key)
      weights.visititems(visit)
  return {name: marked[index] for index, (name, _) in enumerate(pairs)}


def _marker_index(item) -> Optional[int]:
  if not isinstance(item, h5py.Dataset) or item.dtype.kind != "f" or (
      item.size == 0):
    return None
  values = np.asarray(item[()]).reshape([-1])
  index = values[0] - MARKER
  if index < 0 or index != int(index) or np.any(values != values[0]):
    return None
  return int(index)


def _patch_configs(folder: str, cfg, with_output_side: bool,
                   parameter_count: int) -> None:
  """The skeleton's JSON files with the real sizes."""
  real = rembert_backbone.backbone_kwargs(cfg.as_dict())

  def patch(file_name, edit):
    path = fileio.join(folder, file_name)
    value = fileio.read_json(path)
    edit(value)
    fileio.write_text(path, json.dumps(value, indent=4))

  patch(preset_utils.CONFIG_FILE, lambda config: config["config"].update(real))
  patch(preset_utils.METADATA_FILE,
        lambda metadata: metadata.update(parameter_count=parameter_count))
  if with_output_side:
    def edit_task(task):
      task["config"]["backbone"]["config"].update(real)
      task["config"]["output_embedding_dim"] = cfg.output_embedding_size
    patch(preset_utils.TASK_CONFIG_FILE, edit_task)


@contextlib.contextmanager
def _local_folder(folder: str) -> Iterator[str]:
  """`folder` itself when local; else a local temporary copied there at the end
  (h5py and keras-hub write local files only)."""
  if not fileio.is_remote(folder):
    yield folder
    return
  # Owner-tagged: a killed run's copy is removed by the next run.
  with local_files.local_scratch_dir("rembert_tf-preset-") as local:
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
      progress.Progress("writing the keras-hub preset", total=len(shapes),
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


def _registered(folder: str, file_name: str, class_name: str
                ) -> Tuple[Optional[Dict], object]:
  """(FILE's `config` if it serializes rembert_tf's CLASS else None, the
  class it names)."""
  path = fileio.join(folder, file_name)
  serialized = fileio.read_json(path) if fileio.isfile(path) else {}
  name = serialized.get("registered_name")
  return (serialized["config"] if name == f"rembert_tf>{class_name}"
          else None), name


class PresetSource(tensor_sources.ReadOneByOne):
  """Canonical tensors of a rembert_tf.keras_hub preset, one dataset at a time."""

  def __init__(self, folder: str, cfg, with_output_side: bool):
    self.description = f"keras-hub preset {folder}"
    self._cfg = cfg
    with local_files.local_scratch_dir("rembert_tf-skeleton-") as skeleton:
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
        local = self._stack.enter_context(local_files.local_copy(path))
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
  config_path = fileio.join(folder, preset_utils.CONFIG_FILE)
  backbone, registered = _registered(folder, preset_utils.CONFIG_FILE,
                                     "RemBertBackbone")
  if backbone is None:
    raise weight_layout.ConversionError(
        f"{config_path}: registered_name is {registered!r}, expected "
        "'rembert_tf>RemBertBackbone' (a preset of rembert_tf.keras_hub).")
  task = (_registered(folder, preset_utils.TASK_CONFIG_FILE,
                      "RemBertMaskedLM")[0] if read_output_side else None)
  cfg = config_json.model_config_from_json_dict(
      rembert_backbone.model_config_fields(backbone), config_path,
      output_embedding_size=task and task["output_embedding_dim"])
  source = PresetSource(folder, cfg, with_output_side=task is not None)
  sp_model = fileio.join(folder, preset_utils.TOKENIZER_ASSET_DIR,
                         sentence_piece_tokenizer.VOCAB_FILENAME)
  return cfg, source, sp_model if fileio.isfile(sp_model) else None

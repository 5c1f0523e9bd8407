"""The one checkpoint API: where a model's weights are, and reading them into a model.

A *checkpoint source* is any path a user gives a command that needs weights:

| source                          | what it holds                                         |
| ------------------------------- | ----------------------------------------------------- |
| checkpoint directory            | `model_config.yaml`, `encoder/ckpt-N`, optionally `pretrainer/ckpt-N` and `sentencepiece.model` (written by conversion) |
| pre-training `model_dir`        | the same files plus Model Garden's full `ckpt-N` (`model` = the pretrainer, `optimizer`, `global_step`, `encoder`) |
| checkpoint prefix               | e.g. `DIR/encoder/ckpt-3` or `DIR/ckpt-3` (config from `DIR/model_config.yaml` or given) |
| exported SavedModel directory   | `saved_model.pb`, `variables/`, `model_config.yaml`, `assets/sentencepiece.model` |

`load_encoder(source)` builds the encoder and restores it (what fine-tuning,
export and conversion need); `restore_pretrainer(pretrainer, source)` restores
the encoder *and* the output side (MLM transform, output embedding and bias,
output-side layers), which only a pretrainer checkpoint has
(`pretrainer/ckpt-N` or a model_dir's `ckpt-N`); the optimizer and step are
never read. Reading is by object structure: the encoder (or pretrainer) node
is found in the checkpoint's object graph, wherever the writer put it, and
only that subtree is read, a bounded batch of variables at a time
(`checkpoint_reading`).

Layout of a checkpoint directory:
```
DIR/model_config.yaml        the RemBertConfig (see configs/models/)
DIR/encoder/ckpt-N.*         tf.train.Checkpoint(encoder=encoder): what fine-tuning keeps
DIR/pretrainer/ckpt-N.*      tf.train.Checkpoint(model=pretrainer): encoder + output side
DIR/sentencepiece.model      the tokenizer (optional), with sentencepiece.json beside it
```
The encoder-only checkpoint uses the key `encoder`, the key Model Garden's
`BertPretrainerV2.checkpoint_items` and its fine-tuning tasks'
`init_checkpoint` use; the pretrainer one uses `model`, as Model Garden's
trainer does, so a pre-training experiment can start from `pretrainer/`.

Every path goes through `rembert_tf.common.fileio` and `tf.train`: gs://
sources work. Builds on `tf.train.Checkpoint` (object-based reading with
`expect_partial`) and `tf.train.CheckpointManager` (writing).

Example:
```python
from rembert_tf.modeling import checkpoints, rembert_pretrainer
cfg, encoder = checkpoints.load_encoder("converted/rembert")   # or a SavedModel
pretrainer = rembert_pretrainer.build_pretrainer(cfg)
checkpoints.restore_pretrainer(pretrainer, "converted/rembert")  # + output side
checkpoints.find_sentencepiece("converted/rembert")  # ".../sentencepiece.model"
```
"""
import collections
import contextlib
import dataclasses
import json
import os
from typing import Callable, Iterator, Optional, Tuple, Union

import tensorflow as tf
from absl import logging

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import tokenizer
from rembert_tf.modeling import checkpoint_reading
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

MODEL_CONFIG_FILE = "model_config.yaml"
ENCODER_SUBDIR = "encoder"
PRETRAINER_SUBDIR = "pretrainer"
SENTENCEPIECE_FILE = "sentencepiece.model"
SAVED_MODEL_FILE = "saved_model.pb"

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# A node is the encoder / the pretrainer when it has these children.
_ENCODER_CHILDREN = frozenset({"_embedding_layer", "_transformer_layers",
                               "_pooler_layer"})
_PRETRAINER_CHILDREN = frozenset({"encoder_network", "masked_lm"})

ModelConfigLike = Union[None, str, os.PathLike, rembert_config.RemBertConfig]


class CheckpointError(errors.RemBertError, ValueError):
  """A checkpoint source is missing a part or does not match the model."""


@dataclasses.dataclass(frozen=True)
class CheckpointSource:
  """A user's checkpoint path, resolved to the files that hold each part.

  Attributes:
    path: the path as given.
    kind: "directory" (checkpoint directory or model_dir), "prefix" or
      "saved_model".
    encoder_checkpoint: object-based checkpoint prefix holding the encoder.
    pretrainer_checkpoint: prefix holding the whole pretrainer (encoder +
      output side), or None (encoder-only sources).
    model_config: path of the model_config.yaml, or None.
    sp_model: path of the SentencePiece model, or None.
  """
  path: str
  kind: str
  encoder_checkpoint: str
  pretrainer_checkpoint: Optional[str]
  model_config: Optional[str]
  sp_model: Optional[str]


def latest_checkpoint(directory) -> Optional[str]:
  """Newest checkpoint prefix in `directory` (via its `checkpoint` file)."""
  directory = fileio.as_str(directory)
  if not fileio.isdir(directory):
    return None
  return tf.train.latest_checkpoint(directory)


def encoder_checkpoint_path(directory) -> str:
  """The newest encoder-only checkpoint prefix of a checkpoint directory."""
  path = latest_checkpoint(fileio.join(directory, ENCODER_SUBDIR))
  if path is None:
    raise CheckpointError(
        f"{directory}: no encoder checkpoint under {ENCODER_SUBDIR}/ (expected "
        f"{ENCODER_SUBDIR}/checkpoint and {ENCODER_SUBDIR}/ckpt-N.index).")
  return path


def _existing(*paths) -> Optional[str]:
  for path in paths:
    if fileio.isfile(path):
      return path
  return None


def resolve(source) -> CheckpointSource:
  """Finds which files of `source` hold the encoder, the output side, the config.

  Raises:
    CheckpointError: naming the path when it holds no checkpoint.
  """
  if isinstance(source, CheckpointSource):
    return source
  path = fileio.as_str(source).rstrip("/") or "/"
  if fileio.exists(path + ".index"):
    # DIR/encoder/ckpt-N or DIR/ckpt-N: the config lives in DIR. Checked
    # first: some filesystems (ram://) call any prefix a directory.
    parent = fileio.dirname(path)
    folders = [parent, fileio.dirname(parent)]
    return CheckpointSource(
        path=path, kind="prefix", encoder_checkpoint=path,
        pretrainer_checkpoint=(
            path if fileio.basename(parent) != ENCODER_SUBDIR else None),
        model_config=_existing(*[fileio.join(f, MODEL_CONFIG_FILE)
                                 for f in folders]),
        sp_model=_existing(*[fileio.join(f, SENTENCEPIECE_FILE)
                             for f in folders]))
  if fileio.isdir(path) and fileio.exists(fileio.join(path, SAVED_MODEL_FILE)):
    return CheckpointSource(
        path=path, kind="saved_model",
        encoder_checkpoint=fileio.join(path, "variables", "variables"),
        pretrainer_checkpoint=None,
        model_config=_existing(fileio.join(path, MODEL_CONFIG_FILE),
                               fileio.join(path, "assets", MODEL_CONFIG_FILE)),
        sp_model=_existing(fileio.join(path, "assets", SENTENCEPIECE_FILE)))
  if fileio.isdir(path):
    pretrainer = (latest_checkpoint(fileio.join(path, PRETRAINER_SUBDIR))
                  or latest_checkpoint(path))
    encoder = latest_checkpoint(fileio.join(path, ENCODER_SUBDIR)) or pretrainer
    if encoder is None:
      raise CheckpointError(
          f"{path} is neither a rembert_tf checkpoint directory (no "
          f"{ENCODER_SUBDIR}/ckpt-N, {PRETRAINER_SUBDIR}/ckpt-N or pre-training "
          f"ckpt-N) nor an exported SavedModel (no {SAVED_MODEL_FILE}): no "
          "checkpoint found. Point it at a pre-training model_dir, a converted "
          "checkpoint directory or an exported SavedModel.")
    return CheckpointSource(
        path=path, kind="directory", encoder_checkpoint=encoder,
        pretrainer_checkpoint=pretrainer,
        model_config=_existing(fileio.join(path, MODEL_CONFIG_FILE)),
        sp_model=_existing(fileio.join(path, SENTENCEPIECE_FILE)))
  raise CheckpointError(
      f"checkpoint {path} does not exist (neither a directory nor a "
      "checkpoint prefix with a .index file).")


def has_output_side(source) -> bool:
  """True when the source holds a whole pretrainer (encoder + output side)."""
  resolved = resolve(source)
  return bool(resolved.pretrainer_checkpoint) and _object_path(
      resolved.pretrainer_checkpoint, _PRETRAINER_CHILDREN.issubset) is not None


def find_sentencepiece(source) -> Optional[str]:
  """The SentencePiece model that came with a checkpoint source, or None."""
  return resolve(source).sp_model


# === the model config ===
def read_model_config(path) -> rembert_config.RemBertConfig:
  """A model_config.yaml on any filesystem."""
  path = fileio.as_str(path)
  values = fileio.read_yaml(path) or {}
  if isinstance(values, dict) and set(values) == {"model"}:
    values = values["model"]
  return rembert_config.model_config_from_dict(values, source=path)


def write_model_config(cfg: rembert_config.RemBertConfig, path) -> None:
  fileio.write_yaml(fileio.as_str(path), cfg.as_dict())


def load_model_config_from_dir(directory) -> rembert_config.RemBertConfig:
  """The model_config.yaml of a checkpoint directory (or SavedModel)."""
  path = fileio.join(directory, MODEL_CONFIG_FILE)
  if not fileio.exists(path):
    raise CheckpointError(
        f"{directory}: no {MODEL_CONFIG_FILE}. A rembert_tf checkpoint "
        "directory holds model_config.yaml and encoder/ckpt-*; make one with "
        "`python -m rembert_tf.train` or `tools/convert_checkpoint.py --to "
        "rembert_tf`, or pass the model config explicitly.")
  return read_model_config(path)


def _as_config(config: ModelConfigLike) -> rembert_config.RemBertConfig:
  if isinstance(config, rembert_config.RemBertConfig):
    return config
  name = fileio.as_str(config)
  if fileio.is_remote(name):
    return read_model_config(name)
  return rembert_config.load_model_config(name)


def model_config_of(source, config: ModelConfigLike = None
                    ) -> rembert_config.RemBertConfig:
  """The model config of a source; `config` (preset / YAML / object) if given.

  When the source has its own config and `config` is given too, they must
  agree: the error lists every differing field.
  """
  resolved = resolve(source)
  stored = (read_model_config(resolved.model_config)
            if resolved.model_config else None)
  if config is not None:
    given = _as_config(config)
    if stored is not None:
      _check_same_config(stored, given, resolved.model_config, config)
    return given
  if stored is not None:
    return stored
  if resolved.kind == "saved_model":
    from_keras = _config_from_keras_metadata(resolved.path)
    if from_keras is not None:
      return from_keras
  raise CheckpointError(
      f"{resolved.path}: no {MODEL_CONFIG_FILE} beside the checkpoint; pass "
      "the model config (--model_config / --config: a configs/models/ name or "
      "a YAML file).")


def _check_same_config(stored, given, stored_path, config):
  diff = [f"{k}: {stored_path} has {v!r}, the given config has "
          f"{given.as_dict()[k]!r}"
          for k, v in stored.as_dict().items() if given.as_dict()[k] != v]
  if diff:
    name = config if not isinstance(config, rembert_config.RemBertConfig) else (
        "the given config")
    raise CheckpointError(
        f"{stored_path} and {name} disagree: " + "; ".join(diff) +
        ". Drop the config argument to use the checkpoint's own config.")


# RemBertEncoder.get_config() field -> RemBertConfig field.
_ENCODER_TO_MODEL_CONFIG = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_attention_heads": "num_attention_heads",
    "inner_dim": "intermediate_size",
    "input_embedding_size": "input_embedding_size", "hidden_act": "hidden_act",
    "output_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_sequence_length": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size", "layer_norm_eps": "layer_norm_eps",
    "initializer_range": "initializer_range",
}


def _config_from_keras_metadata(saved_model_dir: str):
  """The encoder config in a Keras SavedModel's keras_metadata.pb, if any.

  For SavedModels exported without model_config.yaml. Only encoder fields are
  recoverable; the output side (never in an encoder export) is a decoupled
  placeholder.
  """
  metadata_file = fileio.join(saved_model_dir, "keras_metadata.pb")
  if not fileio.exists(metadata_file):
    return None
  from tf_keras.protobuf import saved_metadata_pb2  # pylint: disable=g-import-not-at-top
  metadata = saved_metadata_pb2.SavedMetadata()
  metadata.ParseFromString(fileio.read_bytes(metadata_file))
  for node in metadata.nodes:
    try:
      layer = json.loads(node.metadata)
    except ValueError:
      continue
    if str(layer.get("class_name", "")).endswith("RemBertEncoder"):
      config = layer.get("config", {})
      values = {dst: config[src] for src, dst in
                _ENCODER_TO_MODEL_CONFIG.items() if src in config}
      values.update(coupled=False, num_output_layers=0,
                    output_embedding_size=values.get("hidden_size"))
      logging.info("%s: model config read from keras_metadata.pb",
                   saved_model_dir)
      return rembert_config.model_config_from_dict(
          values, source=f"{metadata_file} (RemBertEncoder config)")
  return None


# === reading weights: the one object-graph walker ===
def _object_graph(prefix: str):
  """(checkpoint reader, TrackableObjectGraph) of an object-based checkpoint."""
  from tensorflow.core.protobuf import trackable_object_graph_pb2  # pylint: disable=g-import-not-at-top
  try:
    # NewCheckpointReader, not load_checkpoint: the latter takes a prefix for
    # a directory on filesystems (ram://) that call any prefix one.
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    graph_bytes = reader.get_tensor(_OBJECT_GRAPH_KEY)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(
        f"{prefix}: not a readable TF2 object-based checkpoint "
        f"({' '.join(str(e).split())[:200]}).") from None
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(graph_bytes)
  return reader, graph


def _find_node(graph, is_wanted: Callable[[set], bool]
               ) -> Optional[Tuple[int, Tuple[str, ...]]]:
  """(node id, child names from the root) of the shallowest wanted node."""
  queue = collections.deque([(0, ())])
  seen = {0}
  while queue:
    node_id, path = queue.popleft()
    children = graph.nodes[node_id].children
    if is_wanted({c.local_name for c in children}):
      return node_id, path
    for child in children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append((child.node_id, path + (child.local_name,)))
  return None


def _object_path(prefix: str, is_wanted: Callable[[set], bool]
                 ) -> Optional[Tuple[str, ...]]:
  found = _find_node(_object_graph(prefix)[1], is_wanted)
  return None if found is None else found[1]


def _checkpoint_keys(graph, node_id: int, model) -> dict:
  """id(variable) -> (variable, checkpoint key), walking graph and model together."""
  keys, stack, seen = {}, [(node_id, model)], set()
  while stack:
    node_id, obj = stack.pop()
    if node_id in seen:
      continue
    seen.add(node_id)
    node = graph.nodes[node_id]
    if isinstance(obj, tf.Variable):
      for attribute in node.attributes:
        if attribute.name == "VARIABLE_VALUE":
          keys[id(obj)] = (obj, attribute.checkpoint_key)
      continue
    children = obj._trackable_children()  # pylint: disable=protected-access
    for child in node.children:
      if child.local_name in children:
        stack.append((child.node_id, children[child.local_name]))
  return keys


def _read_subtree(model, prefix: str, is_wanted: Callable[[set], bool],
                  what: str) -> None:
  """Reads the `what` node of checkpoint `prefix` into `model`, in batches.

  The variables are read with RestoreV2 straight into tensors, a few per
  call (`checkpoint_reading.read_tensors`), and assigned in place, so memory
  stays at the model plus one batch (`tf.train.Checkpoint.read` keeps a
  second copy of the model resident).
  Everything outside the node (optimizer slots, other models) is never read.
  """
  reader, graph = _object_graph(prefix)
  found = _find_node(graph, is_wanted)
  if found is None:
    raise CheckpointError(f"{prefix}: no {what} in the checkpoint's object graph.")
  node_id, path = found
  keys = _checkpoint_keys(graph, node_id, model)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  missing = [v.name for v in model.variables if id(v) not in keys]
  misshapen = [f"{v.name}: checkpoint {shapes.get(k)}, model {v.shape.as_list()}"
               for v, k in keys.values()
               if k in shapes and list(shapes[k]) != v.shape.as_list()]
  missing += [v.name for v, k in keys.values() if k not in shapes]
  where = "/".join(path) or "<root>"
  problems = ([f"{len(missing)} variable(s) missing: {', '.join(missing[:8])}"]
              if missing else [])
  problems += [f"wrong shape: {m}" for m in misshapen[:8]]
  if problems:
    raise CheckpointError(
        f"{prefix}: the {what} at {where} does not match the model config ("
        + "; ".join(problems) + "). Use the model config the checkpoint was "
        "written with.")
  variable_of = {key: variable for variable, key in keys.values()}
  for key, value in checkpoint_reading.read_tensors(
      prefix, sorted(variable_of), dtypes, shapes):
    variable_of[key].assign(tf.cast(value, variable_of[key].dtype))
    del value  # nothing holds it while the next batch is read
  logging.info("Read the %s from %s (at %s)", what, prefix, where)


def restore_encoder(encoder: rembert_encoder.RemBertEncoder, source) -> str:
  """Reads the encoder's weights from any checkpoint source; returns the prefix.

  Output-side variables and optimizer slots in the source are never read.
  """
  resolved = resolve(source)
  prefix = resolved.encoder_checkpoint
  _read_subtree(encoder, prefix, _ENCODER_CHILDREN.issubset,
                "encoder (a RemBertEncoder node: children "
                f"{', '.join(sorted(_ENCODER_CHILDREN))})")
  return prefix


def restore_pretrainer(pretrainer: rembert_pretrainer.RemBertPretrainer,
                       source) -> str:
  """Reads encoder + output side (MLM head, output layers); returns the prefix.

  The optimizer and the step in the source are never read.

  Raises:
    CheckpointError: when the source has no output side (an encoder-only
      checkpoint or SavedModel), naming what to convert instead.
  """
  resolved = resolve(source)
  prefix = resolved.pretrainer_checkpoint
  path = (_object_path(prefix, _PRETRAINER_CHILDREN.issubset)
          if prefix else None)
  if path is None:
    raise CheckpointError(
        f"{resolved.path}: no output side (no {PRETRAINER_SUBDIR}/ckpt-N and "
        "no pre-training ckpt-N holding the MLM head); only the encoder can be "
        "read from it. Convert the released checkpoint with "
        "`--with_output_side`, or start from a pre-training model_dir.")
  _read_subtree(pretrainer, prefix, _PRETRAINER_CHILDREN.issubset,
                "pretrainer (encoder + output side)")
  return prefix


@contextlib.contextmanager
def zero_initialized_variables() -> Iterator[None]:
  """Variables created in this block start as zeros instead of random values.

  For a model built only to be overwritten by a checkpoint: TensorFlow's
  random initializers keep about twice the variable's size of scratch memory
  resident (at the released size, a 2.3 GB encoder cost 6 GB to build), zeros
  cost the variable alone. Every variable must then be restored.
  """
  def zeros_creator(next_creator, **kwargs):
    shape = kwargs.get("shape")
    dtype = kwargs.get("dtype")
    if (shape is not None and tf.TensorShape(shape).is_fully_defined()
        and dtype is not None and callable(kwargs.get("initial_value"))):
      shape, dtype = tf.TensorShape(shape), tf.as_dtype(dtype)
      kwargs["initial_value"] = lambda: tf.zeros(shape, dtype.base_dtype)
    return next_creator(**kwargs)

  with tf.variable_creator_scope(zeros_creator):
    yield


def load_encoder(source, config: ModelConfigLike = None
                 ) -> Tuple[rembert_config.RemBertConfig,
                            rembert_encoder.RemBertEncoder]:
  """Builds the encoder of a checkpoint source and restores its weights."""
  return _build_and_restore(source, config, rembert_encoder.build_encoder,
                            restore_encoder)


def load_pretrainer(source, config: ModelConfigLike = None
                    ) -> Tuple[rembert_config.RemBertConfig,
                               rembert_pretrainer.RemBertPretrainer]:
  """Builds the pretrainer of a checkpoint source, encoder + output side restored."""
  return _build_and_restore(source, config, rembert_pretrainer.build_pretrainer,
                            restore_pretrainer)


def _build_and_restore(source, config, build, restore):
  resolved = resolve(source)
  cfg = model_config_of(resolved, config)
  with zero_initialized_variables():  # every variable is restored below
    model = build(cfg)
  restore(model, resolved)
  return cfg, model


# === writing ===
def write_encoder_checkpoint(encoder, directory, step: int = 0,
                             max_to_keep: int = 3) -> str:
  """Saves `encoder` as DIR/encoder/ckpt-<step> with a CheckpointManager.

  TF writes the checkpoint's files under temporary names and renames them
  when complete, and updates the `checkpoint` index file last, so a kill
  midway never leaves a half-written checkpoint as the newest one.
  """
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(encoder=encoder),
      directory=fileio.join(directory, ENCODER_SUBDIR),
      max_to_keep=max_to_keep)
  return manager.save(checkpoint_number=step)


def write_pretrainer_checkpoint(pretrainer, directory, step: int = 0,
                                max_to_keep: int = 1) -> str:
  """Saves encoder + output side as DIR/pretrainer/ckpt-<step> (key `model`)."""
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=pretrainer),
      directory=fileio.join(directory, PRETRAINER_SUBDIR),
      max_to_keep=max_to_keep)
  return manager.save(checkpoint_number=step)


def check_sentencepiece(sp_model) -> tokenizer.SpecialTokens:
  """Refuses a file that is not a SentencePiece model with the special pieces."""
  return tokenizer.SpecialTokens.from_model(sp_model)


def copy_sentencepiece(sp_model, directory) -> str:
  """Copies a SentencePiece model in as DIR/sentencepiece.model (+ its .json)."""
  target = fileio.join(directory, SENTENCEPIECE_FILE)
  fileio.copy(sp_model, target, overwrite=True)
  tokenizer.write_tokenizer_metadata(target)
  return target


def write_checkpoint_dir(directory, cfg, encoder, pretrainer=None,
                         sp_model: Optional[str] = None, step: int = 0) -> None:
  """Writes model_config.yaml, encoder/ckpt-N, [pretrainer/ckpt-N], [sentencepiece.model].

  `directory` should be the temporary directory of `fileio.atomic_directory`.
  """
  fileio.makedirs(directory)
  write_model_config(cfg, fileio.join(directory, MODEL_CONFIG_FILE))
  write_encoder_checkpoint(encoder, directory, step=step)
  if pretrainer is not None:
    write_pretrainer_checkpoint(pretrainer, directory, step=step)
  if sp_model:
    copy_sentencepiece(sp_model, directory)


class EncoderExportWriter:
  """Writes `DIR/encoder/ckpt-N` beside a training run's full checkpoints.

  One `tf.train.Checkpoint(encoder=encoder)` and one CheckpointManager serve
  every save: a new Checkpoint per save would create a new `save_counter`
  variable each time, and under MultiWorkerMirroredStrategy creating a
  variable is a collective that every worker must join in the same order.
  Every worker therefore builds this writer and calls `save` at the same
  steps; non-chief workers pass a temporary directory they delete afterwards.

  `every_n_saves` limits the export to every Nth call of `save` plus the
  calls marked `final` (the end of training, a preemption save).

  ```python
  writer = EncoderExportWriter(pretrainer.encoder, "/tmp/run", max_to_keep=3,
                               every_n_saves=2)
  writer.save(step=1000)              # skipped (1st call)
  writer.save(step=2000)              # /tmp/run/encoder/ckpt-2000
  writer.save(step=2500, final=True)  # /tmp/run/encoder/ckpt-2500
  ```
  """

  def __init__(self, encoder, directory, max_to_keep: int = 3,
               every_n_saves: int = 1):
    if every_n_saves < 1:
      raise CheckpointError(
          f"encoder export interval {every_n_saves}: must be >= 1 (1 exports "
          "at every checkpoint).")
    self.directory = f"{str(directory).rstrip('/')}/{ENCODER_SUBDIR}"
    self.checkpoint = tf.train.Checkpoint(encoder=encoder)
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, directory=self.directory, max_to_keep=max_to_keep)
    self.every_n_saves = every_n_saves
    self._calls = 0

  def save(self, step: int, final: bool = False) -> Optional[str]:
    """Exports at `step` when due; returns the prefix written, else None."""
    self._calls += 1
    if not final and self._calls % self.every_n_saves:
      return None
    latest = self.manager.latest_checkpoint
    if latest is not None and latest.endswith(f"ckpt-{step}"):
      return latest
    return self.manager.save(checkpoint_number=step)

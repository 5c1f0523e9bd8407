"""Reading a checkpoint source's weights into a model.

`load_encoder(source)` builds the encoder and restores it (what fine-tuning,
export and conversion need); `restore_pretrainer(pretrainer, source)` restores
the encoder *and* the output side (MLM transform, output embedding and bias,
output-side layers), which only a pretrainer checkpoint has
(`pretrainer/ckpt-N` or a model_dir's `ckpt-N`); the optimizer and step are
never read. Reading is by object structure: the encoder (or pretrainer) node
is found in the checkpoint's object graph, wherever the writer put it, and
only that subtree is read, a bounded batch of variables at a time
(`checkpoint_reading`). What a source is and where its files are:
`rembert_tf.checkpoints.checkpoint_layout`.

Builds on `tf.train.Checkpoint` (object-based reading) and the checkpoint reader's
`TrackableObjectGraph`; a SavedModel without model_config.yaml gives its
encoder config through tf_keras' `keras_metadata.pb`.

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_pretrainer
cfg, encoder = checkpoint_restore.load_encoder("converted/rembert")   # or a SavedModel
pretrainer = rembert_pretrainer.build_pretrainer(cfg)
checkpoint_restore.restore_pretrainer(pretrainer, "converted/rembert")  # + output side
```
"""
import collections
import contextlib
import json
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf
from absl import logging

from rembert_tf.common import fileio
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer
from rembert_tf.checkpoints.checkpoint_layout import CheckpointError

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# A node is the encoder / the pretrainer when it has these children.
_ENCODER_CHILDREN = frozenset({"_embedding_layer", "_transformer_layers",
                               "_pooler_layer"})
_PRETRAINER_CHILDREN = frozenset({"encoder_network", "masked_lm"})


# === the model config of a source ===
def _as_config(config: checkpoint_layout.ModelConfigLike
               ) -> rembert_config.RemBertConfig:
  if isinstance(config, rembert_config.RemBertConfig):
    return config
  name = fileio.as_str(config)
  if fileio.is_remote(name):
    return checkpoint_layout.read_model_config(name)
  return rembert_config.load_model_config(name)


def model_config_of(source, config: checkpoint_layout.ModelConfigLike = None
                    ) -> rembert_config.RemBertConfig:
  """The model config of a source; `config` (preset / YAML / object) if given.

  When the source has its own config and `config` is given too, they must
  agree: the error lists every differing field.
  """
  resolved = checkpoint_layout.resolve(source)
  stored = (checkpoint_layout.read_model_config(resolved.model_config)
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
      f"{resolved.path}: no {checkpoint_layout.MODEL_CONFIG_FILE} beside the "
      "checkpoint; pass the model config (--model_config / --config: a "
      "configs/models/ name or a YAML file).")


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
  except (tf.errors.OpError, ValueError, IndexError) as e:
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
  checkpoint_layout.announce_fallback(prefix)
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
  resolved = checkpoint_layout.resolve(source)
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
  resolved = checkpoint_layout.resolve(source)
  prefix = resolved.pretrainer_checkpoint
  path = (_object_path(prefix, _PRETRAINER_CHILDREN.issubset)
          if prefix else None)
  if path is None:
    raise CheckpointError(
        f"{resolved.path}: no output side (no "
        f"{checkpoint_layout.PRETRAINER_SUBDIR}/ckpt-N and no pre-training "
        "ckpt-N holding the MLM head); only the encoder can be read from it. "
        "Convert the released checkpoint with `--with_output_side`, or start "
        "from a pre-training model_dir.")
  _read_subtree(pretrainer, prefix, _PRETRAINER_CHILDREN.issubset,
                "pretrainer (encoder + output side)")
  return prefix


@contextlib.contextmanager
def zero_initialized_variables() -> Iterator[None]:
  """Variables created in this block start as zeros instead of random values.

  For a model built only to be overwritten by a checkpoint: TensorFlow's
  random initializers keep about twice the variable's size of scratch memory
  resident, zeros cost the variable alone. Every variable must then be restored.
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


def load_encoder(source, config: checkpoint_layout.ModelConfigLike = None
                 ) -> Tuple[rembert_config.RemBertConfig,
                            rembert_encoder.RemBertEncoder]:
  """Builds the encoder of a checkpoint source and restores its weights."""
  return _build_and_restore(source, config, rembert_encoder.build_encoder,
                            restore_encoder)


def load_pretrainer(source,
                    config: checkpoint_layout.ModelConfigLike = None
                    ) -> Tuple[rembert_config.RemBertConfig,
                               rembert_pretrainer.RemBertPretrainer]:
  """Builds the pretrainer of a checkpoint source, encoder + output side restored."""
  return _build_and_restore(source, config, rembert_pretrainer.build_pretrainer,
                            restore_pretrainer)


def _build_and_restore(source, config, build, restore):
  resolved = checkpoint_layout.resolve(source)
  cfg = model_config_of(resolved, config)
  with zero_initialized_variables():  # every variable is restored below
    model = build(cfg)
  restore(model, resolved)
  return cfg, model


def has_output_side(source) -> bool:
  """True when the source holds a whole pretrainer (encoder + output side)."""
  resolved = checkpoint_layout.resolve(source)
  return bool(resolved.pretrainer_checkpoint) and _object_path(
      resolved.pretrainer_checkpoint, _PRETRAINER_CHILDREN.issubset) is not None

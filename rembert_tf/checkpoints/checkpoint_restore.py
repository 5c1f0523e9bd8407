"""Reading a checkpoint source's weights into a model.

`load_encoder(source)` builds the encoder and restores it; `restore_pretrainer`
also restores the output side (MLM transform, output embedding and bias,
output-side layers), which only a pretrainer checkpoint has; the optimizer
and step are never read. The encoder (or pretrainer) node is found by its
children in the checkpoint's `TrackableObjectGraph`, wherever the writer put
it, and only that subtree is read, in bounded batches (`checkpoint_reading`):
memory stays at the model plus one batch (`tf.train.Checkpoint.read` would
hold a second copy). What a source is: `checkpoint_layout`.

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
from typing import Iterator, Optional, Tuple

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.checkpoints.checkpoint_layout import CheckpointError
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

# A node is the encoder / the pretrainer when it has these children.
_ENCODER_CHILDREN = frozenset({"_embedding_layer", "_transformer_layers",
                               "_pooler_layer"})
_PRETRAINER_CHILDREN = frozenset({"encoder_network", "masked_lm"})


def model_config_of(source, config: checkpoint_layout.ModelConfigLike = None
                    ) -> rembert_config.RemBertConfig:
  """The model config of a source; `config` (preset / YAML / object) if given.

  When the source has its own config and `config` is given too, they must
  agree: the error lists every differing field.
  """
  resolved = checkpoint_layout.resolve(source)
  stored = (checkpoint_layout.read_model_config(resolved.model_config)
            if resolved.model_config else None)
  if config is None and stored is None:
    raise CheckpointError(
        f"{resolved.path}: no {checkpoint_layout.MODEL_CONFIG_FILE} beside the "
        "checkpoint; pass the model config (--model_config / --config: a "
        "configs/models/ name or a YAML file).")
  if config is None:
    return stored
  given = (config if isinstance(config, rembert_config.RemBertConfig)
           else rembert_config.load_model_config(config))
  diff = [f"{k}: {resolved.model_config} has {v!r}, the given config has "
          f"{given.as_dict()[k]!r}"
          for k, v in (stored.as_dict().items() if stored else ())
          if given.as_dict()[k] != v]
  if diff:
    name = ("the given config" if config is given else config)
    raise CheckpointError(
        f"{resolved.model_config} and {name} disagree: " + "; ".join(diff) +
        ". Drop the config argument to use the checkpoint's own config.")
  return given


def _object_graph(prefix: str):
  """(CheckpointReader, TrackableObjectGraph) of an object-based checkpoint."""
  try:
    reader = checkpoint_reading.CheckpointReader(prefix)
    graph_bytes = reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH")
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise CheckpointError(
        f"{prefix}: not a readable TF2 object-based checkpoint "
        f"({' '.join(str(e).split())[:200]}).") from None
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(graph_bytes)
  return reader, graph


def _find_node(graph, children_wanted: frozenset
               ) -> Optional[Tuple[int, Tuple[str, ...]]]:
  """(node id, child names from the root) of the shallowest node with
  `children_wanted` among its children (breadth first)."""
  queue, seen = collections.deque([(0, ())]), {0}
  while queue:
    node_id, path = queue.popleft()
    children = graph.nodes[node_id].children
    if children_wanted <= {c.local_name for c in children}:
      return node_id, path
    for child in children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append((child.node_id, path + (child.local_name,)))
  return None


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
      keys.update({id(obj): (obj, a.checkpoint_key) for a in node.attributes
                   if a.name == "VARIABLE_VALUE"})
      continue
    children = obj._trackable_children()  # pylint: disable=protected-access
    stack.extend((child.node_id, children[child.local_name])
                 for child in node.children if child.local_name in children)
  return keys


def _read_subtree(model, prefix: str, children_wanted: frozenset,
                  what: str) -> None:
  """Reads the `what` node of checkpoint `prefix` into `model`, in batches
  (`checkpoint_reading`) assigned in place; everything outside
  the node (optimizer slots, other models) is never read."""
  reader, graph = _object_graph(prefix)
  found = _find_node(graph, children_wanted)
  if found is None:
    raise CheckpointError(f"{prefix}: no {what} in the checkpoint's object graph.")
  checkpoint_layout.announce_fallback(prefix)
  node_id, path = found
  keys = _checkpoint_keys(graph, node_id, model)
  shapes = reader.shapes
  missing = [v.name for v in model.variables if id(v) not in keys]
  missing += [v.name for v, k in keys.values() if k not in shapes]
  problems = ([f"{len(missing)} variable(s) missing: {', '.join(missing[:8])}"]
              if missing else [])
  problems += [f"wrong shape: {v.name}: checkpoint {shapes[k]}, model "
               f"{v.shape.as_list()}" for v, k in keys.values()
               if k in shapes and list(shapes[k]) != v.shape.as_list()][:8]
  where = "/".join(path) or "<root>"
  if problems:
    raise CheckpointError(
        f"{prefix}: the {what} at {where} does not match the model config ("
        + "; ".join(problems) + "). Use the model config the checkpoint was "
        "written with.")
  variable_of = {key: variable for variable, key in keys.values()}
  for key, value in reader.read(sorted(variable_of)):
    variable_of[key].assign(tf.cast(value, variable_of[key].dtype))
    del value  # nothing holds it while the next batch is read
  logging.info("Read the %s from %s (at %s)", what, prefix, where)


def restore_encoder(encoder: rembert_encoder.RemBertEncoder, source) -> str:
  """Reads the encoder's weights from any checkpoint source; returns the prefix.

  Output-side variables and optimizer slots in the source are never read.
  """
  prefix = checkpoint_layout.resolve(source).encoder_checkpoint
  _read_subtree(encoder, prefix, _ENCODER_CHILDREN,
                "encoder (a RemBertEncoder node: children "
                f"{', '.join(sorted(_ENCODER_CHILDREN))})")
  return prefix


def has_output_side(source) -> bool:
  """True when the source holds a whole pretrainer (encoder + output side)."""
  prefix = checkpoint_layout.resolve(source).pretrainer_checkpoint
  return bool(prefix) and _find_node(_object_graph(prefix)[1],
                                     _PRETRAINER_CHILDREN) is not None


def restore_pretrainer(pretrainer: rembert_pretrainer.RemBertPretrainer,
                       source) -> str:
  """Reads encoder + output side (MLM head, output layers); returns the prefix.

  The optimizer and the step in the source are never read.

  Raises:
    CheckpointError: when the source has no output side (an encoder-only
      checkpoint or SavedModel), naming what to convert instead.
  """
  resolved = checkpoint_layout.resolve(source)
  if not has_output_side(resolved):
    raise CheckpointError(
        f"{resolved.path}: no output side (no "
        f"{checkpoint_layout.PRETRAINER_SUBDIR}/ckpt-N and no pre-training "
        "ckpt-N holding the MLM head); only the encoder can be read from it. "
        "Convert the released checkpoint with `--with_output_side`, or start "
        "from a pre-training model_dir.")
  _read_subtree(pretrainer, resolved.pretrainer_checkpoint,
                _PRETRAINER_CHILDREN, "pretrainer (encoder + output side)")
  return resolved.pretrainer_checkpoint


@contextlib.contextmanager
def zero_initialized_variables() -> Iterator[None]:
  """Variables created in this block start as zeros instead of random values.

  For a model built only to be overwritten by a checkpoint: TensorFlow's
  random initializers keep about twice the variable's size of scratch memory
  resident, zeros cost the variable alone. Every variable must then be restored.
  """
  def zeros_creator(next_creator, **kwargs):
    shape, dtype = kwargs.get("shape"), kwargs.get("dtype")
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

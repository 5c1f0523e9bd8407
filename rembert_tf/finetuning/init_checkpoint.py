"""Builds the encoder a fine-tuning run starts from; never loads an output embedding.

Accepted `init_checkpoint`s:
* a rembert_tf checkpoint directory (`model_config.yaml` + `encoder/ckpt-N`):
  a pre-training `--model_dir` or a converted checkpoint
  (`rembert_tf.modeling.checkpoints.load_encoder_from_dir`); a model_dir with
  only Model Garden's full `ckpt-N` (pretrainer + optimizer) works too: the
  encoder subtree is read from it by structure;
* an encoder-only checkpoint prefix (`.../encoder/ckpt-N`) with a model config;
* an exported SavedModel directory (`saved_model.pb`). Its variables file is an
  object-based checkpoint of the saved root; the RemBertEncoder node is found in
  its object graph by structure (a node with `_embedding_layer`,
  `_transformer_layers` and `_pooler_layer` children) and only that subtree is
  read into a freshly built encoder. Output-side variables (the MLM head and the
  output embedding of a pretrainer saved alongside) are left unread.
  The model config comes from `model_config`, else `model_config.yaml` in the
  SavedModel directory or its `assets/`, else the RemBertEncoder's Keras
  config stored in `keras_metadata.pb` (tools/export_savedmodel.py output).

Builds on `rembert_tf.modeling.checkpoints` (the checkpoint layout) and
`tf.train.Checkpoint` name-based object matching.

Example:
```python
from rembert_tf.finetuning import init_checkpoint
cfg, encoder, source = init_checkpoint.load_encoder("pretrain_dir")
cfg, encoder, source = init_checkpoint.load_encoder("export/saved_model")
```
"""
import collections
import pathlib
from typing import Optional, Tuple

from absl import logging
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder

_ENCODER_CHILDREN = frozenset({"_embedding_layer", "_transformer_layers",
                               "_pooler_layer"})
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class InitCheckpointError(checkpoints.CheckpointError):
  """The init checkpoint cannot be read into the encoder."""


def _config_for_saved_model(path: pathlib.Path, model_config):
  if model_config is not None:
    if isinstance(model_config, rembert_config.RemBertConfig):
      return model_config
    return rembert_config.load_model_config(model_config)
  for candidate in (path / checkpoints.MODEL_CONFIG_FILE,
                    path / "assets" / checkpoints.MODEL_CONFIG_FILE):
    if candidate.is_file():
      return rembert_config.load_model_config(candidate)
  cfg = _config_from_keras_metadata(path)
  if cfg is not None:
    return cfg
  raise InitCheckpointError(
      f"{path}: no {checkpoints.MODEL_CONFIG_FILE} in the SavedModel directory "
      "or its assets/, and no RemBertEncoder config in keras_metadata.pb; pass "
      "--model_config (a configs/models/ name or YAML).")


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


def _config_from_keras_metadata(path: pathlib.Path):
  """The encoder's config from a Keras SavedModel's keras_metadata.pb, if any.

  Only encoder fields are recoverable; the output side (not in an encoder
  export, never used by fine-tuning) is set to a decoupled placeholder.
  """
  metadata_file = path / "keras_metadata.pb"
  if not metadata_file.is_file():
    return None
  import json  # pylint: disable=g-import-not-at-top
  from tf_keras.protobuf import saved_metadata_pb2  # pylint: disable=g-import-not-at-top
  metadata = saved_metadata_pb2.SavedMetadata()
  metadata.ParseFromString(metadata_file.read_bytes())
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
      logging.info("%s: model config read from keras_metadata.pb", path)
      return rembert_config.model_config_from_dict(
          values, source=f"{metadata_file} (RemBertEncoder config)")
  return None


def encoder_path_in_object_graph(variables_prefix: str) -> Tuple[str, ...]:
  """Child names from the saved root to the (first, shallowest) encoder node."""
  reader = tf.train.load_checkpoint(variables_prefix)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
  queue = collections.deque([(0, ())])
  seen = {0}
  while queue:
    node_id, path = queue.popleft()
    children = graph.nodes[node_id].children
    if _ENCODER_CHILDREN <= {c.local_name for c in children}:
      return path
    for child in children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append((child.node_id, path + (child.local_name,)))
  raise InitCheckpointError(
      f"{variables_prefix}: no RemBertEncoder (a node with children "
      f"{sorted(_ENCODER_CHILDREN)}) in the SavedModel's object graph.")


def restore_encoder_by_structure(encoder, checkpoint_prefix: str,
                                 description: Optional[str] = None
                                 ) -> Tuple[str, ...]:
  """Reads the encoder subtree of any object-based checkpoint into `encoder`.

  Works for a SavedModel's variables and for Model Garden's full training
  checkpoints (`model` = the pretrainer, beside `optimizer`): only the
  RemBertEncoder node's subtree is matched; everything else stays unread.
  """
  description = description or checkpoint_prefix
  path = encoder_path_in_object_graph(checkpoint_prefix)
  if path:
    holder = encoder
    for name in reversed(path[1:]):
      holder = tf.train.Checkpoint(**{name: holder})
    checkpoint = tf.train.Checkpoint(**{path[0]: holder})
  else:
    checkpoint = tf.train.Checkpoint(root=encoder)
  status = checkpoint.read(checkpoint_prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise InitCheckpointError(
        f"{description}: the encoder at {'/'.join(path) or '<root>'} does "
        f"not match the model config: {e}") from None
  status.expect_partial()  # output-side objects are deliberately not read
  return path


def restore_encoder_from_saved_model(encoder, saved_model_dir) -> Tuple[str, ...]:
  """Reads the encoder subtree of a SavedModel into `encoder` (by structure)."""
  variables_prefix = str(pathlib.Path(saved_model_dir) / "variables" /
                         "variables")
  return restore_encoder_by_structure(encoder, variables_prefix,
                                      str(saved_model_dir))


def load_encoder(init_checkpoint: Optional[str],
                 model_config=None) -> Tuple[rembert_config.RemBertConfig,
                                             rembert_encoder.RemBertEncoder, str]:
  """Returns (config, encoder, description of what was restored)."""
  if not init_checkpoint:
    if model_config is None:
      raise InitCheckpointError("Give --init_checkpoint, or --model_config to "
                                "fine-tune from random weights.")
    cfg = (model_config if isinstance(model_config, rembert_config.RemBertConfig)
           else rembert_config.load_model_config(model_config))
    logging.warning("No init checkpoint: fine-tuning from random weights.")
    return cfg, rembert_encoder.build_encoder(cfg), "random initialisation"
  path = pathlib.Path(init_checkpoint)
  if (path / "saved_model.pb").is_file():
    cfg = _config_for_saved_model(path, model_config)
    encoder = rembert_encoder.build_encoder(cfg)
    found = restore_encoder_from_saved_model(encoder, path)
    return cfg, encoder, f"SavedModel {path} (encoder at {'/'.join(found) or '<root>'})"
  if path.is_dir():
    if (path / checkpoints.MODEL_CONFIG_FILE).is_file():
      full_checkpoint = checkpoints.latest_checkpoint(path)
      if (checkpoints.latest_checkpoint(path / checkpoints.ENCODER_SUBDIR)
          is None and full_checkpoint is not None):
        # A pre-training model_dir with only Model Garden's full ckpt-N.
        cfg = checkpoints.load_model_config_from_dir(path)
        encoder = rembert_encoder.build_encoder(cfg)
        found = restore_encoder_by_structure(encoder, full_checkpoint)
        return cfg, encoder, f"{full_checkpoint} (encoder at {'/'.join(found)})"
      cfg, encoder = checkpoints.load_encoder_from_dir(path)
      return cfg, encoder, checkpoints.encoder_checkpoint_path(path)
    raise InitCheckpointError(
        f"{path} is neither a rembert_tf checkpoint directory "
        f"({checkpoints.MODEL_CONFIG_FILE} + {checkpoints.ENCODER_SUBDIR}/ckpt-N) "
        "nor a SavedModel (saved_model.pb).")
  if tf.io.gfile.exists(str(path) + ".index"):
    if model_config is None:
      parent = path.parent.parent
      if (parent / checkpoints.MODEL_CONFIG_FILE).is_file():
        model_config = parent / checkpoints.MODEL_CONFIG_FILE
      else:
        raise InitCheckpointError(f"{path}: pass --model_config for an encoder "
                                  "checkpoint prefix.")
    cfg = (model_config if isinstance(model_config, rembert_config.RemBertConfig)
           else rembert_config.load_model_config(model_config))
    encoder = rembert_encoder.build_encoder(cfg)
    checkpoints.restore_encoder(encoder, str(path))
    return cfg, encoder, str(path)
  raise InitCheckpointError(f"init checkpoint {path} does not exist.")

"""Checkpoint fixtures in the real formats, written by the tests.

- `write_tf1_checkpoint`: a TF1 name-based checkpoint as the release was
  written (a `tf.compat.v1` graph of variables + `Saver`), with `adam_m` /
  `adam_v` slots for every weight and `global_step`.
- `released_tf1_tensors`: the released layout: BERT encoder names and an
  output side (MLM transform, output bias, and a `[vocab, E_out]` output
  embedding whose name contains `output_embedding`, the way the release names
  it; it sits under `bert/` here, outside the encoder's documented names).
"""
import json

import numpy as np
import tensorflow as tf
import testlib

from rembert_tf.conversion import weight_layout

# Canonical output-side name -> the name the released-layout fixture uses.
RELEASED_OUTPUT_SIDE_NAMES = {
    "cls/predictions/transform/dense/kernel": "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias": "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma": "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta": "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias": "cls/predictions/output_bias",
    "cls/predictions/output_embedding": "bert/embeddings/output_embedding",
}


def small_config(**overrides):
  """The shared test model (`testlib.tiny_config`) with 24 positions."""
  return testlib.tiny_config(**{"max_position_embeddings": 24, **overrides})


def randomize(variables, seed):
  """Non-trivial values everywhere (biases, LayerNorm too) so mapping errors show."""
  rng = np.random.default_rng(seed)
  for v in variables:
    name = v.name
    if "gamma" in name:
      value = 1.0 + 0.2 * rng.standard_normal(v.shape)
    elif "bias" in name or "beta" in name:
      value = 0.1 * rng.standard_normal(v.shape)
    else:
      value = 0.25 * rng.standard_normal(v.shape)
    v.assign(value.astype(np.float32))


def canonical_tensors(cfg, seed, output_side=False):
  """Random canonical tensors (LayerNorm scales near 1) for a config."""
  rng = np.random.default_rng(seed)
  tensors = {}
  for name, shape in weight_layout.expected_canonical_shapes(
      cfg, output_side=output_side).items():
    scale, offset = (0.2, 1.0) if name.endswith("gamma") else (0.25, 0.0)
    tensors[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
  return tensors


def released_tf1_tensors(cfg, seed):
  """(canonical tensors, the same under the released layout's names)."""
  canonical = canonical_tensors(cfg, seed, output_side=True)
  released = {RELEASED_OUTPUT_SIDE_NAMES.get(n, n): v for n, v in canonical.items()}
  return canonical, released


def write_tf1_checkpoint(path, tensors, extra=None):
  """A TF1 name-based checkpoint as the released one is written (graph + Saver)."""
  graph = tf.Graph()
  with graph.as_default():
    for name, value in tensors.items():
      tf.compat.v1.get_variable(name, initializer=tf.constant(value))
      for slot in ("adam_m", "adam_v"):
        tf.compat.v1.get_variable(f"{name}/{slot}",
                                  initializer=tf.zeros_like(value) + 0.5)
    for name, value in (extra or {}).items():
      tf.compat.v1.get_variable(name, initializer=tf.constant(value))
    tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session(graph=graph) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, str(path))


def tf1_json_config(cfg):
  """The released config.json keys for a config."""
  values = {k: getattr(cfg, k) for k in (
      "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
      "input_embedding_size", "output_embedding_size", "intermediate_size",
      "hidden_act", "max_position_embeddings", "type_vocab_size",
      "layer_norm_eps", "initializer_range")}
  values.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  return values


def write_released_checkpoint(folder, cfg, seed=11):
  """model.ckpt + config.json in the released layout; -> (canonical tensors, prefix)."""
  canonical, released = released_tf1_tensors(cfg, seed)
  prefix = write_tf1_checkpoint(folder / "model.ckpt", released)
  (folder / "config.json").write_text(json.dumps(tf1_json_config(cfg)))
  return canonical, prefix

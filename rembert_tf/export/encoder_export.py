"""Exports the RemBERT encoder alone as a SavedModel with the TF-Hub BERT encoder API.

A Keras model around the encoder as Model Garden's `export_tfhub_lib.py`
builds one (its `export_model` builds Model Garden's own encoder classes), the
SentencePiece model its `sp_model_file` asset, `model_config.yaml` beside;
the interface is docs/export.md's.

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
from rembert_tf.export import encoder_export
encoder_export.export_encoder("runs/pretrain", "export/rembert_encoder")
```
"""
import contextlib
import gc
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras
from absl import logging

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import progress
from rembert_tf.data import tokenizer
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.checkpoints import checkpoint_snapshot
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# (batch, seq) of the inputs the export is checked on.
CHECK_SHAPES = ((2, 7), (3, 16))


class ExportError(errors.RemBertError, ValueError):
  """The exported SavedModel does not reproduce the in-memory encoder."""


def build_export_model(encoder: rembert_encoder.RemBertEncoder) -> tf_keras.Model:
  """A Keras model: dict of int32 [batch, seq] inputs -> the encoder's output dict."""
  inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
            for name in INPUT_NAMES}
  outputs = dict(encoder(inputs))
  # TF-Hub text embeddings expose the whole-input representation as "default".
  outputs["default"] = outputs["pooled_output"]
  return tf_keras.Model(inputs=inputs, outputs=outputs, name="rembert_encoder")


def serving_signature(model: tf_keras.Model):
  """`serving_default`: keyword int32 inputs -> a flat dict of tensors, the
  real tokens alone computed (`remove_padding`: zeros at padded positions)."""
  spec = tf.TensorSpec([None, None], tf.int32)
  encoder = next(layer for layer in model.layers
                 if isinstance(layer, rembert_encoder.RemBertEncoder))

  @tf.function(input_signature=[spec, spec, spec])
  def serve(input_word_ids, input_mask, input_type_ids):
    outputs = encoder(dict(input_word_ids=input_word_ids,
                           input_mask=input_mask,
                           input_type_ids=input_type_ids),
                      training=False, remove_padding=True)
    return dict(sequence_output=outputs["sequence_output"],
                pooled_output=outputs["pooled_output"],
                default=outputs["pooled_output"],
                encoder_outputs=tf.stack(outputs["encoder_outputs"], axis=0))

  return serve.get_concrete_function()


def random_encoder_inputs(cfg, batch_size: int = 3, seq_length: int = 11,
                          seed: int = 0):
  """Valid random int32 inputs (with some padding) for checks and tests."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, cfg.vocab_size, [batch_size, seq_length])
  lengths = rng.integers(1, seq_length + 1, [batch_size])
  lengths[0] = seq_length
  mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
  types = ((np.arange(seq_length)[None, :] >= lengths[:, None] // 2) * mask)
  return dict(input_word_ids=tf.constant(ids * mask, tf.int32),
              input_mask=tf.constant(mask, tf.int32),
              input_type_ids=tf.constant(types % cfg.type_vocab_size, tf.int32))


def max_abs_difference(expected, actual, input_mask=None) -> float:
  """Largest |difference| over the outputs (`input_mask`: real tokens only)."""
  weights = (1.0 if input_mask is None
             else np.asarray(input_mask)[..., None].astype(np.float32))
  sequences = zip([expected["sequence_output"], *expected["encoder_outputs"]],
                  [actual["sequence_output"], *actual["encoder_outputs"]])
  return float(max(
      [np.max(np.abs(np.asarray(e) - np.asarray(a)) * weights)
       for e, a in sequences] +
      [np.max(np.abs(np.asarray(expected["pooled_output"])
                     - np.asarray(actual["pooled_output"])))]))


def reference_outputs(encoder, cfg) -> List[Dict]:
  """(inputs, numpy outputs) of the in-memory encoder on the check inputs."""
  cases = []
  for batch_size, seq_length in CHECK_SHAPES:
    inputs = random_encoder_inputs(
        cfg, batch_size, min(seq_length, cfg.max_position_embeddings))
    outputs = encoder(inputs, training=False)
    cases.append(dict(inputs=inputs, outputs=tf.nest.map_structure(
        np.asarray, {k: outputs[k] for k in ("sequence_output",
                                             "pooled_output",
                                             "encoder_outputs")})))
  return cases


def verify_export(export_dir, cases: List[Dict], tolerance: float = 1e-5) -> float:
  """Loads the SavedModel and compares it with `reference_outputs`; raises ExportError."""
  loaded = tf.saved_model.load(fileio.as_str(export_dir))
  worst = 0.0
  for case in cases:
    inputs, expected = case["inputs"], case["outputs"]
    served = dict(loaded.signatures["serving_default"](**inputs))
    served["encoder_outputs"] = tf.unstack(served["encoder_outputs"], axis=0)
    worst = max(worst, max_abs_difference(expected, loaded(inputs, training=False)),
                max_abs_difference(expected, served, inputs["input_mask"]))
  if worst > tolerance:
    raise ExportError(f"{export_dir}: the SavedModel differs from the encoder "
                      f"by {worst:.3g} (> {tolerance}).")
  return worst


@contextlib.contextmanager
def float32_policy():
  """Builds the exported encoder in float32 even if a mixed policy is global."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("float32")
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


@outputs.writes_output("output_dir")
def export_encoder(checkpoint_dir, output_dir, *, config=None,
                   sp_model: Optional[str] = None, overwrite: bool = False,
                   verify: bool = True) -> str:
  """Exports the encoder of any checkpoint source as an encoder-only
  SavedModel, swapped in as `output_dir` when complete and (`verify`) checked
  to match the encoder to 1e-5; returns output_dir. `config` (a preset or
  YAML) is needed only without model_config.yaml; `sp_model` defaults to the
  source's sentencepiece.model when it has one."""
  output_dir = fileio.as_str(output_dir).rstrip("/")
  fileio.check_output_location(output_dir)
  outputs.refuse_existing([output_dir], overwrite)
  source = checkpoint_layout.resolve(checkpoint_dir)
  sp_model = sp_model or source.sp_model
  if sp_model:
    tokenizer.SpecialTokens.from_model(sp_model)  # refuses any other file
  # Three stages with no loop of their own: a stage bar with elapsed time.
  with progress.Progress("exporting the encoder", total=3 if verify else 2,
                         unit="stages") as stages:
    # A live model_dir's checkpoint is read from a copy held against the
    # trainer's rotation.
    with float32_policy(), checkpoint_snapshot.held(source, ["encoder"]) as held:
      cfg, encoder = checkpoint_restore.load_encoder(held, config)
    logging.info("Exporting the encoder of %s (%d parameters) to %s",
                 source.encoder_checkpoint, encoder.count_params(), output_dir)
    cases = reference_outputs(encoder, cfg) if verify else None
    stages.update(1)
    with outputs.atomic_directory(output_dir, overwrite=overwrite) as tmp:
      with float32_policy():
        model = build_export_model(encoder)
      if sp_model:
        model.sp_model_file = tf.saved_model.Asset(fileio.as_str(sp_model))
      model.save(tmp, include_optimizer=False, save_format="tf",
                 signatures={"serving_default": serving_signature(model)})
      rembert_config.save_model_config(
          cfg, fileio.join(tmp, checkpoint_layout.MODEL_CONFIG_FILE))
      stages.update(1)
      # Verify against the reloaded copy alone: one copy in memory.
      del encoder, model
      gc.collect()
      if verify:
        worst = verify_export(tmp, cases)
        logging.info("Verified: max |SavedModel - encoder| = %.3g", worst)
        stages.update(1)
  return output_dir

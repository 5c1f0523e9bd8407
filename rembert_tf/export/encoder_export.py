"""Exports the RemBERT encoder alone as a SavedModel with the TF-Hub BERT encoder API.

The SavedModel holds the encoder's variables and nothing else: no output
embedding, no MLM head, no extra output layers (its size is #FT). Its root
object is callable, and its `serving_default` signature takes, like every
TF-Hub BERT encoder, a dict of int32 `input_word_ids`, `input_mask`,
`input_type_ids` of shape [batch, seq] (both dynamic, seq up to
max_position_embeddings) and returns `sequence_output` [batch, seq, hidden],
`pooled_output` [batch, hidden], `default` (= pooled_output) and
`encoder_outputs` (a list with one [batch, seq, hidden] per Transformer block;
`serving_default` returns it stacked as [num_layers, batch, seq, hidden]
because signatures cannot return lists).

Builds on Model Garden's `official/nlp/tools/export_tfhub_lib.py`: the same
Keras-model-around-the-encoder construction (dict inputs, a `default` alias
for `pooled_output`, the SentencePiece model attached as `sp_model_file`
asset) saved with `save_format="tf"`, which is what makes the result a
trainable `hub.KerasLayer`. Its `export_model` is not called directly because
it builds Model Garden's own encoder classes from an `EncoderConfig`.

Example:
```python
from rembert_tf.export import export_encoder
export_encoder("runs/pretrain", "export/rembert_encoder")
encoder = tf.saved_model.load("export/rembert_encoder")
outputs = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=types))
layer = hub.KerasLayer("export/rembert_encoder", trainable=True)   # fine-tuning
```
"""
import contextlib
import pathlib
from typing import Optional

import numpy as np
import tensorflow as tf
import tf_keras
from absl import logging

from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_encoder

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class ExportError(ValueError):
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
  """`serving_default`: keyword int32 inputs -> a flat dict of tensors.

  Signatures cannot return lists, so `encoder_outputs` is stacked there into
  one [num_layers, batch, seq, hidden] tensor (the callable returns the list).
  """
  spec = tf.TensorSpec([None, None], tf.int32)

  @tf.function(input_signature=[spec, spec, spec])
  def serve(input_word_ids, input_mask, input_type_ids):
    outputs = model(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                         input_type_ids=input_type_ids), training=False)
    return dict(sequence_output=outputs["sequence_output"],
                pooled_output=outputs["pooled_output"],
                default=outputs["default"],
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


def max_abs_difference(expected, actual) -> float:
  """Largest |difference| over sequence_output, pooled_output, encoder_outputs."""
  diffs = [np.max(np.abs(np.asarray(expected[k]) - np.asarray(actual[k])))
           for k in ("sequence_output", "pooled_output")]
  diffs += [np.max(np.abs(np.asarray(e) - np.asarray(a)))
            for e, a in zip(expected["encoder_outputs"], actual["encoder_outputs"])]
  return float(max(diffs))


def verify_export(export_dir, encoder, cfg, tolerance: float = 1e-5) -> float:
  """Loads the SavedModel and compares it with `encoder`; raises ExportError."""
  loaded = tf.saved_model.load(str(export_dir))
  worst = 0.0
  for batch_size, seq_length in ((2, 7), (3, min(16, cfg.max_position_embeddings))):
    inputs = random_encoder_inputs(cfg, batch_size, seq_length)
    expected = encoder(inputs, training=False)
    actual = loaded(inputs, training=False)
    served = dict(loaded.signatures["serving_default"](**inputs))
    served["encoder_outputs"] = tf.unstack(served["encoder_outputs"], axis=0)
    worst = max(worst, max_abs_difference(expected, actual),
                max_abs_difference(expected, served))
  if worst > tolerance:
    raise ExportError(f"{export_dir}: the SavedModel differs from the encoder "
                      f"by {worst:.3g} (> {tolerance}).")
  return worst


@contextlib.contextmanager
def float32_policy():
  """Builds the exported encoder in float32 even if a mixed policy is global.

  A process that pre-trained under `mixed_bfloat16` (e.g. the demo) would
  otherwise export a bfloat16-compute encoder.
  """
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("float32")
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def export_encoder(checkpoint_dir, output_dir, *, config=None,
                   sp_model: Optional[str] = None, overwrite: bool = False,
                   verify: bool = True) -> str:
  """Exports the encoder of a checkpoint directory as an encoder-only SavedModel.

  Args:
    checkpoint_dir: a rembert_tf checkpoint directory (model_config.yaml +
      encoder/ckpt-N) or a pre-training model_dir (the encoder is read from
      Model Garden's full ckpt-N when encoder/ is missing).
    output_dir: SavedModel directory to create; written under a temporary
      name and renamed when complete and verified.
    config: preset name / YAML path, only needed without model_config.yaml.
    sp_model: SentencePiece model attached as the `sp_model_file` asset
      (default: checkpoint_dir/sentencepiece.model when present).
    overwrite: replace an existing output_dir.
    verify: reload the SavedModel and check it matches the encoder (1e-5).

  Returns:
    output_dir as a string.
  """
  source = checkpoints.resolve(str(checkpoint_dir))
  with float32_policy():
    cfg, encoder = checkpoints.load_encoder(source, config)
    model = build_export_model(encoder)
  sp_model = sp_model or source.sp_model
  if sp_model:
    model.sp_model_file = tf.saved_model.Asset(str(sp_model))
  num_params = encoder.count_params()
  logging.info("Exporting the encoder of %s (%d parameters) to %s",
               source.encoder_checkpoint, num_params, output_dir)
  with checkpoints.AtomicDirectory(output_dir, overwrite=overwrite) as tmp:
    model.save(str(tmp), include_optimizer=False, save_format="tf",
               signatures={"serving_default": serving_signature(model)})
    checkpoints.write_model_config(cfg, str(tmp / checkpoints.MODEL_CONFIG_FILE))
    if verify:
      worst = verify_export(tmp, encoder, cfg)
      logging.info("Verified: max |SavedModel - encoder| = %.3g", worst)
  return str(pathlib.Path(output_dir))

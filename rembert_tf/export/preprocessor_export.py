"""Exports the preprocessing SavedModel: raw strings -> encoder inputs, in-graph.

The TF-Hub BERT preprocessor API (the root call, `tokenize`,
`bert_pack_inputs`) and a `serving_default` feeding the encoder's, on Model
Garden's `SentencepieceTokenizer` and `BertPackInputs` assembled as
`export_tfhub_lib.create_preprocessing` does, without the lower-casing it
hard-wires for SentencePiece models and with the special ids looked up by
rembert_tf's piece names (docs/export.md).

Example:
<!-- snippet: not run: writes the folder docs/export.md's command writes -->
```python
from rembert_tf.export import preprocessor_export
preprocessor_export.export_preprocessor("runs/pretrain/sentencepiece.model",
                                        "export/preprocessor", seq_length=128)
```
"""
import numbers
from typing import Optional

import tensorflow as tf
import tf_keras
from absl import logging
from official.nlp.modeling import layers
from official.nlp.tools import export_tfhub_lib

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import tokenizer


def create_preprocessor(sp_model_path, seq_length: int = 128) -> tf_keras.Model:
  """The preprocessing Keras model with `tokenize` and `bert_pack_inputs` attached."""
  special = tokenizer.SpecialTokens.from_model(sp_model_path)
  tokenize = layers.SentencepieceTokenizer(
      model_serialized_proto=fileio.read_bytes(sp_model_path), lower_case=False,
      strip_diacritics=False, tokenize_with_offsets=False)
  sentences = tf_keras.layers.Input(shape=(), dtype=tf.string, name="sentences")
  tokens = tokenize(sentences)
  pack = layers.BertPackInputs(
      seq_length=seq_length, start_of_sequence_id=special.cls_id,
      end_of_segment_id=special.sep_id, padding_id=special.pad_id)
  preprocessor = tf_keras.Model(sentences, pack(tokens))
  preprocessor.tokenize = tf_keras.Model(sentences, tokens)
  special_ids = dict(start_of_sequence_id=special.cls_id,
                     end_of_segment_id=special.sep_id,
                     padding_id=special.pad_id, mask_id=special.mask_id,
                     vocab_size=special.vocab_size)
  preprocessor.tokenize.get_special_tokens_dict = tf.train.Checkpoint()
  preprocessor.tokenize.get_special_tokens_dict.__call__ = tf.function(
      lambda: {k: tf.constant(v) for k, v in special_ids.items()},
      input_signature=[])
  preprocessor.bert_pack_inputs = (
      export_tfhub_lib.BertPackInputsSavedModelWrapper(pack))
  return preprocessor


def serving_signature(preprocessor: tf_keras.Model):
  """`sentences` -> the input names the encoder's `serving_default` takes
  (Keras would name them after the packing layer)."""
  return tf.function(
      lambda sentences: {name: preprocessor(sentences)[name] for name in
                         ("input_word_ids", "input_mask", "input_type_ids")},
      input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])


def check_seq_length(seq_length: int,
                     max_seq_length: Optional[int] = None) -> None:
  """Refuses a packed length without room for [CLS], text and [SEP], or
  beyond the encoder's positions."""
  if isinstance(seq_length, bool) or not isinstance(
      seq_length, numbers.Integral) or seq_length < 3:
    raise errors.UsageError(
        f"--seq_length {seq_length}: the preprocessor packs [CLS] text [SEP] "
        "into it; give at least 3 (e.g. 128).")
  if max_seq_length is not None and seq_length > max_seq_length:
    raise errors.UsageError(
        f"--seq_length {seq_length} exceeds the encoder's "
        f"max_position_embeddings {max_seq_length}; lower it.")


@outputs.writes_output("output_dir")
def export_preprocessor(sp_model_path, output_dir, *, seq_length: int = 128,
                        max_seq_length: Optional[int] = None,
                        overwrite: bool = False) -> str:
  """Writes the preprocessing SavedModel of the SentencePiece model the
  encoder was trained with (swapped in when complete); `seq_length` is the
  default packed length, checked against `max_seq_length` when given."""
  output_dir = fileio.as_str(output_dir).rstrip("/")
  check_seq_length(seq_length, max_seq_length)
  fileio.check_output_location(output_dir)
  outputs.refuse_existing([output_dir], overwrite)
  preprocessor = create_preprocessor(sp_model_path, seq_length)
  with outputs.atomic_directory(output_dir, overwrite=overwrite) as tmp:
    preprocessor.save(tmp, include_optimizer=False, save_format="tf",
                      signatures={"serving_default":
                                  serving_signature(preprocessor)})
  logging.info("Wrote the preprocessing SavedModel %s (seq_length %d)",
               output_dir, seq_length)
  return output_dir

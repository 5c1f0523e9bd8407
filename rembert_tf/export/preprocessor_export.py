"""Exports the preprocessing SavedModel: raw strings -> encoder inputs, in-graph.

Follows the TF-Hub BERT preprocessor API, so text goes to embeddings with two
SavedModels and no Python tokenizer:

- root call: `preprocessor(tf.constant(["a sentence", ...]))` -> dict of int32
  `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq_length]
  (`[CLS] a [SEP]`, truncated, padded with the padding id);
- `preprocessor.tokenize(strings)` -> RaggedTensor [batch, (pieces)];
- `preprocessor.bert_pack_inputs([tokens_a, tokens_b], seq_length=...)`
  -> the same dict for pairs, `[CLS] a [SEP] b [SEP]`, type ids 0 then 1,
  round-robin truncation;
- `preprocessor.tokenize.get_special_tokens_dict()`.

Tokenisation is tensorflow-text's SentencepieceTokenizer on the model's own
normaliser (no lower-casing, no accent stripping: RemBERT keeps both).
Special ids come from `rembert_tf.conversion.special_tokens` (the fixed
rembert_tf ids, or looked up by piece for a foreign model such as the
released one).

Builds on Model Garden: `official.nlp.modeling.layers.SentencepieceTokenizer`
and `BertPackInputs`, assembled the way
`official/nlp/tools/export_tfhub_lib.create_preprocessing` does (and reusing
its `BertPackInputsSavedModelWrapper`), but without the ALBERT-style
lower-casing and diacritics stripping that function hard-wires for
SentencePiece models.

Example:
```python
export_preprocessor("runs/pretrain/sentencepiece.model", "export/preprocessor")
pre = tf.saved_model.load("export/preprocessor")
enc = tf.saved_model.load("export/rembert_encoder")
emb = enc(pre(tf.constant(["Hello world"])))["pooled_output"]
a, b = pre.tokenize(tf.constant(["premise"])), pre.tokenize(tf.constant(["hypothesis"]))
pair_inputs = pre.bert_pack_inputs([a, b], seq_length=tf.constant(64))
```
"""
import pathlib
from typing import Optional

import tensorflow as tf
import tf_keras
from absl import logging
from official.nlp.modeling import layers
from official.nlp.tools import export_tfhub_lib

from rembert_tf.modeling import checkpoints

from rembert_tf.conversion import special_tokens


def create_preprocessor(sp_model_path, seq_length: int = 128) -> tf_keras.Model:
  """The preprocessing Keras model with `tokenize` and `bert_pack_inputs` attached."""
  ids = special_tokens.special_token_ids(sp_model_path)
  tokenize = layers.SentencepieceTokenizer(
      model_file_path=str(sp_model_path), lower_case=False,
      strip_diacritics=False, tokenize_with_offsets=False)
  sentences = tf_keras.layers.Input(shape=(), dtype=tf.string, name="sentences")
  tokens = tokenize(sentences)
  pack = layers.BertPackInputs(
      seq_length=seq_length,
      start_of_sequence_id=ids["start_of_sequence_id"],
      end_of_segment_id=ids["end_of_segment_id"],
      padding_id=ids["padding_id"])
  preprocessor = tf_keras.Model(sentences, pack(tokens))
  preprocessor.tokenize = tf_keras.Model(sentences, tokens)
  special = {k: int(v) for k, v in ids.items()}
  preprocessor.tokenize.get_special_tokens_dict = tf.train.Checkpoint()
  preprocessor.tokenize.get_special_tokens_dict.__call__ = tf.function(
      lambda: {k: tf.constant(v) for k, v in special.items()},
      input_signature=[])
  preprocessor.bert_pack_inputs = (
      export_tfhub_lib.BertPackInputsSavedModelWrapper(pack))
  return preprocessor


def export_preprocessor(sp_model_path, output_dir, *, seq_length: int = 128,
                        max_seq_length: Optional[int] = None,
                        overwrite: bool = False) -> str:
  """Writes the preprocessing SavedModel (temp name, renamed when complete).

  Args:
    sp_model_path: the SentencePiece model the encoder was trained with.
    output_dir: SavedModel directory to create.
    seq_length: default packed length of the root call / bert_pack_inputs.
    max_seq_length: the encoder's max_position_embeddings, to check against.
    overwrite: replace an existing output_dir.
  """
  sp_model_path = pathlib.Path(sp_model_path)
  if not sp_model_path.is_file():
    raise FileNotFoundError(
        f"SentencePiece model {sp_model_path} not found; pass --sp_model (the "
        "model the checkpoint was trained with, e.g. MODEL_DIR/sentencepiece.model).")
  if max_seq_length is not None and seq_length > max_seq_length:
    raise ValueError(f"--seq_length {seq_length} exceeds the encoder's "
                     f"max_position_embeddings {max_seq_length}; lower it.")
  preprocessor = create_preprocessor(sp_model_path, seq_length)
  with checkpoints.AtomicDirectory(output_dir, overwrite=overwrite) as tmp:
    preprocessor.save(str(tmp), include_optimizer=False, save_format="tf")
  logging.info("Wrote the preprocessing SavedModel %s (seq_length %d)",
               output_dir, seq_length)
  return str(output_dir)

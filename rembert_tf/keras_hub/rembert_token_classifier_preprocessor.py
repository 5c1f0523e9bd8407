"""RemBertTokenClassifierPreprocessor: words and per-word tags -> per-piece inputs.

Builds on `keras_hub.models.Preprocessor` (preset loading of the tokenizer,
`from_preset`, `save_to_preset`); keras-hub has no token classification, so
the labelling is RemBERT's own, the same as the project's tagging records:

* each word is tokenised on its own (a word with no piece gets the unknown
  piece); its FIRST piece carries the word's tag, its other pieces get
  `IGNORED_LABEL` (-1), as do `[CLS]`, `[SEP]` and the padding;
* `encode` splits a sentence whose pieces do not fit into several rows at
  word boundaries, never cutting a word off (`rows` say where each row's
  words are); calling the layer keeps the first row of each sentence, so one
  sentence stays one example inside `fit`.

Calling it returns `(x, y, sample_weight)`: `y` the per-piece class ids (0
where ignored) and `sample_weight` 1 at first pieces, 0 elsewhere. A dict
input (already encoded) passes through unchanged.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertTokenClassifierPreprocessor
preprocessor = RemBertTokenClassifierPreprocessor.from_preset(
    "presets/rembert", sequence_length=128)
x, y, weight = preprocessor([["Ann", "Lee", "lives", "in", "Rome"]],
                            [[1, 2, 0, 0, 5]])
features = preprocessor.encode(sentences, tags)   # long sentences split in rows
features.inputs["token_ids"].shape, features.labels.shape, features.rows[0]
```
"""
import dataclasses
from typing import Dict, List, Optional, Sequence

import keras
import keras_hub
import numpy as np
import tensorflow as tf  # keras-hub's preprocessing runs on tf.data

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_tokenizer

IGNORED_LABEL = -1


@dataclasses.dataclass
class TaggedRow:
  """Where one encoded row's words are: `sentence`, its first word
  `word_start`, and the position of each word's first piece."""
  sentence: int
  word_start: int
  positions: List[int]


@dataclasses.dataclass
class TaggedFeatures:
  """Encoded sentences: backbone `inputs` ([rows, sequence_length] int32),
  per-piece `labels` (IGNORED_LABEL where no tag), and `rows`."""
  inputs: Dict[str, np.ndarray]
  labels: np.ndarray
  rows: List[TaggedRow]


def _as_python(values):
  """Tensors / arrays of strings or ints -> nested Python lists."""
  if hasattr(values, "to_list"):             # tf.RaggedTensor
    values = values.to_list()
  elif hasattr(values, "numpy"):
    values = values.numpy().tolist()
  elif isinstance(values, np.ndarray):
    values = values.tolist()
  return [[v.decode("utf-8") if isinstance(v, bytes) else v for v in row]
          for row in values]


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTokenClassifierPreprocessor(keras_hub.models.Preprocessor):
  """Per-word tagging preprocessing (see the module docstring).

  Args:
    tokenizer: a `RemBertTokenizer`.
    sequence_length: packed length of each row.
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  tokenizer_cls = rembert_tokenizer.RemBertTokenizer

  def __init__(self, tokenizer, sequence_length=128, **kwargs):
    super().__init__(**kwargs)
    self.tokenizer = tokenizer
    self.sequence_length = sequence_length

  def build(self, input_shape=None):
    # Nothing to build: the encoders read the tokenizer's vocabulary.
    self.built = True

  def encode(self, sentences: Sequence[Sequence[str]],
             tags: Optional[Sequence[Sequence[int]]] = None,
             split_long: bool = True) -> TaggedFeatures:
    """Sentences (lists of words) and optional tag ids -> `TaggedFeatures`.

    split_long: a sentence that does not fit continues in further rows;
      False keeps its first row only.
    """
    room = self.sequence_length - 2
    rows, token_rows, label_rows = [], [], []
    for index, words in enumerate(sentences):
      pieces = [(p or [self.tokenizer.unk_token_id])[:room]
                for p in self.tokenizer.piece_ids(list(words))]
      start = 0
      while start < len(words):
        end, used = start, 0
        while end < len(words) and used + len(pieces[end]) <= room:
          used += len(pieces[end])
          end += 1
        tokens, labels, positions = [self.tokenizer.cls_token_id], [
            IGNORED_LABEL], []
        for word in range(start, end):
          positions.append(len(tokens))
          tokens += pieces[word]
          first = IGNORED_LABEL if tags is None else int(tags[index][word])
          labels += [first] + [IGNORED_LABEL] * (len(pieces[word]) - 1)
        tokens.append(self.tokenizer.sep_token_id)
        labels.append(IGNORED_LABEL)
        rows.append(TaggedRow(index, start, positions))
        token_rows.append(tokens)
        label_rows.append(labels)
        start = end
        if not split_long:
          break
    return TaggedFeatures(self._pack(token_rows),
                          self._pad(label_rows, IGNORED_LABEL), rows)

  def _pad(self, rows: List[List[int]], value: int) -> np.ndarray:
    out = np.full([len(rows), self.sequence_length], value, np.int32)
    for i, row in enumerate(rows):
      out[i, :len(row)] = row
    return out

  def _pack(self, token_rows: List[List[int]]) -> Dict[str, np.ndarray]:
    token_ids = self._pad(token_rows, self.tokenizer.pad_token_id)
    padding_mask = self._pad([[1] * len(r) for r in token_rows], 0)
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": padding_mask}

  def _encode_batch(self, words, tags):
    """-> (inputs, labels 0 where ignored, weights): one row per sentence."""
    features = self.encode(_as_python(words),
                           None if tags is None else _as_python(tags),
                           split_long=False)
    weights = (features.labels != IGNORED_LABEL).astype("float32")
    return (features.inputs, np.maximum(features.labels, 0), weights)

  def call(self, x, y=None, sample_weight=None):
    if isinstance(x, dict):   # already encoded
      return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    if self._use_tf_workflow():
      return self._call_in_graph(x, y)
    inputs, labels, weights = self._encode_batch(x, y)
    if y is None:
      return inputs
    return inputs, labels, weights

  def _call_in_graph(self, x, y):
    """Inside `tf.data` (fit on raw words): the same encoding as a
    `tf.numpy_function` on the ragged batch."""
    words = x if isinstance(x, tf.RaggedTensor) else (
        tf.RaggedTensor.from_tensor(x))
    has_tags = y is not None
    tags = words.with_flat_values(tf.zeros_like(words.flat_values, tf.int32))
    if has_tags:
      tags = y if isinstance(y, tf.RaggedTensor) else (
          tf.RaggedTensor.from_tensor(y))

    def encode(flat_words, word_splits, flat_tags, tag_splits):
      split = lambda flat, splits: [flat[a:b].tolist() for a, b in
                                    zip(splits[:-1], splits[1:])]
      inputs, labels, weights = self._encode_batch(
          split(flat_words, word_splits),
          split(flat_tags, tag_splits) if has_tags else None)
      return (inputs["token_ids"], inputs["segment_ids"],
              inputs["padding_mask"], labels.astype("int32"), weights)

    outputs = tf.numpy_function(
        encode, [words.flat_values, words.row_splits,
                 tf.cast(tags.flat_values, tf.int32), tags.row_splits],
        [tf.int32, tf.int32, tf.int32, tf.int32, tf.float32])
    for tensor in outputs:
      tensor.set_shape([None, self.sequence_length])
    token_ids, segment_ids, padding_mask, labels, weights = outputs
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
              "padding_mask": padding_mask}
    if not has_tags:
      return inputs
    return inputs, labels, weights

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length)
    return config

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
where ignored) and `sample_weight` 1 at first pieces, 0 elsewhere (times a
given per-sentence weight). It takes one sentence (a list of words) or a
batch, in Python and inside `tf.data` (`Dataset.map(preprocessor)`); one
sentence comes back without the batch axis. A dict input (already encoded)
passes through unchanged.

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

from rembert_tf.keras_hub import example_batching
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

  def _encode_arrays(self, words, tags=None):
    """A batch of sentences -> token ids, segment ids, padding mask, labels
    (0 where ignored), first-piece weights: one row per sentence."""
    features = self.encode(words, tags, split_long=False)
    return (features.inputs["token_ids"], features.inputs["segment_ids"],
            features.inputs["padding_mask"],
            np.maximum(features.labels, 0).astype("int32"),
            (features.labels != IGNORED_LABEL).astype("float32"))

  def call(self, x, y=None, sample_weight=None):
    if isinstance(x, dict):   # already encoded
      return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    if self._use_tf_workflow():
      single = x.shape.rank == 1   # one sentence of words
      arrays = example_batching.encode_in_graph(
          self._encode_arrays, [x] if y is None else [x, y],
          [2] if y is None else [2, 2], single,
          [tf.int32] * 4 + [tf.float32], [[self.sequence_length]] * 5)
      if sample_weight is not None:
        sample_weight = tf.cast(sample_weight, tf.float32)[..., tf.newaxis]
    else:
      words = example_batching.to_python(x)
      tags = None if y is None else example_batching.to_python(y)
      single = bool(words) and isinstance(words[0], str)
      if single:
        words, tags = [words], None if tags is None else [tags]
      arrays = self._encode_arrays(words, tags)
      if single:
        arrays = example_batching.unbatch(arrays)
      if sample_weight is not None:
        sample_weight = np.asarray(example_batching.to_python(sample_weight),
                                   "float32")[..., None]
    token_ids, segment_ids, padding_mask, labels, weights = arrays
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
              "padding_mask": padding_mask}
    if y is None:
      return inputs
    if sample_weight is not None:
      weights = weights * sample_weight
    return inputs, labels, weights

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length)
    return config

"""RemBertQuestionAnswererPreprocessor: (question, context) -> windows over the context.

Builds on `keras_hub.models.Preprocessor` (preset loading of the tokenizer,
`from_preset`, `save_to_preset`); keras-hub has no extractive question
answering, so the windows are RemBERT's own, the same as the project's span
records (the SQuAD recipe of BERT):

* the question is cut to `max_query_length` pieces; the context is tokenised
  once, with each piece's character span in the untouched context
  (`RemBertTokenizer.tokenize_with_char_offsets`: no accent stripping);
* windows of at most `sequence_length - len(question) - 3` context pieces
  start every `doc_stride` pieces, each packed as `[CLS] question [SEP]
  window [SEP]` (segment ids 0, then 1 from the window on);
* a training answer (character start and text) becomes the start and end
  piece positions in each window holding it whole, 0 (`[CLS]`) in the
  others; a question whose answer covers no piece is skipped;
* each window records, per context piece, whether this window gives it its
  most context (the "max context" rule), so answers are read once.

`encode` returns every window (`SpanFeatures`). Calling the layer on
`(questions, contexts)` strings (one example or a batch, in Python and
inside `tf.data`, so `fit` / `predict` take raw strings) keeps one window per
example: with training answers `y = (answer_starts, answer_texts)`, the first
window holding the answer, else the first. An encoded dict passes through.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertQuestionAnswererPreprocessor
preprocessor = RemBertQuestionAnswererPreprocessor.from_preset(
    "presets/rembert", sequence_length=384, doc_stride=128)
features = preprocessor.encode(["Where is the tower?"],
                               ["The Eiffel Tower is in Paris."],
                               answer_starts=[23], answer_texts=["Paris"])
features.inputs["token_ids"].shape, features.start_positions, features.windows[0]
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


@dataclasses.dataclass
class SpanWindow:
  """One window: its `example`, where its context pieces begin in the row
  (`doc_offset`), their character spans in the context, and whether each is
  read in this window (`max_context`)."""
  example: int
  doc_offset: int
  char_starts: List[int]
  char_ends: List[int]
  max_context: List[bool]


@dataclasses.dataclass
class SpanFeatures:
  """Encoded windows: backbone `inputs` ([windows, sequence_length] int32),
  answer `start_positions` / `end_positions` ([windows]; 0 without an answer
  in the window), and the `windows`. `skipped`: training questions whose
  answer covers no piece."""
  inputs: Dict[str, np.ndarray]
  start_positions: np.ndarray
  end_positions: np.ndarray
  windows: List[SpanWindow]
  skipped: int = 0


def window_starts(num_pieces: int, max_length: int, stride: int) -> List[int]:
  """Starts of the windows of at most `max_length` pieces, every `stride`."""
  starts, offset = [], 0
  while offset < num_pieces:
    starts.append(offset)
    if offset + max_length >= num_pieces:
      break
    offset += min(max_length, stride)
  return starts


def is_max_context(starts: List[int], lengths: List[int], window: int,
                   piece: int) -> bool:
  """Whether `window` gives `piece` the most context among the windows that
  hold it: the larger of min(pieces left, pieces right), ties to the longer
  window (the rule of BERT's SQuAD code)."""
  best, best_score = None, None
  for index, (start, length) in enumerate(zip(starts, lengths)):
    if not start <= piece < start + length:
      continue
    context = min(piece - start, start + length - 1 - piece)
    score = context + 0.01 * length
    if best_score is None or score > best_score:
      best, best_score = index, score
  return best == window


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertQuestionAnswererPreprocessor(keras_hub.models.Preprocessor):
  """Extractive QA preprocessing (see the module docstring).

  Args:
    tokenizer: a `RemBertTokenizer`.
    sequence_length: packed length of each window.
    doc_stride: context pieces between the starts of two windows.
    max_query_length: question pieces kept.
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  tokenizer_cls = rembert_tokenizer.RemBertTokenizer

  def __init__(self, tokenizer, sequence_length=384, doc_stride=128,
               max_query_length=64, **kwargs):
    super().__init__(**kwargs)
    self.tokenizer = tokenizer
    self.sequence_length = sequence_length
    self.doc_stride = doc_stride
    self.max_query_length = max_query_length

  def build(self, input_shape=None):
    # Nothing to build: the encoders read the tokenizer's vocabulary.
    self.built = True

  def encode(self, questions: Sequence[str], contexts: Sequence[str],
             answer_starts: Optional[Sequence[int]] = None,
             answer_texts: Optional[Sequence[str]] = None,
             one_window_each: bool = False) -> SpanFeatures:
    """Questions and contexts (and training answers) -> `SpanFeatures`.

    one_window_each: one row per example (what `fit` and `predict` on raw
      strings see): the first window holding the answer, else the first
      window; a question whose answer covers no piece keeps its row, with
      the answer at `[CLS]`.
    """
    rows, starts, ends, windows, skipped = [], [], [], [], 0
    query_pieces = self.tokenizer.piece_ids(list(questions))
    for example, (query, context) in enumerate(zip(query_pieces, contexts)):
      query = query[:self.max_query_length]
      doc, char_starts, char_ends = (
          self.tokenizer.tokenize_with_char_offsets(context))
      answer = None
      if answer_starts is not None:
        answer = self._answer_pieces(char_starts, char_ends,
                                     answer_starts[example],
                                     answer_texts[example])
        if answer is None and not one_window_each:
          skipped += 1
          continue
      kept = self._windows(example, query, doc, char_starts, char_ends,
                           answer, at_least_one=one_window_each)
      if one_window_each:
        holding = [w for w in kept if w[1] > 0]
        kept = (holding or kept)[:1]
      for row, start, end, window in kept:
        rows.append(row)
        starts.append(start)
        ends.append(end)
        windows.append(window)
    return SpanFeatures(self._pack(rows), np.array(starts, np.int32),
                        np.array(ends, np.int32), windows, skipped)

  def _windows(self, example, query, doc, char_starts, char_ends, answer,
               at_least_one=False):
    """(row, answer start, answer end, SpanWindow) of each window (an empty
    context has none, or, `at_least_one`, one without context pieces)."""
    room = self.sequence_length - len(query) - 3
    if room <= 0:
      raise ValueError(
          f"sequence_length {self.sequence_length} leaves no room for the "
          f"context after a {len(query)}-piece question; raise "
          "sequence_length or lower max_query_length.")
    offsets = window_starts(len(doc), room, self.doc_stride)
    if at_least_one and not offsets:
      offsets = [0]
    lengths = [min(room, len(doc) - o) for o in offsets]
    doc_offset = len(query) + 2
    out = []
    for index, (offset, length) in enumerate(zip(offsets, lengths)):
      row = ([self.tokenizer.cls_token_id] + query
             + [self.tokenizer.sep_token_id] + doc[offset:offset + length]
             + [self.tokenizer.sep_token_id], doc_offset)
      start = end = 0
      if answer is not None and offset <= answer[0] and (
          answer[1] < offset + length):
        start, end = (answer[0] - offset + doc_offset,
                      answer[1] - offset + doc_offset)
      out.append((row, start, end, SpanWindow(
          example, doc_offset, char_starts[offset:offset + length],
          char_ends[offset:offset + length],
          [is_max_context(offsets, lengths, index, offset + i)
           for i in range(length)])))
    return out

  @staticmethod
  def _answer_pieces(char_starts, char_ends, answer_start, answer_text):
    """(first, last) context piece covering the answer's characters, or None."""
    last_char = answer_start + len(answer_text) - 1
    covering = [i for i, (s, e) in enumerate(zip(char_starts, char_ends))
                if e >= answer_start and s <= last_char]
    return (covering[0], covering[-1]) if covering else None

  def _pack(self, rows) -> Dict[str, np.ndarray]:
    shape = [len(rows), self.sequence_length]
    token_ids = np.full(shape, self.tokenizer.pad_token_id, np.int32)
    segment_ids = np.zeros(shape, np.int32)
    padding_mask = np.zeros(shape, np.int32)
    for i, (tokens, doc_offset) in enumerate(rows):
      token_ids[i, :len(tokens)] = tokens
      segment_ids[i, doc_offset:len(tokens)] = 1
      padding_mask[i, :len(tokens)] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": padding_mask}

  def _encode_arrays(self, questions, contexts, answer_starts=None,
                     answer_texts=None):
    """A batch -> token ids, segment ids, padding mask, answer start and end:
    one row per example (`encode(..., one_window_each=True)`)."""
    features = self.encode(questions, contexts, answer_starts, answer_texts,
                           one_window_each=True)
    return (features.inputs["token_ids"], features.inputs["segment_ids"],
            features.inputs["padding_mask"], features.start_positions,
            features.end_positions)

  def call(self, x, y=None, sample_weight=None):
    """x: `(questions, contexts)`, one string each or a batch; y (training):
    `(answer_starts, answer_texts)`, the answer's first character in the
    context and its text. Returns the backbone inputs and, with y,
    `{"start_logits": start piece, "end_logits": end piece}`."""
    if isinstance(x, dict):   # already encoded (fit / predict on windows)
      return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    parts = list(x) + ([] if y is None else list(y))
    if self._use_tf_workflow():
      single = tf.convert_to_tensor(parts[0]).shape.rank == 0
      arrays = example_batching.encode_in_graph(
          self._encode_arrays, parts, [1] * len(parts), single,
          [tf.int32] * 5, [[self.sequence_length]] * 3 + [[]] * 2)
    else:
      parts = [example_batching.to_python(p) for p in parts]
      single = isinstance(parts[0], str)
      arrays = self._encode_arrays(*([p] for p in parts) if single else parts)
      if single:
        arrays = example_batching.unbatch(arrays)
    token_ids, segment_ids, padding_mask, starts, ends = arrays
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids,
              "padding_mask": padding_mask}
    labels = None if y is None else {"start_logits": starts,
                                     "end_logits": ends}
    return keras.utils.pack_x_y_sample_weight(inputs, labels, sample_weight)

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length,
                  doc_stride=self.doc_stride,
                  max_query_length=self.max_query_length)
    return config


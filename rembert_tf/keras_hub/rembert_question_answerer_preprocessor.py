"""RemBertQuestionAnswererPreprocessor: (question, context) -> a window over the context.

Builds on `keras_hub.models.Preprocessor` (keras-hub has no extractive QA):
the window is BERT's SQuAD recipe, as the project's span records, in
TensorFlow ops so `tf.data` maps it. Longer contexts: `windowed_tasks`.
"""
import keras
import keras_hub
from keras_hub.src.utils.tensor_utils import assert_tf_libs_installed
from keras_hub.src.utils.tensor_utils import preprocessing_function

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_tokenizer

try:
  import tensorflow as tf  # keras-hub's text preprocessing runs in tf ops
except ImportError:
  tf = None

# Code points Python's str.isspace() holds (none above U+3000).
SPACES = [c for c in range(0x3001) if chr(c).isspace()]
_FAR = 2**31 - 1   # past every index, for searches in padded rows


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertQuestionAnswererPreprocessor(keras_hub.models.Preprocessor):
  """RemBERT preprocessing for extractive question answering.

  Takes `(questions, contexts)` and, for training, `(answer_starts,
  answer_texts)`. Windows of the context start every `doc_stride` pieces,
  each packed as `[CLS] question [SEP] window [SEP]`; one is kept per example:
  the first holding the whole answer (its first and last piece positions as
  labels), else the first window with the answer at `[CLS]` (0).

  Args:
    tokenizer: a `RemBertTokenizer`.
    sequence_length: packed length of each window.
    doc_stride: context pieces between the starts of two windows.
    max_query_length: question pieces kept.

  Examples:
  <!-- snippet: not run: needs a `RemBertTokenizer` (a SentencePiece model) -->
  ```python
  preprocessor = keras_hub.models.RemBertQuestionAnswererPreprocessor(
      tokenizer, sequence_length=384, doc_stride=128)
  x, y = preprocessor(
      x=(["Where is the tower?"], ["The Eiffel Tower is in Paris."]),
      y=([23], ["Paris"]),
  )
  y["start_logits"], y["end_logits"]  # The answer's first and last piece.
  ```
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
    # Nothing to build: the encoder reads the tokenizer's vocabulary.
    self.built = True

  def _tokenize(self, texts, with_offsets=False):
    self.tokenizer._maybe_initialized_tf()  # pylint: disable=protected-access
    sentence_piece = self.tokenizer._sentence_piece  # pylint: disable=protected-access
    if with_offsets:
      return sentence_piece.tokenize_with_offsets(texts)
    return sentence_piece.tokenize(texts)

  def _answer_pieces(self, contexts, byte_starts, byte_ends, answer_starts,
                     answer_texts):
    """First and last context piece covering the answer's characters [B],
    and whether any does."""
    char_starts, char_ends = _char_spans(contexts, byte_starts, byte_ends)
    last_char = answer_starts + tf.strings.length(answer_texts,
                                                  unit="UTF8_CHAR") - 1
    rows = char_starts.value_rowids()
    covering = tf.logical_and(
        char_ends.flat_values >= tf.gather(answer_starts, rows),
        char_starts.flat_values <= tf.gather(last_char, rows))
    index = tf.cast(tf.ragged.range(char_starts.row_lengths()).flat_values,
                    "int32")
    batch = tf.cast(char_starts.nrows(), "int32")
    first = tf.math.unsorted_segment_min(
        tf.where(covering, index, _FAR), rows, batch)
    last = tf.math.unsorted_segment_max(
        tf.where(covering, index, -1), rows, batch)
    return first, last, last >= 0

  def _encode(self, questions, contexts, answer_starts=None,
              answer_texts=None):
    """Questions and contexts [B] -> token ids, segment ids, padding mask
    [B, L] and answer start and end [B]."""
    query = tf.cast(self._tokenize(questions), "int32")
    query = query[:, :self.max_query_length]
    doc, byte_starts, byte_ends = self._tokenize(contexts, with_offsets=True)
    doc = tf.cast(doc, "int32")
    query_length = tf.cast(query.row_lengths(), "int32")
    doc_length = tf.cast(doc.row_lengths(), "int32")
    room = self.sequence_length - query_length - 3
    tf.debugging.assert_positive(
        room, message=f"sequence_length {self.sequence_length} leaves no room "
        "for the context after the question; raise sequence_length or lower "
        "max_query_length.")
    stride = tf.minimum(room, self.doc_stride)
    window = tf.zeros_like(room)
    start = end = tf.zeros_like(room)
    if answer_starts is not None:
      first, last, found = self._answer_pieces(
          contexts, byte_starts, byte_ends,
          tf.cast(answer_starts, "int32"), answer_texts)
      # The first window whose end passes the answer's last piece.
      window = tf.maximum(0, tf.math.floordiv(last - room, stride) + 1)
      held = tf.logical_and(found, window * stride <= first)
      window = tf.where(held, window, 0)
      shift = query_length + 2 - window * stride
      start = tf.where(held, first + shift, 0)
      end = tf.where(held, last + shift, 0)
    offset = window * stride
    length = tf.maximum(tf.minimum(room, doc_length - offset), 0)
    begin = tf.cast(doc.row_starts(), "int32") + offset
    context = tf.gather(doc.flat_values, tf.ragged.range(begin, begin + length))
    column = tf.ones([tf.shape(room)[0], 1], "int32")
    tokens = tf.concat([column * self.tokenizer.cls_token_id, query,
                        column * self.tokenizer.sep_token_id, context,
                        column * self.tokenizer.sep_token_id], axis=1)
    segments = tf.concat([column * 0, query * 0, column * 0, context * 0 + 1,
                          column], axis=1)
    shape = [None, self.sequence_length]
    return (tokens.to_tensor(self.tokenizer.pad_token_id, shape=shape),
            segments.to_tensor(0, shape=shape),
            tf.sequence_mask(tokens.row_lengths(), self.sequence_length,
                             dtype="int32"), start, end)

  @preprocessing_function
  def call(self, x, y=None, sample_weight=None):
    """x: `(questions, contexts)`, one string each or a batch; y (training):
    `(answer_starts, answer_texts)`. Returns the backbone inputs and, with y,
    `{"start_logits": start piece, "end_logits": end piece}`."""
    if isinstance(x, dict):   # already encoded (fit / predict on windows)
      return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    assert_tf_libs_installed(type(self).__name__)
    parts = [_to_tf(part) for part in list(x) + list(y or ())]
    single = parts[0].shape.rank == 0
    if single:
      parts = [part[tf.newaxis] for part in parts]
    token_ids, segment_ids, padding_mask, start, end = self._encode(*parts)
    x = {"token_ids": token_ids, "segment_ids": segment_ids,
         "padding_mask": padding_mask}
    if single:
      x = {key: value[0] for key, value in x.items()}
      start, end = start[0], end[0]
    labels = None if y is None else {"start_logits": start,
                                     "end_logits": end}
    return keras.utils.pack_x_y_sample_weight(x, labels, sample_weight)

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length,
                  doc_stride=self.doc_stride,
                  max_query_length=self.max_query_length)
    return config


def _to_tf(values):
  """A string, list, NumPy array or backend tensor -> a TensorFlow tensor."""
  if isinstance(values, tf.Tensor):
    return values
  if isinstance(values, (str, bytes, list, tuple)):
    return tf.convert_to_tensor(values)
  return tf.convert_to_tensor(keras.ops.convert_to_numpy(values))


def _char_of_bytes(char_offsets, byte_offsets):
  """Byte offsets -> the index of the character holding each byte (one past
  the last character at the string's end); ragged [B, (n)] each."""
  sorted_starts = char_offsets.to_tensor(_FAR)
  sorted_starts = tf.concat([sorted_starts, tf.fill(
      [tf.shape(sorted_starts)[0], 1], tf.constant(_FAR, "int64"))], axis=1)
  found = tf.searchsorted(sorted_starts, byte_offsets.to_tensor(0),
                          side="right") - 1
  return tf.RaggedTensor.from_tensor(tf.cast(found, "int32"),
                                     lengths=byte_offsets.row_lengths())


def _char_spans(contexts, byte_starts, byte_ends):
  """Each piece's first and last character in its context (ragged [B, (D)]),
  leading whitespace left out (as BERT's SQuAD code reads them)."""
  codepoints, char_offsets = tf.strings.unicode_decode_with_offsets(
      contexts, "UTF-8")
  num_chars = tf.cast(codepoints.row_lengths(), "int32")
  byte_length = tf.strings.length(contexts)
  char_offsets = tf.concat(
      [char_offsets, tf.cast(byte_length, "int64")[:, tf.newaxis]], axis=1)
  first = _char_of_bytes(char_offsets, byte_starts)
  last = _char_of_bytes(char_offsets, tf.maximum(byte_ends - 1, byte_starts))
  last = last.with_flat_values(tf.where(
      byte_ends.flat_values > byte_starts.flat_values, last.flat_values,
      first.flat_values))
  top = tf.gather(num_chars - 1, first.value_rowids())
  first = first.with_flat_values(tf.minimum(first.flat_values, top))
  last = last.with_flat_values(
      tf.minimum(tf.maximum(last.flat_values, first.flat_values), top))
  # The first non-space character at or after `first`, but not past `last`.
  space = tf.reduce_any(tf.equal(codepoints.flat_values[:, tf.newaxis],
                                 tf.constant(SPACES, "int32")), axis=1)
  positions = tf.cast(tf.ragged.range(codepoints.row_lengths()), "int32")
  visible = tf.ragged.boolean_mask(
      positions, codepoints.with_flat_values(tf.logical_not(space)))
  visible = visible.to_tensor(_FAR)
  visible = tf.concat([visible, tf.fill([tf.shape(visible)[0], 1], _FAR)],
                      axis=1)
  index = tf.searchsorted(visible, first.to_tensor(0), side="left")
  following = tf.gather(visible, index, batch_dims=1)
  following = tf.RaggedTensor.from_tensor(following,
                                          lengths=first.row_lengths())
  first = first.with_flat_values(
      tf.minimum(following.flat_values, last.flat_values))
  return first, last

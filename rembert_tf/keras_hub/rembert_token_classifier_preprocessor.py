"""RemBertTokenClassifierPreprocessor: words and per-word tags -> per-piece inputs.

Builds on `keras_hub.models.Preprocessor` (keras-hub has no token
classification), labelling as the project's tagging records do, in
TensorFlow ops so `tf.data` maps it.
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

IGNORED_LABEL = -1


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTokenClassifierPreprocessor(keras_hub.models.Preprocessor):
  """RemBERT preprocessing for per-word tagging (NER, POS).

  Takes sentences as lists of words and, for training, one tag id per word.
  Each word is tokenised on its own (a word with no piece gets the unknown
  piece); its first piece carries the word's tag. A row holds the sentence's
  first words whose pieces fit `sequence_length`, never cutting a word off.

  Returns `(x, y, sample_weight)`: `y` the per-piece tag ids (0 where
  ignored), `sample_weight` 1 at each word's first piece, 0 elsewhere (times
  a given per-sentence weight). One sentence comes back without the batch axis.

  Args:
    tokenizer: a `RemBertTokenizer`.
    sequence_length: packed length of each row.

  Examples:
  <!-- snippet: not run: needs a `RemBertTokenizer` (a SentencePiece model) and your tagging data -->
  ```python
  preprocessor = keras_hub.models.RemBertTokenClassifierPreprocessor(
      tokenizer, sequence_length=16)
  x, y, sample_weight = preprocessor(
      [["Ann", "lives", "in", "Rome"]], [[1, 0, 0, 5]])
  ds = tf.data.Dataset.from_tensor_slices(
      (tf.ragged.constant(words), tf.ragged.constant(tags)))
  ds = ds.batch(8).map(preprocessor)
  ```
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  tokenizer_cls = rembert_tokenizer.RemBertTokenizer

  def __init__(self, tokenizer, sequence_length=128, **kwargs):
    super().__init__(**kwargs)
    self.tokenizer = tokenizer
    self.sequence_length = sequence_length

  def build(self, input_shape=None):
    # Nothing to build: the encoder reads the tokenizer's vocabulary.
    self.built = True

  def _word_pieces(self, words):
    """Flat words [N] -> their pieces, ragged [N, (pieces)], at least the
    unknown piece and at most a row's room each."""
    self.tokenizer._maybe_initialized_tf()  # pylint: disable=protected-access
    pieces = self.tokenizer._sentence_piece.tokenize(words)  # pylint: disable=protected-access
    pieces = tf.cast(pieces, "int32")
    unknown = tf.fill([tf.shape(words)[0], 1], self.tokenizer.unk_token_id)
    padded = tf.concat(
        [pieces.to_tensor(default_value=self.tokenizer.unk_token_id), unknown],
        axis=1)
    lengths = tf.minimum(tf.maximum(pieces.row_lengths(), 1),
                         self.sequence_length - 2)
    return tf.RaggedTensor.from_tensor(padded, lengths=lengths)

  def _encode(self, words, tags):
    """Ragged words [B, (W)] and tags -> token ids and labels [B, L]."""
    pieces = self._word_pieces(words.flat_values)
    lengths = pieces.row_lengths()
    # Pieces used up to each word, within its sentence.
    ends = tf.math.cumsum(lengths)
    firsts = tf.gather(tf.concat([[0], ends], 0), words.row_starts())
    within = ends - tf.repeat(firsts, words.row_lengths())
    kept = within <= self.sequence_length - 2
    sentence = words.value_rowids()
    piece_kept = tf.repeat(kept, lengths)
    piece_sentence = tf.boolean_mask(tf.repeat(sentence, lengths), piece_kept)
    batch = words.nrows()
    tokens = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(pieces.flat_values, piece_kept), piece_sentence,
        nrows=batch)
    first = tf.equal(tf.ragged.range(lengths).flat_values, 0)
    word_tags = tf.cast(tags.flat_values, "int32")
    piece_tags = tf.where(first, tf.repeat(word_tags, lengths), IGNORED_LABEL)
    labels = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(piece_tags, piece_kept), piece_sentence, nrows=batch)
    column = tf.ones([batch, 1], "int32")
    tokens = tf.concat([column * self.tokenizer.cls_token_id, tokens,
                        column * self.tokenizer.sep_token_id], axis=1)
    labels = tf.concat([column * IGNORED_LABEL, labels,
                        column * IGNORED_LABEL], axis=1)
    shape = [None, self.sequence_length]
    return (tokens.to_tensor(self.tokenizer.pad_token_id, shape=shape),
            tf.sequence_mask(tokens.row_lengths(), self.sequence_length,
                             dtype="int32"),
            labels.to_tensor(IGNORED_LABEL, shape=shape))

  @preprocessing_function
  def call(self, x, y=None, sample_weight=None):
    if isinstance(x, dict):   # already encoded
      return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    assert_tf_libs_installed(type(self).__name__)
    words = _ragged(x)
    single = words.shape.rank == 1
    if single:
      words = tf.RaggedTensor.from_tensor(words[tf.newaxis])
    tags = words.with_flat_values(tf.zeros_like(words.flat_values, "int32"))
    if y is not None:
      tags = _ragged(y)
      tags = tf.RaggedTensor.from_tensor(tags[tf.newaxis]) if single else tags
    token_ids, padding_mask, labels = self._encode(words, tags)
    x = {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
         "padding_mask": padding_mask}
    weights = tf.cast(tf.not_equal(labels, IGNORED_LABEL), "float32")
    if sample_weight is not None:
      sample_weight = tf.cast(_to_tf(sample_weight), "float32")
      weights *= sample_weight[..., tf.newaxis] if not single else (
          sample_weight)
    labels = tf.maximum(labels, 0)
    if single:
      x = {key: value[0] for key, value in x.items()}
      labels, weights = labels[0], weights[0]
    if y is None:
      return x
    return x, labels, weights

  def get_config(self):
    config = super().get_config()
    config.update(sequence_length=self.sequence_length)
    return config


def _to_tf(values):
  """A list, NumPy array or backend tensor -> a TensorFlow tensor (nested
  lists of unequal lengths -> a ragged one)."""
  if isinstance(values, (tf.Tensor, tf.RaggedTensor)):
    return values
  if isinstance(values, (list, tuple)):
    return tf.ragged.constant(values)
  return tf.convert_to_tensor(keras.ops.convert_to_numpy(values))


def _ragged(values):
  """Words or tags -> a ragged tensor of rank 2, or a dense one of rank 1
  (one sentence)."""
  values = _to_tf(values)
  if isinstance(values, tf.Tensor) and values.shape.rank == 2:
    return tf.RaggedTensor.from_tensor(values)
  return values

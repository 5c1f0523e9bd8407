"""The in-graph tagging and QA preprocessors against windowed_tasks' Python rows.

Run by keras_backends_test.py in its process with Keras 3 on JAX (this
suite's processes hold tf-keras). A BPE SentencePiece model trained
here splits words into several pieces, with accents, Cyrillic and runs of
spaces in the contexts: the preprocessors' call (one string, a batch, and
`tf.data` in graph mode) gives the first row `windowed_tasks` encodes in
Python, and the readers give one tag per word and answer texts cut from the
contexts.
"""
import io
import os

import pytest

if os.environ.get("KERAS_BACKEND") != "jax":   # before Keras 3 is imported
  pytest.skip("run by tests/keras3/keras_backends_test.py on JAX",
              allow_module_level=True)

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import sentencepiece
import tensorflow as tf

from rembert_tf.keras_hub import RemBertBackbone
from rembert_tf.keras_hub import RemBertQuestionAnswerer
from rembert_tf.keras_hub import RemBertQuestionAnswererPreprocessor
from rembert_tf.keras_hub import RemBertTokenClassifier
from rembert_tf.keras_hub import RemBertTokenClassifierPreprocessor
from rembert_tf.keras_hub import RemBertTokenizer
from rembert_tf.keras_hub import windowed_tasks
# pylint: enable=g-import-not-at-top,wrong-import-position

WORDS = [["Ann", "lives", "in", "Rome", "", "naïve"],
         ["the", "dog", "runs", "fast", "extraordinarilylongword", "мир"]]
TAGS = [[1, 0, 0, 5, 2, 3], [0, 0, 0, 0, 4, 1]]
QUESTIONS = ["where does the cat sleep?", "where does the dog run?", "who?",
             "x"]
CONTEXTS = ["the cat  sleeps on the red mat", "a dog runs in the park  "
            "Привет мир café", "Ann lives in Rome", ""]
ANSWERS = ["red mat", "Привет мир", "Ann", ""]
STARTS = [CONTEXTS[0].index(ANSWERS[0]), CONTEXTS[1].index(ANSWERS[1]), 0, 0]


@pytest.fixture(scope="module")
def tokenizer():
  model = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(CONTEXTS[:3] * 3 + ["Привет мир café naïve"]),
      model_writer=model, vocab_size=40, model_type="BPE", pad_id=0,
      unk_id=1, bos_id=-1, eos_id=-1, character_coverage=1.0,
      hard_vocab_limit=False, minloglevel=2,
      user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"])
  return RemBertTokenizer(proto=model.getvalue())


def _equal(actual, expected, what):
  np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected),
                                err_msg=what)


@pytest.mark.parametrize("sequence_length", [24, 8, 6])
def test_tagging_rows(tokenizer, sequence_length):
  preprocessor = RemBertTokenClassifierPreprocessor(
      tokenizer, sequence_length=sequence_length)
  rows = windowed_tasks.encode_tagged(preprocessor, WORDS, TAGS,
                                      split_long=False)
  weights = (rows.labels != windowed_tasks.IGNORED_LABEL).astype("float32")
  x, y, sample_weight = preprocessor(WORDS, TAGS)
  for key in ("token_ids", "segment_ids", "padding_mask"):
    _equal(x[key], rows.inputs[key], key)
  _equal(y, np.maximum(rows.labels, 0), "labels")
  _equal(sample_weight, weights, "weights")
  _equal(preprocessor(WORDS[1])["token_ids"], rows.inputs["token_ids"][1],
         "one sentence")
  dataset = tf.data.Dataset.from_tensor_slices(
      (tf.ragged.constant(WORDS), tf.ragged.constant(TAGS)))
  for row, (x, y, _) in enumerate(dataset.map(preprocessor)):
    _equal(x["token_ids"], rows.inputs["token_ids"][row], "tf.data")
    _equal(y, np.maximum(rows.labels[row], 0), "tf.data labels")
  x, _, _ = dataset.batch(2).map(preprocessor).get_single_element()
  _equal(x["token_ids"], rows.inputs["token_ids"], "tf.data batch")


@pytest.mark.parametrize("sequence_length,doc_stride",
                         [(24, 4), (16, 3), (40, 128), (12, 2)])
def test_span_rows(tokenizer, sequence_length, doc_stride):
  preprocessor = RemBertQuestionAnswererPreprocessor(
      tokenizer, sequence_length=sequence_length, doc_stride=doc_stride,
      max_query_length=5)
  for answers in (None, (STARTS, ANSWERS)):
    rows = windowed_tasks.encode_spans(
        preprocessor, QUESTIONS, CONTEXTS, *(answers or (None, None)),
        one_window_each=True)
    if answers:
      x, y = preprocessor(x=(QUESTIONS, CONTEXTS), y=answers)
      _equal(y["start_logits"], rows.start_positions, "start")
      _equal(y["end_logits"], rows.end_positions, "end")
    else:
      x = preprocessor(x=(QUESTIONS, CONTEXTS))
    for key in ("token_ids", "segment_ids", "padding_mask"):
      _equal(x[key], rows.inputs[key], key)
  first = windowed_tasks.encode_spans(preprocessor, QUESTIONS, CONTEXTS,
                                      one_window_each=True)
  _equal(preprocessor(x=(QUESTIONS[1], CONTEXTS[1]))["token_ids"],
         first.inputs["token_ids"][1], "one example")
  dataset = tf.data.Dataset.from_tensor_slices(
      ((QUESTIONS, CONTEXTS), (STARTS, ANSWERS)))
  for row, (x, y) in enumerate(dataset.map(
      lambda x, y: preprocessor(x=x, y=y))):
    _equal(x["token_ids"], rows.inputs["token_ids"][row], "tf.data")
    _equal(y["start_logits"], rows.start_positions[row], "tf.data start")


def test_an_answer_is_found_in_the_graph(tokenizer):
  """The answer pieces, cut back from the context by their character spans,
  are the answer (a check on the byte-to-character offsets)."""
  preprocessor = RemBertQuestionAnswererPreprocessor(
      tokenizer, sequence_length=40, doc_stride=128, max_query_length=5)
  x, y = preprocessor(x=(QUESTIONS[:2], CONTEXTS[:2]), y=(STARTS[:2],
                                                          ANSWERS[:2]))
  for row in range(2):
    pieces = np.asarray(x["token_ids"])[row][
        int(y["start_logits"][row]):int(y["end_logits"][row]) + 1]
    assert tokenizer.detokenize([pieces.tolist()])[0].strip() == ANSWERS[row]


def _backbone(tokenizer, length):
  return RemBertBackbone(
      vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2,
      hidden_dim=8, intermediate_dim=16, embedding_dim=4,
      max_sequence_length=length)


def test_readers_give_tags_and_answer_texts(tokenizer):
  """Long sentences and contexts are read over all their rows: a tag per
  word, an answer that is a span of its context."""
  tagger = RemBertTokenClassifier(
      _backbone(tokenizer, 8), num_classes=3,
      preprocessor=RemBertTokenClassifierPreprocessor(tokenizer,
                                                      sequence_length=8))
  tags = windowed_tasks.predict_tags(tagger, WORDS)
  assert [len(t) for t in tags] == [len(w) for w in WORDS]
  assert all(0 <= t < 3 for row in tags for t in row)
  qa = RemBertQuestionAnswerer(
      _backbone(tokenizer, 16),
      preprocessor=RemBertQuestionAnswererPreprocessor(
          tokenizer, sequence_length=16, doc_stride=3, max_query_length=5))
  answers = windowed_tasks.predict_answers(qa, QUESTIONS, CONTEXTS)
  assert len(answers) == len(QUESTIONS)
  assert all(answer in context for answer, context in zip(answers, CONTEXTS))
  logits = qa.predict(x=(QUESTIONS, CONTEXTS), verbose=0)
  assert sorted(logits) == ["end_logits", "start_logits"]
  assert logits["start_logits"].shape == (4, 16)

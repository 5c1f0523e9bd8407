"""keras-hub's own test harness on every class of rembert_tf.keras_hub: layers.

The backbone, tokenizer, preprocessors and masked-LM head (the tasks and
Hugging Face folders: harness_task_checks.py, which shares this module's
inputs). Run by keras_backends_test.py beside backend_checks.py, one process per Keras
backend (`KERAS_BACKEND`), with `REMBERT_KERAS_FIXTURES` (the tokenizer
references and the presets `rembert-convert --to keras_hub` wrote). Each test
calls a method of `keras_hub.src.tests.test_case.TestCase`, the harness
keras-hub's own models pass (`run_backbone_test`, `run_preprocessor_test`,
`run_task_test`, ...), in the shape of keras-hub's `*_test.py` files; what a
method cannot check here is skipped with the reason.
"""
import json
import os
import pathlib

import pytest

FIXTURES = os.environ.get("REMBERT_KERAS_FIXTURES")
if not FIXTURES:   # before Keras 3 is imported (this process may be tf-keras)
  pytest.skip("run by tests/keras3/keras_backends_test.py (it writes the "
              "fixtures)", allow_module_level=True)

# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import numpy as np
import tensorflow as tf  # the harness feeds preprocessors through tf.data
from keras import ops
from keras_hub.src.tests.test_case import TestCase

from rembert_tf import keras_hub as rk
# pylint: enable=g-import-not-at-top,wrong-import-position

ROOT = pathlib.Path(FIXTURES)
PRESET = str(ROOT / "presets" / "tiny")   # rembert-convert --to keras_hub
PROTO = str(ROOT / "presets" / "tiny" / "assets" / "tokenizer" /
            "vocabulary.spm")
TOKENIZERS = json.loads((ROOT / "tokenizers.json").read_text(encoding="utf-8"))
SENTENCES = ["the cat sleeps on the red mat", "a dog runs in the park"]
WORDS = [["Ann", "lives", "in", "Rome"], ["the", "dog", "runs", "fast"]]
TAGS = [[1, 0, 0, 5], [0, 0, 0, 0]]
QUESTIONS = ["where does the cat sleep?", "where does the dog run?"]
CONTEXTS = ["the cat sleeps on the red mat", "a dog runs in the park"]
ANSWERS = ["red mat", "the park"]
ANSWER_STARTS = [c.index(a) for c, a in zip(CONTEXTS, ANSWERS)]


def make_tokenizer():
  return rk.RemBertTokenizer(proto=PROTO)


def make_backbone(vocabulary_size, embedding_dim=8, hidden_dim=8,
              max_sequence_length=16):
  """The tasks' backbone: one block (RemBertBackboneTest stacks two; a task
  only needs the backbone's outputs, and each block adds to every trace)."""
  return rk.RemBertBackbone(
      vocabulary_size=vocabulary_size, num_layers=1, num_heads=2,
      hidden_dim=hidden_dim, intermediate_dim=16, embedding_dim=embedding_dim,
      max_sequence_length=max_sequence_length)


class RemBertBackboneTest(TestCase):
  """Two widths, with the E_in -> hidden projection and without it."""

  def _input_data(self):
    return {"token_ids": ops.ones((2, 5), dtype="int32"),
            "segment_ids": ops.zeros((2, 5), dtype="int32"),
            "padding_mask": ops.ones((2, 5), dtype="int32")}

  def _init_kwargs(self, embedding_dim, hidden_dim):
    return dict(vocabulary_size=10, num_layers=2, num_heads=2,
                hidden_dim=hidden_dim, intermediate_dim=2 * hidden_dim,
                embedding_dim=embedding_dim, max_sequence_length=5)

  def _run(self, embedding_dim, hidden_dim):
    init_kwargs = self._init_kwargs(embedding_dim, hidden_dim)
    # Precision and quantization: test_precision_and_quantization; saving:
    # test_saved_model.
    self.run_backbone_test(
        cls=rk.RemBertBackbone, init_kwargs=init_kwargs,
        input_data=self._input_data(),
        expected_output_shape={"sequence_output": (2, 5, hidden_dim),
                               "pooled_output": (2, hidden_dim)},
        run_mixed_precision_check=False, run_quantization_check=False)
    backbone = rk.RemBertBackbone(**init_kwargs)
    self.assertEqual(backbone.embeddings_projection is None,
                     embedding_dim == hidden_dim)

  def test_backbone_with_input_projection(self):
    self._run(embedding_dim=4, hidden_dim=8)

  def test_backbone_same_width_without_projection(self):
    self._run(embedding_dim=6, hidden_dim=6)

  def test_saved_model(self):
    """A `.keras` save and load, at both widths."""
    for embedding_dim, hidden_dim in ((4, 8), (6, 6)):
      self.run_model_saving_test(
          cls=rk.RemBertBackbone,
          init_kwargs=self._init_kwargs(embedding_dim, hidden_dim),
          input_data=self._input_data())

  def test_precision_and_quantization(self):
    """run_backbone_test's mixed-precision and int8 / float8 checks, on the
    backbone with the E_in -> hidden projection: it holds every layer the
    same-width one has, and the projection (each policy and mode costs
    fresh kernels, the longest check on JAX)."""
    init_kwargs = self._init_kwargs(embedding_dim=4, hidden_dim=8)
    self.run_precision_test(rk.RemBertBackbone, init_kwargs,
                            self._input_data())
    self.run_quantization_test(rk.RemBertBackbone(**init_kwargs),
                               rk.RemBertBackbone, init_kwargs,
                               self._input_data())

  def test_converted_preset(self):
    """The preset `rembert-convert --to keras_hub` wrote, against the
    project's TensorFlow encoder."""
    reference = np.load(ROOT / "reference_tiny.npz")
    input_data = {"token_ids": reference["ids"],
                  "segment_ids": reference["types"],
                  "padding_mask": reference["mask"]}
    self.run_preset_test(
        cls=rk.RemBertBackbone, preset=PRESET, input_data=input_data,
        expected_output_shape={"sequence_output": (3, 20, 32),
                               "pooled_output": (3, 32)})
    # The harness compares to 1e-6; two frameworks' float32 kernels agree
    # to a few 1e-6.
    outputs = rk.RemBertBackbone.from_preset(PRESET)(input_data)
    for key in ("sequence_output", "pooled_output"):
      self.assertAllClose(outputs[key], reference[key], atol=1e-5, rtol=0)


class RemBertTokenizerTest(TestCase):

  def test_tokenizer_basics(self):
    texts = [TOKENIZERS["texts"][0], TOKENIZERS["texts"][2]]
    self.run_preprocessing_layer_test(
        cls=rk.RemBertTokenizer, init_kwargs={"proto": PROTO},
        input_data=texts,
        expected_output=[TOKENIZERS["project"]["pieces"][0],
                         TOKENIZERS["project"]["pieces"][2]])

  def test_converted_preset(self):
    self.run_preset_test(
        cls=rk.RemBertTokenizer, preset=PRESET,
        input_data=TOKENIZERS["texts"][:3],
        expected_output=TOKENIZERS["project"]["pieces"][:3])

  def test_errors_without_special_pieces(self):
    released = ROOT / "presets" / "released" / "assets" / "tokenizer"
    proto = (released / "vocabulary.spm").read_bytes()
    with self.assertRaisesRegex(ValueError, "no \\[CLS\\] piece"):
      rk.RemBertTokenizer(proto=proto.replace(b"[CLS]", b"[XLS]"))


class RemBertTextClassifierPreprocessorTest(TestCase):

  def setUp(self):
    self.init_kwargs = {"tokenizer": make_tokenizer(), "sequence_length": 24}

  def _expected(self, kind, rows):
    saved = TOKENIZERS["project"]
    return {"token_ids": [saved[f"{kind}_input_word_ids"][r] for r in rows],
            "segment_ids": [saved[f"{kind}_input_type_ids"][r] for r in rows],
            "padding_mask": [[bool(v) for v in saved[f"{kind}_input_mask"][r]]
                             for r in rows]}

  def test_single_segment(self):
    texts = TOKENIZERS["texts"]
    self.run_preprocessor_test(
        cls=rk.RemBertTextClassifierPreprocessor,
        init_kwargs=self.init_kwargs,
        input_data=([texts[0], texts[2]], [1, 0], [1.0, 0.5]),
        expected_output=(self._expected("single", [0, 2]), [1, 0], [1.0, 0.5]))

  def test_segment_pairs(self):
    texts = TOKENIZERS["texts"]
    seconds = texts[3:] + texts[:3]
    self.run_preprocessor_test(
        cls=rk.RemBertTextClassifierPreprocessor,
        init_kwargs=self.init_kwargs,
        input_data=(([texts[0], texts[2]], [seconds[0], seconds[2]]), [2, 1]),
        expected_output=(self._expected("pair", [0, 2]), [2, 1]))

  def test_converted_preset(self):
    self.run_preset_test(
        cls=rk.RemBertTextClassifierPreprocessor, preset=PRESET,
        init_kwargs={"sequence_length": 24},
        input_data=([TOKENIZERS["texts"][0], TOKENIZERS["texts"][2]],),
        expected_output=self._expected("single", [0, 2]))


class RemBertMaskedLMPreprocessorTest(TestCase):

  def test_preprocessor_basics(self):
    tokenizer = make_tokenizer()
    text = ["the cat sleeps"]
    ids = [int(i) for i in tokenizer(text)[0]]
    n = len(ids)
    mask = tokenizer.mask_token_id
    cls, sep, pad = (tokenizer.cls_token_id, tokenizer.sep_token_id,
                     tokenizer.pad_token_id)
    # Every piece masked (the selection is random below that).
    self.init_kwargs = {"tokenizer": tokenizer, "mask_selection_rate": 1.0,
                        "mask_token_rate": 1.0, "random_token_rate": 0.0,
                        "mask_selection_length": n, "sequence_length": n + 4}
    self.run_preprocessor_test(
        cls=rk.RemBertMaskedLMPreprocessor, init_kwargs=self.init_kwargs,
        input_data=text,
        expected_output=(
            {"token_ids": [[cls] + [mask] * n + [sep, pad, pad]],
             "segment_ids": [[0] * (n + 4)],
             "padding_mask": [[1] * (n + 2) + [0] * 2],
             "mask_positions": [list(range(1, n + 1))]},
            [ids], [[1.0] * n]))


class RemBertMaskedLMHeadTest(TestCase):

  def test_layer_behaviors(self):
    self.run_layer_test(
        cls=rk.RemBertMaskedLMHead,
        init_kwargs={"vocabulary_size": 50, "output_embedding_dim": 12},
        input_data={"inputs": keras.random.uniform(shape=(4, 10, 16)),
                    "mask_positions": keras.random.randint(
                        minval=0, maxval=10, shape=(4, 5))},
        expected_output_shape=(4, 5, 50),
        # transform kernel and bias, LayerNorm scale and offset, the E_out
        # output embedding, the output bias.
        expected_num_trainable_weights=6)


def masked_lm_preprocessor(tokenizer, sequence_length=10):
  """Every piece masked: deterministic (the selection is random below)."""
  return rk.RemBertMaskedLMPreprocessor(
      tokenizer, mask_selection_rate=1.0, mask_token_rate=1.0,
      random_token_rate=0.0, mask_selection_length=sequence_length - 2,
      sequence_length=sequence_length)


def qa_preprocessor(tokenizer, sequence_length=24):
  return rk.RemBertQuestionAnswererPreprocessor(
      tokenizer, sequence_length=sequence_length, doc_stride=4,
      max_query_length=8)


class RemBertTokenClassifierPreprocessorTest(TestCase):

  def setUp(self):
    self.tokenizer = make_tokenizer()
    self.init_kwargs = {"tokenizer": self.tokenizer, "sequence_length": 24}

  def _expected(self, length):
    """[CLS] pieces of each word [SEP] padding; a word's tag at its first
    piece (weight 1), 0 with weight 0 elsewhere."""
    t = self.tokenizer
    expected = {"token_ids": [], "padding_mask": [], "labels": [],
                "weights": []}
    for words, tags in zip(WORDS, TAGS):
      ids, labels, weights = [t.cls_token_id], [0], [0.0]
      for pieces, tag in zip(t.piece_ids(words), tags):
        ids += pieces
        labels += [tag] + [0] * (len(pieces) - 1)
        weights += [1.0] + [0.0] * (len(pieces) - 1)
      ids.append(t.sep_token_id)
      pad = length - len(ids)
      expected["token_ids"].append(ids + [t.pad_token_id] * pad)
      expected["padding_mask"].append([1] * len(ids) + [0] * pad)
      expected["labels"].append(labels + [0] * (pad + 1))
      expected["weights"].append(weights + [0.0] * (pad + 1))
    return expected

  def test_preprocessor_basics(self):
    e = self._expected(24)
    self.run_preprocessor_test(
        cls=rk.RemBertTokenClassifierPreprocessor,
        init_kwargs=self.init_kwargs, input_data=(WORDS, TAGS),
        expected_output=(
            {"token_ids": e["token_ids"], "segment_ids": [[0] * 24] * 2,
             "padding_mask": e["padding_mask"]}, e["labels"], e["weights"]))

  def test_one_sentence_is_not_a_batch(self):
    preprocessor = rk.RemBertTokenClassifierPreprocessor(**self.init_kwargs)
    e = self._expected(24)
    for words in (WORDS[0], tf.constant(WORDS[0])):
      x = preprocessor(words)
      self.assertAllEqual(x["token_ids"], e["token_ids"][0])
    x, y, weights = next(iter(tf.data.Dataset.from_tensor_slices(
        (WORDS, TAGS)).map(preprocessor)))
    self.assertAllEqual(x["token_ids"], e["token_ids"][0])
    self.assertAllEqual(y, e["labels"][0])
    self.assertAllEqual(weights, e["weights"][0])


class RemBertQuestionAnswererPreprocessorTest(TestCase):

  def setUp(self):
    self.init_kwargs = {"tokenizer": make_tokenizer(), "sequence_length": 24,
                        "doc_stride": 4, "max_query_length": 8}

  def test_preprocessor_basics(self):
    tokenizer = self.init_kwargs["tokenizer"]
    x, y = self.run_preprocessor_test(
        cls=rk.RemBertQuestionAnswererPreprocessor,
        init_kwargs=self.init_kwargs,
        input_data=((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ANSWERS)))
    token_ids = ops.convert_to_numpy(x["token_ids"])
    starts = ops.convert_to_numpy(y["start_logits"])
    ends = ops.convert_to_numpy(y["end_logits"])
    for row, answer in enumerate(ANSWERS):
      query = tokenizer.piece_ids([QUESTIONS[row]])[0][:8]
      self.assertEqual(token_ids[row, :len(query) + 2].tolist(),
                       [tokenizer.cls_token_id] + query
                       + [tokenizer.sep_token_id])
      self.assertGreater(starts[row], len(query) + 1)
      answer_ids = token_ids[row, starts[row]:ends[row] + 1].tolist()
      self.assertEqual(tokenizer.detokenize([answer_ids])[0].strip(), answer)

  def test_one_example_is_not_a_batch(self):
    preprocessor = qa_preprocessor(make_tokenizer())
    # x=: keras-hub reads a positional 2-tuple as (x, y).
    batch = preprocessor(x=(QUESTIONS, CONTEXTS))
    one = preprocessor(x=(QUESTIONS[1], CONTEXTS[1]))
    self.assertEqual(tuple(one["token_ids"].shape), (24,))
    self.assertAllEqual(one["token_ids"], batch["token_ids"][1])
    graph = next(iter(tf.data.Dataset.from_tensor_slices(
        (QUESTIONS, CONTEXTS)).skip(1).map(lambda q, c: preprocessor(x=(q, c)))))
    self.assertAllEqual(graph["token_ids"], batch["token_ids"][1])

"""keras-hub's own test harness on every class of rembert_tf.keras_hub: tasks.

The tasks (`run_task_test`, `run_model_saving_test`, `save_to_preset` round
trips) and Hugging Face folders through `from_preset`; the inputs and
fixtures are harness_checks.py's. Run by keras_backends_test.py, one process
per Keras backend.
"""
import os

import pytest

if not os.environ.get("REMBERT_KERAS_FIXTURES"):   # before Keras 3 is imported
  pytest.skip("run by tests/keras3/keras_backends_test.py (it writes the "
              "fixtures)", allow_module_level=True)

# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import numpy as np
from keras_hub.src.tests.test_case import TestCase

from harness_checks import ANSWER_STARTS
from harness_checks import ANSWERS
from harness_checks import CONTEXTS
from harness_checks import PRESET
from harness_checks import QUESTIONS
from harness_checks import ROOT
from harness_checks import SENTENCES
from harness_checks import TAGS
from harness_checks import WORDS
from harness_checks import make_backbone
from harness_checks import make_tokenizer
from harness_checks import masked_lm_preprocessor
from harness_checks import qa_preprocessor
from rembert_tf import keras_hub as rk
# pylint: enable=g-import-not-at-top,wrong-import-position


class RemBertMaskedLMTest(TestCase):

  def setUp(self):
    tokenizer = make_tokenizer()
    self.preprocessor = masked_lm_preprocessor(tokenizer)
    self.backbone = make_backbone(tokenizer.vocabulary_size(), embedding_dim=4)
    self.init_kwargs = {"preprocessor": self.preprocessor,
                        "backbone": self.backbone,
                        "output_embedding_dim": 6}
    self.train_data = (SENTENCES,)
    self.input_data = self.preprocessor(*self.train_data)[0]

  def test_masked_lm_basics(self):
    self.run_task_test(
        cls=rk.RemBertMaskedLM, init_kwargs=self.init_kwargs,
        train_data=self.train_data,
        expected_output_shape=(2, 8, self.backbone.vocabulary_size))

  def test_saved_model(self):
    self.run_model_saving_test(cls=rk.RemBertMaskedLM,
                               init_kwargs=self.init_kwargs,
                               input_data=self.input_data)

  def test_converted_preset(self):
    reference = np.load(ROOT / "reference_tiny.npz")
    input_data = {"token_ids": reference["ids"],
                  "segment_ids": reference["types"],
                  "padding_mask": reference["mask"],
                  "mask_positions": reference["positions"]}
    self.run_preset_test(cls=rk.RemBertMaskedLM, preset=PRESET,
                         input_data=input_data,
                         expected_output_shape=reference["mlm_logits"].shape)
    self.assertAllClose(rk.RemBertMaskedLM.from_preset(PRESET)(input_data),
                        reference["mlm_logits"], atol=1e-5, rtol=0)


class RemBertTextClassifierTest(TestCase):

  def setUp(self):
    tokenizer = make_tokenizer()
    self.preprocessor = rk.RemBertTextClassifierPreprocessor(
        tokenizer, sequence_length=10)
    self.backbone = make_backbone(tokenizer.vocabulary_size())
    self.init_kwargs = {"preprocessor": self.preprocessor,
                        "backbone": self.backbone, "num_classes": 3}
    self.train_data = (SENTENCES, [2, 0])
    self.input_data = self.preprocessor(*self.train_data)[0]

  def test_classifier_basics(self):
    self.run_task_test(cls=rk.RemBertTextClassifier,
                       init_kwargs=self.init_kwargs,
                       train_data=self.train_data, expected_output_shape=(2, 3))

  def test_saved_model(self):
    self.run_model_saving_test(cls=rk.RemBertTextClassifier,
                               init_kwargs=self.init_kwargs,
                               input_data=self.input_data)

  def test_save_to_preset_round_trip(self):
    _preset_round_trip(self, rk.RemBertTextClassifier(**self.init_kwargs),
                       self.train_data[0])


def _preset_round_trip(test, task, raw_inputs):
  """`save_to_preset` then `from_preset`: the same class, weights and
  predictions on raw inputs (the preprocessor comes back too)."""
  path = os.path.join(test.get_temp_dir(), type(task).__name__)
  task.save_to_preset(path)
  restored = type(task).from_preset(path)
  test.assertIsInstance(restored, type(task))
  test.assertIsInstance(restored.preprocessor, type(task.preprocessor))
  test.assertEqual(len(restored.weights), len(task.weights))
  test.assertAllClose(task.predict(raw_inputs, verbose=0),
                      restored.predict(raw_inputs, verbose=0))


class RemBertTokenClassifierTest(TestCase):

  def setUp(self):
    tokenizer = make_tokenizer()
    self.preprocessor = rk.RemBertTokenClassifierPreprocessor(
        tokenizer, sequence_length=16)
    self.backbone = make_backbone(tokenizer.vocabulary_size())
    self.init_kwargs = {"preprocessor": self.preprocessor,
                        "backbone": self.backbone, "num_classes": 7}
    self.train_data = (WORDS, TAGS)
    self.input_data = self.preprocessor(*self.train_data)[0]

  def test_token_classifier_basics(self):
    self.run_task_test(cls=rk.RemBertTokenClassifier,
                       init_kwargs=self.init_kwargs,
                       train_data=self.train_data,
                       expected_output_shape=(2, 16, 7))

  def test_saved_model(self):
    self.run_model_saving_test(cls=rk.RemBertTokenClassifier,
                               init_kwargs=self.init_kwargs,
                               input_data=self.input_data)

  def test_save_to_preset_round_trip(self):
    _preset_round_trip(self, rk.RemBertTokenClassifier(**self.init_kwargs),
                       WORDS)


class RemBertQuestionAnswererTest(TestCase):

  def setUp(self):
    tokenizer = make_tokenizer()
    self.preprocessor = qa_preprocessor(tokenizer)
    self.backbone = make_backbone(tokenizer.vocabulary_size(),
                              max_sequence_length=24)
    self.init_kwargs = {"preprocessor": self.preprocessor,
                        "backbone": self.backbone}
    self.train_data = ((QUESTIONS, CONTEXTS), (ANSWER_STARTS, ANSWERS))
    self.input_data = self.preprocessor(*self.train_data)[0]

  def test_question_answerer_basics(self):
    self.run_task_test(
        cls=rk.RemBertQuestionAnswerer, init_kwargs=self.init_kwargs,
        train_data=self.train_data,
        expected_output_shape={"start_logits": (2, 24), "end_logits": (2, 24)})

  def test_fits_and_predicts_raw_strings(self):
    qa = rk.RemBertQuestionAnswerer(**self.init_kwargs)
    qa.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = qa.fit(x=(QUESTIONS, CONTEXTS), y=(ANSWER_STARTS, ANSWERS),
                     batch_size=2, epochs=8, verbose=0)
    losses = history.history["loss"]
    self.assertLess(losses[-1], losses[0])
    logits = qa.predict((QUESTIONS, CONTEXTS), verbose=0)
    one = qa.predict(x=(QUESTIONS[:1], CONTEXTS[:1]), verbose=0)
    for key in ("start_logits", "end_logits"):
      self.assertEqual(tuple(logits[key].shape), (2, 24))
      self.assertAllClose(one[key][0], logits[key][0], atol=1e-5, rtol=0)

  def test_saved_model(self):
    self.run_model_saving_test(cls=rk.RemBertQuestionAnswerer,
                               init_kwargs=self.init_kwargs,
                               input_data=self.input_data)

  def test_save_to_preset_round_trip(self):
    _preset_round_trip(self, rk.RemBertQuestionAnswerer(**self.init_kwargs),
                       (QUESTIONS, CONTEXTS))


class RemBertMaskedLMPresetTest(TestCase):

  def test_save_to_preset_round_trip(self):
    tokenizer = make_tokenizer()
    masked_lm = rk.RemBertMaskedLM(
        make_backbone(tokenizer.vocabulary_size(), embedding_dim=4),
        output_embedding_dim=6,
        preprocessor=masked_lm_preprocessor(tokenizer))
    _preset_round_trip(self, masked_lm, SENTENCES)


class RemBertTransformersCheckpointTest(TestCase):
  """Hugging Face folders (`rembert-convert --to hf`) through `from_preset`,
  against the presets `rembert-convert --to keras_hub` wrote from the same
  weights. Folders transformers itself writes (E_in < hidden), the backbone
  and the masked LM against transformers' outputs, are
  transformers_folders_checks.py's; here what those do not reach: a same-width
  folder, the tasks, keras-hub's preset harness, the reads."""

  HF = {"tiny": ROOT / "sources" / "tiny_hf",             # E_in < hidden, MLM
        "same_width": ROOT / "sources" / "same_width"}    # encoder only

  def _inputs(self, name):
    reference = np.load(ROOT / f"reference_{name}.npz")
    return {"token_ids": reference["ids"], "segment_ids": reference["types"],
            "padding_mask": reference["mask"]}, reference["positions"]

  def test_same_width_backbone_equals_converted_preset(self):
    inputs, _ = self._inputs("same_width")
    loaded = rk.RemBertBackbone.from_preset(str(self.HF["same_width"]))
    converted = rk.RemBertBackbone.from_preset(
        str(ROOT / "presets" / "same_width"))
    self.assertEqual({**loaded.get_config(), "name": ""},
                     {**converted.get_config(), "name": ""})
    for a, b in zip(loaded.weights, converted.weights):
      self.assertAllClose(a, b, atol=0, rtol=0)
    self.assertAllClose(loaded(inputs), converted(inputs), atol=1e-6, rtol=0)

  def test_tasks(self):
    inputs, _ = self._inputs("tiny")
    folder, preset = str(self.HF["tiny"]), str(ROOT / "presets" / "tiny")
    converted = rk.RemBertBackbone.from_preset(preset)
    classifier = rk.RemBertTextClassifier.from_preset(folder, num_classes=2)
    self.assertAllEqual(
        classifier.preprocessor(SENTENCES)["token_ids"],
        rk.RemBertTextClassifierPreprocessor.from_preset(
            preset, sequence_length=32)(SENTENCES)["token_ids"])
    self.assertEqual(tuple(classifier.predict(SENTENCES, verbose=0).shape),
                     (2, 2))
    # A head the folder does not hold is drawn at random, not left at the
    # zeros the loaded weights start from.
    self.assertGreater(float(np.std(keras.ops.convert_to_numpy(
        classifier.output_dense.kernel))), 0.0)
    qa = rk.RemBertQuestionAnswerer.from_preset(folder)
    self.assertAllClose(qa.backbone(inputs), converted(inputs),
                        atol=1e-6, rtol=0)

  def test_preset_harness_on_the_folder(self):
    inputs, _ = self._inputs("tiny")
    self.run_preset_test(
        cls=rk.RemBertBackbone, preset=str(self.HF["tiny"]),
        input_data=inputs,
        expected_output_shape={"sequence_output": (3, 20, 32),
                               "pooled_output": (3, 32)})

  def test_each_tensor_read_through_its_own_mapping(self):
    """safetensors keeps a memory map's pages resident until it is closed:
    every tensor is read through a mapping opened for it and closed before
    the next, so loading never holds a second copy of the model."""
    from keras_hub.src.utils.transformers import safetensor_utils  # pylint: disable=g-import-not-at-top
    opened, events = [0], []
    real_open = safetensor_utils.safetensors.safe_open

    class Counted:
      def __init__(self, *args, **kwargs):
        self._file = real_open(*args, **kwargs)

      def __enter__(self):
        opened[0] += 1
        events.append(("open", opened[0]))
        return self._file.__enter__()

      def __exit__(self, *exc):
        opened[0] -= 1
        return self._file.__exit__(*exc)

    safetensor_utils.safetensors.safe_open = Counted
    try:
      masked_lm = rk.RemBertMaskedLM.from_preset(str(self.HF["tiny"]))
    finally:
      safetensor_utils.safetensors.safe_open = real_open
    self.assertEqual(opened[0], 0)
    self.assertEqual(max(depth for _, depth in events), 1)
    # One mapping per weight: the backbone's and the head's.
    self.assertGreaterEqual(len(events), len(masked_lm.weights))

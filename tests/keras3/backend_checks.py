"""Checks of rembert_tf.keras_hub on the Keras backend of this process.

Run by keras_backends_test.py, one process per backend (`KERAS_BACKEND`),
with `REMBERT_KERAS_FIXTURES` (presets, references of the project's
TensorFlow code, XTREME inputs) and `REMBERT_KERAS_OUTPUT` (where the parity
figures, losses and XTREME predictions go; that test scores them). Keras 3
and keras-hub only: no tf-keras, none of the project's TensorFlow modules.
"""
import functools
import json
import os
import pathlib
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf  # tf.data: what keras-hub's fit maps preprocessing on

from rembert_tf import keras_hub as rk
from rembert_tf.keras_hub import windowed_tasks

FIXTURES = os.environ.get("REMBERT_KERAS_FIXTURES")
OUTPUT = os.environ.get("REMBERT_KERAS_OUTPUT")
if not (FIXTURES and OUTPUT):
  pytest.skip("run by tests/keras3/keras_backends_test.py (it writes the "
              "fixtures)", allow_module_level=True)
ROOT, OUT = pathlib.Path(FIXTURES), pathlib.Path(OUTPUT)
PRESETS = ROOT / "presets"


def _preset(name) -> str:
  return str(PRESETS / name)   # keras-hub takes preset paths as str
XTREME = json.loads((ROOT / "xtreme.json").read_text(encoding="utf-8"))


def _report(section, key, value):
  path = OUT / "report.json"
  report = json.loads(path.read_text()) if path.exists() else {}
  report.setdefault(section, {})[key] = value
  path.write_text(json.dumps(report, indent=2))


def _backbone_inputs(reference):
  return {"token_ids": reference["ids"], "segment_ids": reference["types"],
          "padding_mask": reference["mask"]}


def _max_error(actual, expected):
  return float(np.max(np.abs(keras.ops.convert_to_numpy(actual) - expected)))


def test_imports_keras_3_only():
  """rembert_tf.keras_hub (imported above) brings neither tf-keras nor Model
  Garden nor the project's tf-keras modeling code."""
  loaded = [m for m in sys.modules if m == "tf_keras" or m.startswith(
      ("tf_keras.", "official.", "rembert_tf.modeling"))]
  assert not loaded, loaded


@pytest.mark.parametrize("name", ["tiny", "released", "same_width"])
def test_backbone_equals_tensorflow_encoder(name):
  reference = np.load(ROOT / f"reference_{name}.npz")
  backbone = rk.RemBertBackbone.from_preset(_preset(name))
  outputs = backbone(_backbone_inputs(reference))
  errors = {key: _max_error(outputs[key], reference[key])
            for key in ("sequence_output", "pooled_output")}
  _report("parity", name, errors)
  assert max(errors.values()) <= 1e-5, errors
  assert backbone.embeddings_projection is None or name != "same_width"


def test_missing_pooler_starts_fresh():
  """An input without the pooler (--allow_missing_pooler): the rest as
  converted, the pooler freshly initialised."""
  reference = np.load(ROOT / "reference_same_width.npz")
  backbone = rk.RemBertBackbone.from_preset(_preset("no_pooler"))
  outputs = backbone(_backbone_inputs(reference))
  assert _max_error(outputs["sequence_output"],
                    reference["sequence_output"]) <= 1e-5
  kernel = keras.ops.convert_to_numpy(backbone.pooled_dense.kernel)
  assert 0.01 < np.std(kernel) < 0.03   # truncated normal, stddev 0.02
  assert not np.any(keras.ops.convert_to_numpy(backbone.pooled_dense.bias))


@pytest.mark.parametrize("name", ["tiny", "released"])
def test_masked_lm_equals_tensorflow_pretrainer(name):
  reference = np.load(ROOT / f"reference_{name}.npz")
  masked_lm = rk.RemBertMaskedLM.from_preset(_preset(name))
  logits = masked_lm({**_backbone_inputs(reference),
                      "mask_positions": reference["positions"]})
  error = _max_error(logits, reference["mlm_logits"])
  _report("parity", f"{name}_mlm", {"mlm_logits": error})
  assert error <= 1e-5
  assert masked_lm.masked_lm_head.output_embedding.shape == (
      reference["mlm_logits"].shape[-1], 48)


@pytest.mark.parametrize("preset,layout", [("released", "released"),
                                           ("tiny", "project")])
def test_tokenizer_and_packing_equal_the_saved_model(preset, layout):
  expected = json.loads((ROOT / "tokenizers.json").read_text(encoding="utf-8"))
  texts, length = expected["texts"], expected["seq_length"]
  saved = expected[layout]
  tokenizer = rk.RemBertTokenizer.from_preset(_preset(preset))
  assert [list(map(int, ids)) for ids in tokenizer(texts)] == saved["pieces"]
  assert tokenizer.piece_ids(texts) == saved["pieces"]
  if layout == "released":
    assert (tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.mask_token_id, tokenizer.pad_token_id) == (312, 313, 314, 0)
  preprocessor = rk.RemBertTextClassifierPreprocessor.from_preset(
      _preset(preset), sequence_length=length)
  seconds = texts[3:] + texts[:3]
  for kind, x in (("single", texts), ("pair", (texts, seconds))):
    # x=: keras-hub reads a positional 2-tuple as (x, y).
    eager = preprocessor(x=x)
    graph = next(iter(tf.data.Dataset.from_tensor_slices(x).batch(
        len(texts)).map(lambda *segments: preprocessor(x=segments))))
    for packed in (eager, graph):
      np.testing.assert_array_equal(packed["token_ids"],
                                    saved[f"{kind}_input_word_ids"])
      np.testing.assert_array_equal(packed["segment_ids"],
                                    saved[f"{kind}_input_type_ids"])
      np.testing.assert_array_equal(
          np.asarray(packed["padding_mask"]).astype(int),
          saved[f"{kind}_input_mask"])


def _xtreme_preset(cls, **kwargs):
  return cls.from_preset(_preset("xtreme"), **kwargs)


def test_tagging_rows_equal_the_project_records():
  preprocessor = _xtreme_preset(rk.RemBertTokenClassifierPreprocessor,
                                sequence_length=XTREME["tagging_length"])
  words, tags = zip(*XTREME["panx_train"])
  features = windowed_tasks.encode_tagged(preprocessor, words, tags)
  records = XTREME["records"]["panx_train"]
  np.testing.assert_array_equal(features.inputs["token_ids"],
                                records["input_word_ids"])
  np.testing.assert_array_equal(features.inputs["padding_mask"],
                                records["input_mask"])
  np.testing.assert_array_equal(features.labels, records["label_ids"])
  dev = windowed_tasks.encode_tagged(preprocessor, XTREME["panx_dev"]["en"])
  np.testing.assert_array_equal(dev.inputs["token_ids"],
                                XTREME["records"]["panx_dev_en"]["input_word_ids"])


def _span_preprocessor():
  return _xtreme_preset(rk.RemBertQuestionAnswererPreprocessor,
                        sequence_length=XTREME["span_length"],
                        doc_stride=XTREME["doc_stride"],
                        max_query_length=XTREME["max_query_length"])


def test_span_windows_equal_the_project_records():
  preprocessor = _span_preprocessor()
  questions, contexts, starts, answers = zip(*XTREME["squad_train"])
  train = windowed_tasks.encode_spans(preprocessor, questions, contexts,
                                      starts, answers)
  records = XTREME["records"]["squad_train"]
  assert len(train.windows) > len(questions)   # contexts span windows
  for key, actual in (("input_word_ids", train.inputs["token_ids"]),
                      ("input_type_ids", train.inputs["segment_ids"]),
                      ("start_position", train.start_positions[:, None]),
                      ("end_position", train.end_positions[:, None])):
    np.testing.assert_array_equal(actual, records[key], err_msg=key)
  _, questions, contexts = zip(*XTREME["xquad_test"]["zh"])
  test = windowed_tasks.encode_spans(preprocessor, questions, contexts)
  np.testing.assert_array_equal(
      test.inputs["token_ids"],
      XTREME["records"]["xquad_test_zh"]["input_word_ids"])


def _fit(model, *args, epochs, **kwargs):
  history = model.fit(*args, epochs=epochs, verbose=0, **kwargs)
  return history.history["loss"]


@pytest.fixture(autouse=True)
def _seeded():
  """Seeds before anything is built: seeding TensorFlow later clears its
  kernel caches, and with them the tensorflow-text SentencePiece resource a
  tokenizer already holds."""
  keras.utils.set_random_seed(0)


def test_text_classifier_fine_tunes_from_the_preset(tmp_path):
  first, second, labels = zip(*XTREME["xnli_train"])
  first, second, labels = list(first), list(second), np.array(labels)
  preprocessor = _xtreme_preset(rk.RemBertTextClassifierPreprocessor,
                                sequence_length=32)
  classifier = _xtreme_preset(rk.RemBertTextClassifier, num_classes=3,
                              preprocessor=preprocessor)
  classifier.compile(optimizer=keras.optimizers.Adam(3e-3))
  losses = _fit(classifier, x=(first, second), y=labels, batch_size=4,
                epochs=6)
  _report("losses", "text_classifier", [losses[0], losses[-1]])
  assert losses[-1] < losses[0], losses
  classifier.save_to_preset(str(tmp_path / "classifier"))
  restored = rk.RemBertTextClassifier.from_preset(str(tmp_path / "classifier"))
  for saved, loaded in zip(classifier.weights, restored.weights):
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded),
                                  keras.ops.convert_to_numpy(saved))
  np.testing.assert_array_equal(
      restored.preprocessor(x=(first, second))["token_ids"],
      classifier.preprocessor(x=(first, second))["token_ids"])


def _by_language(inputs: dict, predict):
  """predict(all inputs) split back by language: one predict call, so one
  compiled shape set for every language."""
  flat = [row for rows in inputs.values() for row in rows]
  outputs, start = predict(flat), 0
  for lang, rows in inputs.items():
    yield lang, outputs[start:start + len(rows)]
    start += len(rows)


def test_token_classifier_runs_panx():
  words, tags = zip(*XTREME["panx_train"])
  tagger = _xtreme_preset(
      rk.RemBertTokenClassifier, num_classes=len(XTREME["labels"]),
      preprocessor=_xtreme_preset(rk.RemBertTokenClassifierPreprocessor,
                                  sequence_length=XTREME["tagging_length"]))
  tagger.compile(optimizer=keras.optimizers.Adam(3e-3))
  features = windowed_tasks.encode_tagged(tagger.preprocessor, words, tags)
  losses = _fit(tagger, features.inputs, np.maximum(features.labels, 0),
                sample_weight=(features.labels >= 0).astype("float32"),
                batch_size=6, epochs=30)
  _report("losses", "token_classifier", [losses[0], losses[-1]])
  assert losses[-1] < losses[0], losses
  folder = OUT / "predictions" / "panx"
  folder.mkdir(parents=True, exist_ok=True)
  for lang, predicted in _by_language(XTREME["panx_dev"],
                                      functools.partial(
                                          windowed_tasks.predict_tags, tagger)):
    (folder / f"dev-{lang}.tsv").write_text("".join(
        "".join(XTREME["labels"][t] + "\n" for t in row) + "\n"
        for row in predicted), encoding="utf-8")


def test_question_answerer_runs_xquad():
  questions, contexts, starts, answers = zip(*XTREME["squad_train"])
  qa = _xtreme_preset(rk.RemBertQuestionAnswerer,
                      preprocessor=_span_preprocessor())
  qa.compile(optimizer=keras.optimizers.Adam(3e-3))
  features = windowed_tasks.encode_spans(qa.preprocessor, questions, contexts,
                                         starts, answers)
  losses = _fit(qa, features.inputs,
                {"start_logits": features.start_positions,
                 "end_logits": features.end_positions},
                batch_size=8, epochs=30)
  _report("losses", "question_answerer", [losses[0], losses[-1]])
  assert losses[-1] < losses[0], losses
  folder = OUT / "predictions" / "xquad"
  folder.mkdir(parents=True, exist_ok=True)
  def answer(examples):
    _, questions, contexts = zip(*examples)
    return windowed_tasks.predict_answers(qa, questions, contexts)

  for lang, answers in _by_language(XTREME["xquad_test"], answer):
    ids = [qid for qid, _, _ in XTREME["xquad_test"][lang]]
    (folder / f"test-{lang}.json").write_text(
        json.dumps(dict(zip(ids, answers)), ensure_ascii=False),
        encoding="utf-8")


def test_a_preset_whose_config_lost_layers_is_refused(tmp_path):
  """config.json edited to fewer layers than model.weights.h5 holds: one
  error naming the weights file, no model with half its weights."""
  import shutil  # pylint: disable=g-import-not-at-top
  from rembert_tf.keras_hub import rembert_backbone  # pylint: disable=g-import-not-at-top
  preset = tmp_path / "edited"
  shutil.copytree(_preset("tiny"), preset)
  config = json.loads((preset / "config.json").read_text())
  layers = config["config"]["num_layers"]
  config["config"]["num_layers"] = layers - 1
  (preset / "config.json").write_text(json.dumps(config))
  with pytest.raises(rembert_backbone.WeightsMismatchError) as e:
    rk.RemBertBackbone.from_preset(str(preset))
  message = str(e.value)
  assert message.startswith(f"{preset}/model.weights.h5: holds ")
  assert f"num_layers {layers - 1}): the config does not match the weights" \
      in message

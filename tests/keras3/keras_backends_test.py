"""rembert_tf.keras_hub on every Keras 3 backend, against the project's TensorFlow code.

This process holds TensorFlow with tf-keras (tests/conftest.py), so Keras 3
runs elsewhere: this module writes the fixtures and the references of the
project's own code, converts checkpoints to keras-hub presets with
`rembert-convert --to keras_hub` (its own process), then runs
`backend_checks.py` and keras-hub's own harness (`harness_*checks.py`) in one
process per backend (`KERAS_BACKEND`), scores the XTREME predictions those
processes write with the project's scorer and counts the harness's tests.

| fixture          | source                                          | checked against                     |
| ---------------- | ----------------------------------------------- | ----------------------------------- |
| tiny             | rembert_tf checkpoint with the output side      | TF encoder and MLM logits           |
| released         | TF1 checkpoint in the released layout           | TF encoder and MLM logits           |
| same_width       | Hugging Face safetensors, E_in == hidden        | TF encoder                          |
| no_pooler        | the same without the pooler (an MLM export)     | TF encoder's sequence output        |
| xtreme           | the fine-tuning tests' one-layer checkpoint     | PAN-X and XQuAD records, the scorer |
| tokenizers       | released and project SentencePiece layouts     | the preprocessing SavedModel (model)|

A backend that is not installed is skipped with the reason printed.
"""
import ast
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import testlib
from conversion import conversion_testlib
from rembert_tf.conversion import converter
from rembert_tf.conversion import weight_layout
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.export import preprocessor_export
from rembert_tf.data import finetuning_data
from rembert_tf.data import xtreme_records
from rembert_tf.data import xtreme_readers
from rembert_tf.data import tokenizer
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.modeling import rembert_pretrainer

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECKS = pathlib.Path(__file__).with_name("backend_checks.py")
HARNESS = [pathlib.Path(__file__).with_name(name) for name in
           ("harness_checks.py", "harness_task_checks.py")]
# The classes keras-hub's harness runs on (HARNESS), each with at least one
# harness method that runs.
HARNESS_CLASSES = [
    "RemBertBackboneTest", "RemBertTokenizerTest",
    "RemBertTextClassifierPreprocessorTest", "RemBertTextClassifierTest",
    "RemBertMaskedLMPreprocessorTest", "RemBertMaskedLMHeadTest",
    "RemBertMaskedLMTest", "RemBertMaskedLMPresetTest",
    "RemBertTokenClassifierPreprocessorTest", "RemBertTokenClassifierTest",
    "RemBertQuestionAnswererPreprocessorTest", "RemBertQuestionAnswererTest",
    "RemBertTransformersCheckpointTest"]
TOLERANCE = 1e-5
SEQ_LENGTH = 24   # packed length of the tokenizer checks
# XTREME windows small enough that XQuAD contexts span several windows.
TAGGING_LENGTH, SPAN_LENGTH, DOC_STRIDE, MAX_QUERY = 64, 32, 8, 12
TEXTS = [
    "The cat sleeps on the red mat.", "Der Hund läuft schnell über die Straße.",
    "El perro corre en el parque.", "Привет, как дела? Всё хорошо.",
    "Η γάτα κοιμάται στο χαλί.", "القطة تنام على الحصيرة الحمراء.",
    "बिल्ली लाल चटाई पर सोती है।", "猫睡在红色的垫子上。北京是中国的首都。",
    "Tiếng Việt có dấu: Hà Nội.", "日本語のテキストと한국어 텍스트",
    "emoji 😀 and\ttabs  and double  spaces", "",
    " ".join(["A long sentence that needs truncation."] * 6)]
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}
# keras-hub's CI run of the port on JAX (keras_hub_contribution_test.py) runs
# keras-hub's test files of the port without their `large` tests: on each
# class, the harness methods below with the same arguments' shapes (the
# backbone's `run_backbone_test` with an input projection, each task's
# `run_task_test`, the layers' and preprocessors' basics). On JAX these run
# there alone; the other backends, and the harness tests keras-hub's default
# run does not have (converted presets, same-width backbones, preset round
# trips, Hugging Face folders), run here.
_HARNESS_RUN_BY_KERAS_HUB_CI = (
    "harness_checks.py::RemBertBackboneTest::test_backbone_with_input_projection",
    "harness_checks.py::RemBertTokenizerTest::test_tokenizer_basics",
    "harness_checks.py::RemBertMaskedLMPreprocessorTest::test_preprocessor_basics",
    "harness_checks.py::RemBertMaskedLMHeadTest::test_layer_behaviors",
    "harness_checks.py::RemBertTokenClassifierPreprocessorTest::"
    "test_preprocessor_basics",
    "harness_checks.py::RemBertQuestionAnswererPreprocessorTest::"
    "test_preprocessor_basics",
    "harness_task_checks.py::RemBertMaskedLMTest::test_masked_lm_basics",
    "harness_task_checks.py::RemBertTextClassifierTest::test_classifier_basics",
    "harness_task_checks.py::RemBertTokenClassifierTest::"
    "test_token_classifier_basics",
    "harness_task_checks.py::RemBertQuestionAnswererTest::"
    "test_question_answerer_basics")
# Run on TensorFlow alone. `run_model_saving_test` (a `.keras` file) checks
# the config's round trip, which is the same code on every backend; the
# weights' round trip on each backend is asserted by every task's
# `save_to_preset` round trip (harness_task_checks.py) and the fine-tuned
# classifier's (backend_checks.py), which run everywhere.
# `run_precision_test` and `run_quantization_test` check that the port's
# layers take a dtype policy and `quantize()` (the port's code is the same
# on every backend, the quantized kernels are Keras' own); keras-hub's harness
# itself runs no precision check on torch CPU and no quantization on torch,
# and on JAX each policy and mode compiles its own kernels (about a
# CPU-minute, for what TensorFlow's run already shows).
_HARNESS_ON_TENSORFLOW_ONLY = (
    "harness_checks.py::RemBertBackboneTest::test_saved_model",
    "harness_checks.py::RemBertBackboneTest::test_precision_and_quantization",
    "harness_task_checks.py::RemBertMaskedLMTest::test_saved_model",
    "harness_task_checks.py::RemBertTextClassifierTest::test_saved_model",
    "harness_task_checks.py::RemBertTokenClassifierTest::test_saved_model",
    "harness_task_checks.py::RemBertQuestionAnswererTest::test_saved_model")
RUN_ELSEWHERE = {
    "jax": _HARNESS_RUN_BY_KERAS_HUB_CI + _HARNESS_ON_TENSORFLOW_ONLY,
    "torch": _HARNESS_ON_TENSORFLOW_ONLY}
# PyTorch runs each op of these tiny models on one thread: its intra-op
# pool (a thread per core) costs more in synchronisation than such small ops
# gain from it, above all beside the suite's other process on two cores.
# XLA compiles these tiny models' every train and predict step for JAX
# without LLVM's optimisation passes: they run a few steps each, and the
# passes cost more time than they save (the numbers stay within 1e-5).
BACKEND_ENV = {"torch": {"OMP_NUM_THREADS": "1"},
               "jax": {"XLA_FLAGS": "--xla_backend_optimization_level=0"}}


def _python_env(**extra):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  env.pop("TF_USE_LEGACY_KERAS", None)
  env.update(extra)
  return env


def _start(args, log: pathlib.Path, **extra_env) -> subprocess.Popen:
  """Starts a child process (children run side by side: most of their time
  is importing TensorFlow and Keras, one core each)."""
  out = log.open("w")
  process = subprocess.Popen([str(a) for a in args], stdout=out,
                             stderr=subprocess.STDOUT, text=True, cwd=REPO,
                             env=_python_env(**extra_env))
  process.log = log
  return process


def _finish(process: subprocess.Popen, timeout=900) -> str:
  """Waits for a child; its output, asserting it succeeded."""
  try:
    code = process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    process.kill()
    raise
  output = process.log.read_text()
  assert code == 0, output[-6000:]
  return output


# --- references of the project's TensorFlow code --------------------------------


def _inputs(vocab_size, seed):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, size=(3, 20)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 13:], mask[2, 6:] = 0, 0
  types = np.zeros_like(ids)
  types[0, 9:] = 1
  positions = np.array([[1, 2, 3, 0], [4, 5, 9, 12], [1, 1, 2, 5]], np.int32)
  return dict(ids=ids, mask=mask, types=types, positions=positions)


def _reference(pretrainer, inputs):
  outputs = pretrainer(dict(input_word_ids=inputs["ids"],
                            input_mask=inputs["mask"],
                            input_type_ids=inputs["types"],
                            masked_lm_positions=inputs["positions"]))
  return dict(inputs, sequence_output=outputs["sequence_output"].numpy(),
              pooled_output=outputs["pooled_output"].numpy(),
              mlm_logits=outputs["mlm_logits"].numpy())


def _tiny_source(folder, cfg, sp_model, seed):
  """A rembert_tf checkpoint directory (encoder + output side) and its
  reference outputs."""
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  conversion_testlib.randomize(pretrainer.variables, seed)
  checkpoint_layout.write_checkpoint_dir(folder, cfg, pretrainer.encoder,
                                         pretrainer)
  tokenizer.copy_sentencepiece(
      str(sp_model), os.path.join(folder, checkpoint_layout.SENTENCEPIECE_FILE))
  return _reference(pretrainer, _inputs(cfg.vocab_size, seed))


def _released_source(folder, cfg):
  """A TF1 checkpoint in the released layout, its reference outputs and the
  encoder's parameter count."""
  folder.mkdir(parents=True)
  canonical, prefix = conversion_testlib.write_released_checkpoint(folder, cfg)
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  for slot in weight_layout.slots_for_pretrainer(pretrainer):
    slot.assign(canonical[slot.name])
  return (prefix, _reference(pretrainer, _inputs(cfg.vocab_size, 5)),
          pretrainer.encoder.count_params())


def _preprocessing_reference(sp_model, saved_model_dir=None):
  """Ids of the preprocessing model: single texts and pairs. With a
  directory, of the exported SavedModel reloaded; else of the Keras model it
  saves (the same graph, without the export's cost)."""
  if saved_model_dir is None:
    model = preprocessor_export.create_preprocessor(sp_model, SEQ_LENGTH)
  else:
    preprocessor_export.export_preprocessor(sp_model, saved_model_dir,
                                            seq_length=SEQ_LENGTH)
    model = tf.saved_model.load(str(saved_model_dir))
  texts = tf.constant(TEXTS)
  single = model(texts)
  tokens = model.tokenize(texts)
  seconds = tf.constant(TEXTS[3:] + TEXTS[:3])
  # The wrapper's __call__ is an instance attribute: callable as the
  # SavedModel's, called explicitly on the in-memory model.
  pairs = model.bert_pack_inputs.__call__([tokens, model.tokenize(seconds)],
                                          seq_length=tf.constant(SEQ_LENGTH))
  return {"pieces": [list(map(int, row)) for row in tokens.to_list()],
          **{f"single_{k}": v.numpy().tolist() for k, v in single.items()},
          **{f"pair_{k}": v.numpy().tolist() for k, v in pairs.items()}}


def _without_pooler(hf_dir, out_dir):
  """A Hugging Face directory without the pooler (as RemBertForMaskedLM
  saves it)."""
  from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top
  out_dir.mkdir()
  tensors = safetensors_numpy.load_file(hf_dir / "model.safetensors")
  safetensors_numpy.save_file(
      {k: v for k, v in tensors.items() if ".pooler." not in k},
      out_dir / "model.safetensors", metadata={"format": "pt"})
  shutil.copy(hf_dir / "config.json", out_dir / "config.json")


# --- XTREME inputs, records and gold labels ---------------------------------------


def _records(records_dir, task_type, seq_length, name):
  spec = xtreme_records.feature_spec(task_type, seq_length)
  rows = [tf.io.parse_single_example(r, spec) for r in
          tf.data.TFRecordDataset(str(records_dir / f"{name}.tfrecord"))]
  return {key: np.stack([r[key].numpy() for r in rows]).tolist()
          for key in spec}


def _xtreme(download_dir, sp_model, root):
  """The project's PAN-X and XQuAD records (and gold labels) and the raw
  examples the keras-hub tasks read, as JSON."""
  records = root / "records"
  finetuning_data.create_finetuning_data(
      "panx", download_dir, sp_model, records, seq_length=TAGGING_LENGTH,
      splits=("dev",), progress=lambda _: None)
  finetuning_data.create_finetuning_data(
      "xquad", download_dir, sp_model, records, seq_length=SPAN_LENGTH,
      doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY, splits=("test",),
      progress=lambda _: None)
  panx, xquad, xnli = (xtreme_tasks.get(t) for t in ("panx", "xquad", "xnli"))
  label_ids = {label: i for i, label in enumerate(panx.labels)}
  train = xtreme_readers.read_tagged_sentences(
      panx.download.path(download_dir, "train"), panx)
  squad = xtreme_readers.read_squad_examples(
      xquad.download.path(download_dir, "train"), xquad, is_training=True)
  languages = {"panx": ["en", "de", "ar"], "xquad": ["en", "zh", "ar"]}
  data = {
      "labels": list(panx.labels), "tagging_length": TAGGING_LENGTH,
      "span_length": SPAN_LENGTH, "doc_stride": DOC_STRIDE,
      "max_query_length": MAX_QUERY,
      "xnli_train": [[e.text_a, e.text_b, xnli.labels.index(e.label)]
                     for e in xtreme_readers.read_sentence_pairs(
                         xnli.download.path(download_dir, "train"), xnli, True)],
      "panx_train": [[w, [label_ids[t] for t in tags]] for w, tags in train],
      "panx_dev": {lang: [w for w, _ in xtreme_readers.read_tagged_sentences(
          panx.download.path(download_dir, "dev", lang), panx)]
                   for lang in languages["panx"]},
      "squad_train": [[e.question_text, e.paragraph_text, e.start_position,
                       e.orig_answer_text] for e in squad],
      "xquad_test": {lang: [[e.qas_id, e.question_text, e.paragraph_text]
                            for e in xtreme_readers.read_squad_examples(
                                xquad.download.path(download_dir, "test", lang), xquad,
                                is_training=False)]
                     for lang in languages["xquad"]},
      "records": {
          "panx_train": _records(records / "panx", "tagging", TAGGING_LENGTH,
                                 "train-en"),
          "panx_dev_en": _records(records / "panx", "tagging", TAGGING_LENGTH,
                                  "dev-en"),
          "squad_train": _records(records / "xquad", "span", SPAN_LENGTH,
                                  "train-en"),
          "xquad_test_zh": _records(records / "xquad", "span", SPAN_LENGTH,
                                    "test-zh")}}
  (root / "xtreme.json").write_text(json.dumps(data, ensure_ascii=False))
  return {"panx": records / "panx" / "labels", "xquad": records / "xquad" /
          "labels"}


# --- conversion -----------------------------------------------------------------


# One process for every preset (each process pays for importing TensorFlow
# and Keras): the converter's calls, then `rembert-convert` as its console
# script runs it (its run(), which exits with the command's status).
_CONVERT_DRIVER = """
import json, sys
from rembert_tf.cli import convert_checkpoint as command
from rembert_tf.conversion import converter
for kwargs in json.loads(sys.argv[1]):
  converter.convert_checkpoint(**kwargs)
sys.argv = ["rembert-convert", *json.loads(sys.argv[2])]
command.run()
"""


def _convert(sources, presets, logs):
  """The released TF1 checkpoint through the command line, the others
  through the converter, in one process."""
  runs = [dict(from_format="rembert_tf", to_format="keras_hub",
               input_path=str(sources["tiny"]), output_dir=str(presets / "tiny")),
          dict(from_format="hf", to_format="keras_hub",
               input_path=str(sources["same_width"]),
               output_dir=str(presets / "same_width"),
               sp_model=str(testlib.sentencepiece_model())),
          dict(from_format="hf", to_format="keras_hub",
               input_path=str(sources["no_pooler"]),
               output_dir=str(presets / "no_pooler"),
               allow_missing_pooler=True),
          dict(from_format="rembert_tf", to_format="keras_hub",
               input_path=str(sources["xtreme"]),
               output_dir=str(presets / "xtreme"))]
  command = ["--from=tf1", "--to=keras_hub",
             f"--checkpoint={sources['released']}",
             f"--sentencepiece_model={testlib.released_layout_sentencepiece()}",
             "--with_output_side", f"--output_dir={presets / 'released'}"]
  _finish(_start([sys.executable, "-c", _CONVERT_DRIVER, json.dumps(runs),
                  json.dumps(command)], logs / "convert.log"))


def _run_backends(root: pathlib.Path):
  """backend -> (output folder, its process's output, or the reason it did
  not run); the installed backends run side by side."""
  children, results = {}, {}
  for backend, module in sorted(BACKEND_MODULES.items()):
    if importlib.util.find_spec(module) is None:
      results[backend] = (None, f"Keras backend {backend}: {module} is not "
                          "installed")
      continue
    out = root / f"run_{backend}"
    out.mkdir()
    children[backend] = (out, _start(
        [sys.executable, "-m", "pytest", "-q", "-x", "-rs", "--noconftest",
         "-p", "no:cacheprovider", "--rootdir", CHECKS.parent,
         f"--junitxml={out / 'junit.xml'}", CHECKS, *HARNESS,
         *(f"--deselect={test}" for test in RUN_ELSEWHERE.get(backend, ()))],
        root / f"{backend}.log", KERAS_BACKEND=backend,
        REMBERT_KERAS_FIXTURES=str(root), REMBERT_KERAS_OUTPUT=str(out),
        **BACKEND_ENV.get(backend, {})))
  for backend, (out, child) in children.items():
    try:
      results[backend] = (out, _finish(child))
    except AssertionError as e:
      results[backend] = (out, e)
  return results


@pytest.fixture(scope="module")
def keras_fixtures(tmp_path_factory, checkpoint_dir, download_dir, sp_model):
  root = tmp_path_factory.mktemp("keras3")
  sources = root / "sources"
  references = {}
  tiny = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE)
  references["tiny"] = _tiny_source(sources / "tiny", tiny,
                                    testlib.sentencepiece_model(), seed=3)
  same_width = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE,
                                   input_embedding_size=32)
  references["same_width"] = _tiny_source(
      sources / "same_width_rembert_tf", same_width,
      testlib.sentencepiece_model(), seed=4)
  converter.convert_checkpoint("rembert_tf", "hf",
                               sources / "same_width_rembert_tf",
                               sources / "same_width", encoder_only=True)
  _without_pooler(sources / "same_width", sources / "no_pooler")
  # A Hugging Face folder with the output side (RemBertForMaskedLM).
  converter.convert_checkpoint("rembert_tf", "hf", sources / "tiny",
                               sources / "tiny_hf")
  prefix, references["released"], encoder_parameters = _released_source(
      sources / "released", tiny)
  for name, reference in references.items():
    np.savez(root / f"reference_{name}.npz", **reference)
  tokenizers = {
      "released": _preprocessing_reference(
          testlib.released_layout_sentencepiece(), root / "saved_model"),
      "project": _preprocessing_reference(testlib.sentencepiece_model())}
  (root / "tokenizers.json").write_text(json.dumps(
      {"texts": TEXTS, "seq_length": SEQ_LENGTH, **tokenizers},
      ensure_ascii=False))
  label_folders = _xtreme(download_dir, sp_model, root)
  _convert({"tiny": sources / "tiny", "same_width": sources / "same_width",
            "no_pooler": sources / "no_pooler", "released": prefix, "xtreme": checkpoint_dir}, root / "presets",
           root)
  return dict(root=root, label_folders=label_folders,
              encoder_parameters=encoder_parameters,
              runs=_run_backends(root))


@pytest.mark.parametrize("backend", sorted(BACKEND_MODULES))
def test_backend(backend, keras_fixtures, capsys):
  """Parity, tokenisation, fine-tuning and XTREME end to end on one backend."""
  label_folders = keras_fixtures["label_folders"]
  out, result = keras_fixtures["runs"][backend]
  if out is None:
    with capsys.disabled():
      print(f"\nSKIPPED {result}")
    pytest.skip(result)
  if isinstance(result, AssertionError):
    raise result
  report = json.loads((out / "report.json").read_text())
  assert sorted(report["parity"]) == ["released", "released_mlm", "same_width",
                                      "tiny", "tiny_mlm"], report
  assert sorted(report["losses"]) == ["question_answerer", "text_classifier",
                                      "token_classifier"], report
  for name, errors in report["parity"].items():
    for output, error in errors.items():
      assert error <= TOLERANCE, (backend, name, output, error)
  scores = {
      "panx": xtreme_scorer.score_task("panx", out / "predictions",
                                       label_folders["panx"], split="dev"),
      "xquad": xtreme_scorer.score_task("xquad", out / "predictions",
                                        label_folders["xquad"], split="test")}
  assert sorted(scores["panx"]["f1"]) == ["ar", "de", "en"]
  assert sorted(scores["xquad"]["f1"]) == ["ar", "en", "zh"]
  # The English dev sentences are the training ones: learnt by heart.
  assert scores["panx"]["f1"]["en"] >= 80.0, scores["panx"]
  assert scores["xquad"]["f1"]["en"] >= 50.0, scores["xquad"]
  with capsys.disabled():
    print(f"\n[{backend}] max |keras - TF encoder|: " + ", ".join(
        f"{name} {output} {error:.2e}" for name, errors in
        report["parity"].items() for output, error in errors.items()))
    print(f"[{backend}] losses first -> last: " + ", ".join(
        f"{task} {a:.3f} -> {b:.3f}" for task, (a, b) in
        report["losses"].items()))
    print(f"[{backend}] PAN-X F1 {scores['panx']['f1']}, XQuAD F1 "
          f"{scores['xquad']['f1']}")


def _harness_results(junit: pathlib.Path):
  """The harness's tests in the junit report: class -> (ran, skipped
  with reasons, failed)."""
  import xml.etree.ElementTree as ElementTree  # pylint: disable=g-import-not-at-top
  results = {}
  for case in ElementTree.parse(junit).iter("testcase"):
    if not case.get("classname", "").startswith(tuple(
        f"{path.stem}." for path in HARNESS)) or (
        case.get("name") == "test_session"):   # tf.test.TestCase's, not a test
      continue
    ran, skipped, failed = results.setdefault(
        case.get("classname").split(".")[-1], ([], [], []))
    skip = case.find("skipped")
    if skip is not None:
      skipped.append((case.get("name"), skip.get("message", "")))
    elif case.find("failure") is not None or case.find("error") is not None:
      failed.append(case.get("name"))
    else:
      ran.append(case.get("name"))
  return results


@pytest.mark.parametrize("backend", sorted(BACKEND_MODULES))
def test_keras_hub_harness(backend, keras_fixtures, capsys):
  """keras-hub's own TestCase methods on every class: all ran, or a skip
  that says why."""
  out, result = keras_fixtures["runs"][backend]
  if out is None:
    pytest.skip(result)
  if isinstance(result, AssertionError):
    raise result
  results = _harness_results(out / "junit.xml")
  elsewhere = {tuple(test.split("::")[1:]) for test in
               RUN_ELSEWHERE.get(backend, ())}
  # A class whose every harness test runs elsewhere has none here.
  assert set(results) | {name for name, _ in elsewhere} == set(
      HARNESS_CLASSES), sorted(results)
  assert not elsewhere & {(name, test) for name, (ran, _, _) in
                          results.items() for test in ran}, elsewhere
  for name, (ran, skipped, failed) in results.items():
    assert ran and not failed, (backend, name, ran, failed)
    assert all(reason.strip() for _, reason in skipped), (name, skipped)
  with capsys.disabled():
    total = [sum(len(r[i]) for r in results.values()) for i in range(2)]
    print(f"\n[{backend}] keras-hub harness: {total[0]} ran, {total[1]} "
          "skipped" + (f", {len(elsewhere)} run elsewhere (keras-hub's CI "
                       "in keras_hub_contribution_test.py, or TensorFlow's "
                       "run)" if elsewhere else "")
          + ": " + "; ".join(
              f"{name} {len(ran)}" + "".join(
                  f" (skipped {test}: {reason})" for test, reason in skipped)
              for name, (ran, skipped, _) in sorted(results.items())))


def test_converted_preset_layout(keras_fixtures):
  """`rembert-convert --to keras_hub --with_output_side`: keras-hub's preset
  files, the real sizes in the configs, the tokenizer's vocabulary."""
  preset = keras_fixtures["root"] / "presets" / "released"
  # The files keras-hub writes and nothing else; the command's log is beside.
  assert sorted(str(p.relative_to(preset)) for p in preset.rglob("*")) == [
      "assets", "assets/tokenizer", "assets/tokenizer/vocabulary.spm",
      "config.json", "metadata.json", "model.weights.h5",
      "preprocessor.json", "task.json", "task.weights.h5", "tokenizer.json"]
  (log,) = (preset.parent / "released.logs").glob("rembert-convert-*.log")
  assert "(exit code 0)" in log.read_text()
  config = json.loads((preset / "config.json").read_text())
  assert config["registered_name"] == "rembert_tf>RemBertBackbone"
  assert config["config"]["vocabulary_size"] == testlib.SENTENCEPIECE_VOCAB_SIZE
  assert config["config"]["embedding_dim"] == 16
  task = json.loads((preset / "task.json").read_text())
  assert task["registered_name"] == "rembert_tf>RemBertMaskedLM"
  assert task["config"]["output_embedding_dim"] == 48
  assert task["config"]["backbone"]["config"] == config["config"]
  metadata = json.loads((preset / "metadata.json").read_text())
  assert metadata["parameter_count"] == keras_fixtures["encoder_parameters"]
  assert (preset / "assets" / "tokenizer" / "vocabulary.spm").read_bytes() == (
      testlib.released_layout_sentencepiece().read_bytes())


def test_output_layers_refused_before_any_work(tmp_path):
  """num_output_layers > 0 cannot be held by RemBertMaskedLM: one error,
  nothing written, Keras never imported."""
  cfg = testlib.tiny_config(num_output_layers=1)
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  checkpoint_layout.write_checkpoint_dir(tmp_path / "in", cfg,
                                         pretrainer.encoder, pretrainer)
  with pytest.raises(weight_layout.ConversionError,
                     match="num_output_layers=1.*keras-hub"):
    converter.convert_checkpoint("rembert_tf", "keras_hub", tmp_path / "in",
                                 tmp_path / "out")
  assert not (tmp_path / "out").exists()
  assert "rembert_tf.conversion.keras_hub_preset" not in sys.modules


def _marked_large(function: ast.FunctionDef):
  """Whether a test carries keras-hub's `large` or `extra_large` mark (its
  default CI run skips those)."""
  return any(isinstance(d, ast.Attribute) and d.attr in ("large", "extra_large")
             for d in function.decorator_list)


def _harness_calls(path: pathlib.Path, without_large=False):
  """class -> method -> the harness methods (`self.run_*`) it calls, directly
  or through the class's own helpers (`self._*`); without_large: not the
  tests keras-hub's default run skips."""
  calls = {}
  for node in ast.parse(path.read_text(encoding="utf-8")).body:
    if not isinstance(node, ast.ClassDef):
      continue
    on_self = {f.name: {c.func.attr for c in ast.walk(f)
                        if isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Attribute)
                        and isinstance(c.func.value, ast.Name)
                        and c.func.value.id == "self"}
               for f in node.body if isinstance(f, ast.FunctionDef)
               and not (without_large and _marked_large(f))}
    calls[node.name] = {}
    for name, called in on_self.items():
      through_helpers = [on_self.get(h, set()) for h in called
                         if h.startswith("_")]
      calls[node.name][name] = {c for c in called.union(*through_helpers)
                                if c.startswith("run_")}
  return calls


def test_harness_left_to_keras_hubs_ci_is_called_there():
  """Each harness test left to keras-hub's CI on JAX: keras-hub's files of
  the port call the same harness methods on the same class, in tests its
  default run does not skip (so JAX runs them there)."""
  upstream = {}
  for path in (REPO / "tools" / "keras_hub_contribution" / "upstream").rglob(
      "*_test.py"):
    for name, methods in _harness_calls(path, without_large=True).items():
      upstream.setdefault(name, set()).update(*methods.values())
  ours = {path.name: _harness_calls(path) for path in HARNESS}
  for test in _HARNESS_RUN_BY_KERAS_HUB_CI:
    file, name, method = test.split("::")
    called = ours[file][name][method]
    assert called, test
    assert called <= upstream.get(name, set()), (test, called, upstream.get(name))

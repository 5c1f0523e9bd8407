"""rembert_tf.keras_hub on every Keras 3 backend, against the project's TensorFlow code and transformers.

This process holds TensorFlow with tf-keras (tests/conftest.py), so Keras 3
runs elsewhere: this module writes the fixtures (backend_fixtures.py: the
references of the project's own code, Hugging Face folders written by
transformers' `save_pretrained` in a CPU PyTorch process, keras-hub presets
converted by `rembert-convert --to keras_hub`), then runs, side by side, one
process per backend (`KERAS_BACKEND`) with `backend_checks.py`, keras-hub's
own harness (`harness_*checks.py`) and, on TensorFlow,
`transformers_folders_checks.py` (on JAX, `windowed_tasks_checks.py`
instead). On JAX and PyTorch the transformers checks run in a process of
their own that cannot import TensorFlow (`NO_TENSORFLOW`), so they also show
the classes need none there. The tests here score the XTREME predictions
those processes write with the project's scorer, count the harness's tests,
read the parity figures, and run `rembert-convert --from keras_hub` on
damaged presets.

A backend that is not installed is skipped with the reason printed.
"""
import ast
import importlib.util
import json
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

import backend_fixtures as fixtures
import testlib
from rembert_tf.conversion import converter
from rembert_tf.conversion import weight_layout
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.modeling import rembert_pretrainer

REPO = fixtures.REPO
HERE = pathlib.Path(__file__).parent
CHECKS = HERE / "backend_checks.py"
HARNESS = [HERE / name for name in
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
TRANSFORMERS_CHECKS = HERE / "transformers_folders_checks.py"
WINDOWED_CHECKS = HERE / "windowed_tasks_checks.py"
# What each backend's process runs beside backend_checks.py and the harness
# (JAX: the in-graph windowed preprocessors, which need no other backend).
MORE_CHECKS = {"tensorflow": [TRANSFORMERS_CHECKS], "jax": [WINDOWED_CHECKS]}
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


def _pytest(files, out: pathlib.Path, deselect=()):
  return [sys.executable, "-m", "pytest", "-q", "-x", "-rs", "--noconftest",
          "-p", "no:cacheprovider", "--rootdir", HERE,
          f"--junitxml={out / 'junit.xml'}", *files,
          *(f"--deselect={test}" for test in deselect)]


def _run_backends(root: pathlib.Path, with_transformers: bool):
  """(backend, checks) -> (output folder, its process's output, or the
  reason it did not run); the processes run side by side. checks: "keras"
  (backend_checks.py, the harness and MORE_CHECKS) or "transformers" (the
  transformers checks without TensorFlow, JAX and PyTorch)."""
  no_tensorflow = root / "no_tensorflow"
  no_tensorflow.mkdir()
  (no_tensorflow / "sitecustomize.py").write_text(fixtures.NO_TENSORFLOW)
  children, results = {}, {}
  for backend, module in sorted(BACKEND_MODULES.items()):
    if importlib.util.find_spec(module) is None:
      reason = f"Keras backend {backend}: {module} is not installed"
      results[backend, "keras"] = results[backend, "transformers"] = (
          None, reason)
      continue
    env = dict(KERAS_BACKEND=backend, REMBERT_KERAS_FIXTURES=str(root),
               REMBERT_HF_FIXTURES=str(root), **BACKEND_ENV.get(backend, {}))
    out = root / f"run_{backend}"
    (out / "hf").mkdir(parents=True)
    more = [path for path in MORE_CHECKS.get(backend, [])
            if with_transformers or path != TRANSFORMERS_CHECKS]
    children[backend, "keras"] = (out, fixtures.start(
        _pytest([CHECKS, *HARNESS, *more], out,
                RUN_ELSEWHERE.get(backend, ())),
        root / f"{backend}.log", REMBERT_KERAS_OUTPUT=str(out),
        REMBERT_HF_OUTPUT=str(out / "hf"), **env))
    if with_transformers and backend != "tensorflow":
      hf_out = root / f"run_{backend}_transformers"
      hf_out.mkdir()
      path = fixtures.python_env()["PYTHONPATH"]
      children[backend, "transformers"] = (hf_out, fixtures.start(
          _pytest([TRANSFORMERS_CHECKS], hf_out) + ["-p", "no:warnings"],
          root / f"{backend}_transformers.log",
          REMBERT_HF_OUTPUT=str(hf_out),
          PYTHONPATH=f"{no_tensorflow}:{path}", **env))
  for key, (out, child) in children.items():
    try:
      results[key] = (out, fixtures.finish(child))
    except AssertionError as e:
      results[key] = (out, e)
  # TensorFlow's process ran the transformers checks beside the others.
  results["tensorflow", "transformers"] = results["tensorflow", "keras"]
  return results


@pytest.fixture(scope="module")
def keras_fixtures(tmp_path_factory, checkpoint_dir, download_dir, sp_model):
  root = tmp_path_factory.mktemp("keras3")
  missing = [m for m in ("torch", "transformers")
             if importlib.util.find_spec(m) is None]
  hf_folders = None if missing else fixtures.start_transformers_folders(root)
  sources = root / "sources"
  references = {}
  tiny = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE)
  references["tiny"] = fixtures.tiny_source(
      sources / "tiny", tiny, testlib.sentencepiece_model(), seed=3)
  same_width = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE,
                                   input_embedding_size=32)
  references["same_width"] = fixtures.tiny_source(
      sources / "same_width_rembert_tf", same_width,
      testlib.sentencepiece_model(), seed=4)
  converter.convert_checkpoint("rembert_tf", "hf",
                               sources / "same_width_rembert_tf",
                               sources / "same_width", encoder_only=True)
  fixtures.without_pooler(sources / "same_width", sources / "no_pooler")
  # A Hugging Face folder with the output side (RemBertForMaskedLM).
  converter.convert_checkpoint("rembert_tf", "hf", sources / "tiny",
                               sources / "tiny_hf")
  prefix, references["released"], encoder_parameters = (
      fixtures.released_source(sources / "released", tiny))
  for name, reference in references.items():
    np.savez(root / f"reference_{name}.npz", **reference)
  tokenizers = {
      "released": fixtures.preprocessing_reference(
          testlib.released_layout_sentencepiece(), root / "saved_model"),
      "project": fixtures.preprocessing_reference(
          testlib.sentencepiece_model())}
  (root / "tokenizers.json").write_text(json.dumps(
      {"texts": fixtures.TEXTS, "seq_length": fixtures.SEQ_LENGTH,
       **tokenizers}, ensure_ascii=False))
  label_folders = fixtures.xtreme(download_dir, sp_model, root)
  if hf_folders is not None:
    fixtures.finish(hf_folders)
  fixtures.convert({"tiny": sources / "tiny",
                    "same_width": sources / "same_width",
                    "no_pooler": sources / "no_pooler", "released": prefix,
                    "xtreme": checkpoint_dir,
                    "mlm": None if missing else root / "hf" / "mlm"},
                   root / "presets", root)
  runs = _run_backends(root, not missing)
  if missing:
    for backend in BACKEND_MODULES:
      runs[backend, "transformers"] = (None, f"{', '.join(missing)} not "
                                       "installed (tests/requirements-keras3.txt)")
  return dict(root=root, label_folders=label_folders,
              encoder_parameters=encoder_parameters, runs=runs)


def _ran(keras_fixtures, backend, checks="keras"):
  """The output folder of a backend's process and its output; skips or
  fails as that process did."""
  out, result = keras_fixtures["runs"][backend, checks]
  if out is None:
    pytest.skip(result)
  if isinstance(result, AssertionError):
    raise result
  return out, result


@pytest.mark.parametrize("backend", sorted(BACKEND_MODULES))
def test_backend(backend, keras_fixtures, capsys):
  """Parity, tokenisation, fine-tuning and XTREME end to end on one backend."""
  label_folders = keras_fixtures["label_folders"]
  out, result = keras_fixtures["runs"][backend, "keras"]
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
  out, _ = _ran(keras_fixtures, backend)
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


def _outcomes(junit: pathlib.Path, module: str):
  """test name -> "passed", "skipped" or "failed", for one checks module."""
  outcomes = {}
  for case in ElementTree.parse(junit).iter("testcase"):
    if case.get("classname") == module:
      outcomes[case.get("name")] = (
          "failed" if case.find("failure") is not None
          or case.find("error") is not None
          else "skipped" if case.find("skipped") is not None else "passed")
  return outcomes


def test_windowed_tasks_in_graph_rows_equal_the_python_rows(keras_fixtures):
  """windowed_tasks_checks.py in the JAX process: the in-graph tagging and
  QA preprocessors give windowed_tasks' Python rows (3 tagging lengths, 4
  window settings, the answer's text, the readers)."""
  out, _ = _ran(keras_fixtures, "jax")
  outcomes = _outcomes(out / "junit.xml", WINDOWED_CHECKS.stem)
  assert list(outcomes.values()) == ["passed"] * 9, outcomes


@pytest.mark.parametrize("backend", sorted(BACKEND_MODULES))
def test_transformers_folders(backend, keras_fixtures, capsys):
  """Each folder transformers wrote, through `from_preset`, against
  transformers' outputs; keras-hub's loading of other models unchanged;
  one line for each damaged folder or preset."""
  out, _ = _ran(keras_fixtures, backend, "transformers")
  outcomes = _outcomes(out / "junit.xml", TRANSFORMERS_CHECKS.stem)
  assert "passed" in outcomes.values() and "failed" not in outcomes.values(), (
      outcomes)
  report = json.loads((out / "hf" / "report.json" if backend == "tensorflow"
                       else out / "report.json").read_text())
  assert sorted(report) == ["base", "mlm", "mlm_logits", "prefixed"], report
  worst = {name: max(errors.values()) for name, errors in report.items()}
  assert max(worst.values()) <= TOLERANCE, (backend, report)
  with capsys.disabled():
    print(f"\n[{backend}] max |keras - transformers|: " + ", ".join(
        f"{name} {output} {error:.2e}" for name, errors in report.items()
        for output, error in errors.items()))


def test_damaged_presets_refused_by_conversion(keras_fixtures, tmp_path):
  """`rembert-convert --from keras_hub`: one line naming the file, nothing
  written; the command itself once (exit 1), the converter for the rest."""
  if keras_fixtures["runs"]["tensorflow", "transformers"][0] is None:
    pytest.skip(keras_fixtures["runs"]["tensorflow", "transformers"][1])
  cases = fixtures.damaged(keras_fixtures["root"] / "presets" / "mlm",
                           tmp_path)
  folder, named = cases.pop("no_head")
  out = tmp_path / "out_no_head"
  result = subprocess.run(
      [sys.executable, "-c", fixtures.CONVERT_EACH, json.dumps([
          (name, str(damaged), str(tmp_path / f"out_{name}"))
          for name, (damaged, _) in cases.items()]), json.dumps([
              "--from=keras_hub", "--to=rembert_tf", f"--checkpoint={folder}",
              f"--output_dir={out}"])],
      capture_output=True, text=True, env=fixtures.python_env(), cwd=REPO,
      timeout=600, check=False)
  lines = [line for line in result.stderr.splitlines()
           if line.startswith("rembert-convert: error:")]
  assert result.returncode == 1, result.stderr[-3000:]
  assert len(lines) == 1 and str(named) in lines[0], result.stderr[-3000:]
  assert "Traceback" not in result.stderr and not out.exists()
  (messages,) = [json.loads(line) for line in result.stdout.splitlines()
                 if line.startswith("{")]
  for name, (_, named) in cases.items():
    assert messages[name] and "\n" not in messages[name], (name, messages)
    assert str(named) in messages[name], (name, messages[name])
    assert not (tmp_path / f"out_{name}").exists()


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
  checkpoint_writing.write_checkpoint_dir(tmp_path / "in", cfg,
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

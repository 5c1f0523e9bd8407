"""The ablation suite end to end at CI size, and its protocol pieces.

A demo-scale suite of two models (coupled; decoupled with a small input and a
large output embedding), a few steps each: the table has their rows, the CKA
of a model with itself is 1 on the diagonal, the PNGs are real images, and a
suite killed during fine-tuning resumes without redoing finished work.
"""
import json
import pathlib
import sys

import numpy as np
import pytest

from rembert_tf.ablation import suite
from rembert_tf.ablation import finetune_sweep
from rembert_tf.ablation import rows as rows_lib
from rembert_tf.pretraining import runner as pretraining_runner
from rembert_tf.common import errors
from rembert_tf.evaluation import layer_similarity
from rembert_tf.finetuning import finetuning_runner

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "docs"))
import docs_consistency_test as docs  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import readme_quickstart_test as quickstart  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MODELS = ["coupled", "in32_out512"]
# Tiny everything: vocabulary 400, 4 steps of 8, no XLA compile in pre-training,
# one checkpoint, two languages.
OVERRIDE = ("trainer.train_steps=4,trainer.steps_per_loop=2,trainer.summary_interval=2,"
            "trainer.checkpoint_interval=4,trainer.validation_interval=4,"
            "trainer.validation_steps=2,"
            "trainer.optimizer_config.learning_rate.polynomial.decay_steps=4,"
            "trainer.optimizer_config.warmup.linear.warmup_steps=1,"
            "task.train_data.global_batch_size=8,task.validation_data.global_batch_size=8,"
            "task.model.vocab_size=400,task.jit_compile=false")


class SimulatedKill(Exception):
  """Stands for the process dying in the middle of a fine-tuning run."""


def _options(output_dir):
  return suite.SuiteOptions(
      output_dir=str(output_dir), scale="demo", models=MODELS,
      params_override=OVERRIDE, learning_rates=[1e-3], num_seeds=1,
      finetune_params_override=["trainer.num_train_steps=2",
                          "trainer.train_batch_size=8",
                          "trainer.eval_batch_size=16"],
      corpus_megabytes=0.15, num_workers=1, demo_train_pairs=40,
      demo_dev_pairs=12, demo_languages=["en", "es"], similarity_max_sentences=12)


def _count_calls(monkeypatch, module, name, fail_on_call=None):
  calls = []
  original = getattr(module, name)

  def spy(*args, **kwargs):
    calls.append((args, kwargs))
    if fail_on_call is not None and len(calls) == fail_on_call:
      raise SimulatedKill()
    return original(*args, **kwargs)
  monkeypatch.setattr(module, name, spy)
  return calls


@pytest.fixture(scope="module")
def killed_then_resumed(tmp_path_factory):
  """Runs the suite, kills it in the second fine-tuning run, runs it again."""
  output_dir = tmp_path_factory.mktemp("suite")
  with pytest.MonkeyPatch.context() as patch:
    first_pretrain = _count_calls(patch, pretraining_runner, "run")
    first_finetune = _count_calls(patch, finetuning_runner, "run_finetuning",
                                  fail_on_call=2)
    with pytest.raises(SimulatedKill):
      suite.run_suite(_options(output_dir), print_fn=lambda m: None)
  lines = []
  with pytest.MonkeyPatch.context() as patch:
    second_pretrain = _count_calls(patch, pretraining_runner, "run")
    second_finetune = _count_calls(patch, finetuning_runner, "run_finetuning")
    summary = suite.run_suite(_options(output_dir), print_fn=lines.append)
  return dict(output_dir=output_dir, summary=summary, console="\n".join(lines),
              first=(len(first_pretrain), len(first_finetune)),
              second=(len(second_pretrain), [c[1] for c in second_finetune]))


def test_killed_suite_resumes_without_redoing_finished_work(killed_then_resumed):
  result = killed_then_resumed
  assert result["first"] == (2, 2)        # both pre-trained, killed in 2nd fine-tune
  pretrain_calls, finetune_calls = result["second"]
  assert pretrain_calls == 0               # nothing pre-trained again
  assert len(finetune_calls) == 1          # only the interrupted run
  assert "/in32_out512/" in finetune_calls[0]["output_dir"]
  console = result["console"]
  for row in MODELS:
    assert f"skip pre-training {row}: finished earlier" in console
  assert "skip fine-tuning sweep" in console and "/coupled/finetune/xnli" in console


def test_table_has_one_row_per_model_with_counts_and_scores(killed_then_resumed):
  output_dir = killed_then_resumed["output_dir"]
  table = json.loads((output_dir / "results.json").read_text())
  assert table["tasks"] == ["xnli"]
  rows = {row["name"]: row for row in table["rows"]}
  assert list(rows) == MODELS
  assert (rows["coupled"]["input_embedding_size"],
          rows["coupled"]["output_embedding_size"], rows["coupled"]["coupled"]) == (128, 128, True)
  assert (rows["in32_out512"]["input_embedding_size"],
          rows["in32_out512"]["output_embedding_size"]) == (32, 512)
  for row in rows.values():
    assert row["pt_params"] > row["ft_params"] > 0
    assert 0.0 <= row["mlm_accuracy"] <= 1.0
    assert 0.0 <= row["tasks"]["xnli"]["score"] <= 100.0
    assert set(row["languages"]["xnli"]) == {"en", "es"}
    assert len(row["layer_similarity"]) == 2        # one value per layer
  # The decoupled row keeps fewer parameters for fine-tuning (smaller E_in).
  assert rows["in32_out512"]["ft_params"] < rows["coupled"]["ft_params"]
  markdown = (output_dir / "results.md").read_text()
  assert "| coupled | 128 | 128 (coupled) | 2 |" in markdown
  assert "| in32_out512 | 32 | 512 | 2 |" in markdown


def _assert_png(path):
  data = path.read_bytes()
  assert data[:8] == PNG_SIGNATURE, path
  import matplotlib.image  # pylint: disable=g-import-not-at-top
  image = matplotlib.image.imread(str(path))
  assert image.shape[0] > 100 and image.shape[1] > 100, (path, image.shape)
  assert float(np.std(image)) > 0.0          # not a blank canvas


def test_pictures_are_valid_nonempty_pngs(killed_then_resumed):
  output_dir = killed_then_resumed["output_dir"]
  for name in ("mlm_curves", "results", "layer_similarity"):
    _assert_png(output_dir / "figures" / f"{name}.png")
  for row in MODELS:
    _assert_png(output_dir / "models" / row / "layer_similarity" / "layer_similarity.png")


def test_cka_of_a_model_with_itself_is_one_on_the_diagonal(killed_then_resumed, tmp_path):
  output_dir = killed_then_resumed["output_dir"]
  model_dir = str(output_dir / "models" / "in32_out512" / "pretrain")
  sentences = [line.split("\t")[0] for line in
               (output_dir / "data/download/xnli/dev-en.tsv").read_text().splitlines()]
  result = layer_similarity.analyze_checkpoints(
      model_dir, model_dir, sentences, seq_length=64, output_dir=str(tmp_path))
  np.testing.assert_allclose(result.diagonal, [1.0, 1.0], atol=1e-6)
  np.testing.assert_allclose(result.matrix, result.matrix.T, atol=1e-6)
  assert (tmp_path / layer_similarity.RESULT_MARKDOWN).read_text().count("| 1.000 |") >= 1


def test_documented_layer_similarity_after_its_fine_tuning_run(
    killed_then_resumed, tmp_path):
  """docs/ablation.md's pre-trained-against-fine-tuned commands as printed
  (fewer steps), on a row of the suite standing in for runs/pretrain: the
  fine-tuning run keeps the checkpoint the comparison reads."""
  suite_dir = killed_then_resumed["output_dir"]
  (tmp_path / "runs").mkdir()
  (tmp_path / "runs/pretrain").symlink_to(suite_dir / "models/coupled/pretrain")
  (tmp_path / "download").symlink_to(suite_dir / "data/download")
  block = next(body for _, body, _ in docs.code_blocks(
      docs.REPO / "docs/ablation.md") if "--keep_checkpoints" in body)
  finetune, similarity = list(docs.shell_commands(block))[:2]
  assert finetune[0] == "rembert-finetune" and "--keep_checkpoints" in finetune
  assert similarity[0] == "rembert-layer-similarity"
  quickstart.run(quickstart.command_argv(
      finetune + ["--num_train_steps=2", "--train_batch_size=8",
                  "--eval_batch_size=8", "--splits=dev"]), tmp_path, "finetune")
  quickstart.run(quickstart.command_argv(similarity), tmp_path, "similarity")
  output_dir = tmp_path / similarity[similarity.index("--output_dir") + 1]
  result = json.loads((output_dir / layer_similarity.RESULT_JSON).read_text())
  assert np.asarray(result["matrix"]).shape == (2, 2)   # the coupled row's layers


def test_finetune_overrides_are_fields_checked_before_any_work():
  assert finetune_sweep.checked_overrides(
      ["trainer.num_train_epochs=2", "runtime.distribution_strategy=tpu"]) == {
          "trainer.num_train_epochs": 2,
          "runtime.distribution_strategy": "tpu"}
  assert finetune_sweep.checked_overrides(
      {"trainer": {"jit_compile": False}, "data.splits": ["dev"]}) == {
          "trainer.jit_compile": False, "data.splits": ["dev"]}
  for overrides, message in (
      (["trainer.seed=3"], "trainer.seed: the suite sets it for each run "
       r"\(choose the seeds per rate with --num_seeds\)"),
      ({"sweep.learning_rates": [1e-5]}, "sweep.learning_rates: the suite"),
      (["trainer.nope=1"], "'nope' does not exist"),
      (["trainer.num_train_steps=x"], "trainer.num_train_steps is 'x'; it "
       "must be an integer")):
    with pytest.raises(errors.RemBertError, match=message):
      finetune_sweep.checked_overrides(overrides)
  with pytest.raises(errors.RemBertError, match="nope"):
    suite.resolve_defaults(suite.SuiteOptions(
        output_dir="unused", scale="demo", finetune_params_override=["data.nope=1"]))
  demo = suite.resolve_defaults(suite.SuiteOptions(
      output_dir="unused", scale="demo"))
  assert demo.finetune_params_override == {"trainer.num_train_epochs": 2}


def test_rows_that_differ_outside_the_model_are_refused():
  override = {"task": {"train_data": {"input_path": "x"},
                       "validation_data": {"input_path": "y"}}}
  coupled, decoupled = rows_lib.scale_rows("demo")[:2]
  configs = {"coupled": rows_lib.load_row_config(coupled, override),
             "decoupled": rows_lib.load_row_config(
                 decoupled, dict(override, trainer={"train_steps": 7}))}
  with pytest.raises(errors.UsageError, match="trainer.train_steps"):
    rows_lib.check_same_schedule(configs)
  with pytest.raises(errors.UsageError, match="no such row"):
    rows_lib.select_rows(rows_lib.scale_rows("demo"), ["coupled", "nope"])


def test_base_rows_share_one_schedule_and_paper_numbers_sit_beside_their_rows():
  from rembert_tf.ablation import results_table  # pylint: disable=g-import-not-at-top
  base = rows_lib.base_rows()
  assert {"coupled_768", "decoupled_768", "decoupled_in128_reinvested"} <= {
      r.name for r in base}
  override = {"task": {"train_data": {"input_path": "x"},
                       "validation_data": {"input_path": "y"}}}
  rows_lib.check_same_schedule(
      {r.name: rows_lib.load_row_config(r, override) for r in base})
  sweep = dict(scores={"avg_metric": 71.0, "accuracy": {"en": 80.0, "de": 62.0}},
               std={"avg_metric": 0.5}, selected_learning_rate=2e-5, num_seeds=3)
  model = dict(input_embedding_size=768, output_embedding_size=768, coupled=True,
               num_hidden_layers=12, num_output_layers=0)
  table = results_table.build_table([
      dict(name="coupled_768", model=model, paper_column="coupled",
           counts=dict(pt_params=178_000_000, ft_params=177_000_000),
           mlm_accuracy=0.5, sweeps={"xnli": sweep}, similarity_diagonal=None)])
  markdown = results_table.to_markdown(table)
  assert ("| coupled_768 | 768 | 768 (coupled) | 12 | 178M | 177M | 0.5000 | "
          "71.0 ± 0.5 (paper 70.7) | 71.0 |") in markdown


@pytest.mark.parametrize("setting, line", [
    ({"num_seeds": 0}, "--num_seeds 0: must be at least 1."),
    ({"learning_rates": [1e-3, -1.0]}, "--learning_rates -1.0: a learning "
     "rate must be a positive number (e.g. 2e-5)."),
    ({"similarity_max_sentences": 0}, "--similarity_max_sentences 0: must be "
     "at least 1."),
    ({"corpus_megabytes": -2.0}, "--corpus_megabytes -2.0: give a size above "
     "0 (e.g. 3)."),
])
def test_numbers_out_of_range_are_refused_before_any_row(setting, line):
  with pytest.raises(errors.UsageError) as e:
    suite.resolve_defaults(suite.SuiteOptions(
        output_dir="unused", scale="demo", **setting))
  assert errors.one_line(e.value) == line

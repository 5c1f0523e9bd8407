"""The claims' arithmetic: transfer per seed, Welch intervals, verdicts, and
the table section and figure that carry them."""
import json

import numpy as np
import pytest
from scipy import stats

from rembert_tf.ablation import comparisons
from rembert_tf.ablation import report
from rembert_tf.ablation import rows as rows_lib
from rembert_tf.ablation import suite
from rembert_tf.finetuning import finetuning_experiment


def test_transfer_is_the_mean_over_languages_other_than_english():
  assert comparisons.transfer_score({"en": 90.0, "es": 50.0, "ru": 60.0}) == 55.0
  assert comparisons.transfer_score({"en": 90.0}) is None


def test_welch_interval_matches_scipys_own_welch_test():
  a, b = [56.0, 57.5, 55.9], [52.1, 53.0, 51.2, 52.6]
  diff, (low, high) = comparisons.welch_interval(a, b)
  reference = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
  assert diff == pytest.approx(np.mean(a) - np.mean(b))
  assert (low, high) == pytest.approx((reference.low, reference.high))


@pytest.mark.parametrize("better,baseline,verdict", [
    ([60.0, 61.0, 62.0], [50.0, 51.0, 52.0], "reproduced"),
    ([50.0, 51.0, 52.0], [60.0, 61.0, 62.0], "not reproduced"),
    ([50.0, 58.0, 54.0], [53.0, 51.0, 56.0], "inconclusive"),
    ([60.0], [50.0], "inconclusive"),          # one seed: no interval
])
def test_verdict_reads_the_interval(better, baseline, verdict):
  results = comparisons.compare_claims({"in32_reinvested": better,
                                        "coupled": baseline})
  assert [r["claim"] for r in results] == ["reinvested"]   # E_out rows absent
  assert results[0]["verdict"] == verdict
  line = comparisons.verdict_line(results[0])
  assert line.startswith(f"**{verdict}**: a small input embedding")
  assert "in32_reinvested - coupled" in line


def _row(name, e_in, e_out, seeds, diagonal=None):
  """A row as the suite hands it to the table: one sweep on xnli."""
  scores = [{"accuracy": {"en": 80.0, "es": s, "ru": s + 2.0}} for s in seeds]
  return dict(
      name=name, model=dict(input_embedding_size=e_in, output_embedding_size=e_out,
                            coupled=name == "coupled", num_hidden_layers=2,
                            num_output_layers=0),
      counts=dict(pt_params=2_000_000, ft_params=1_000_000), mlm_accuracy=0.5,
      similarity_diagonal=diagonal,
      sweeps={"xnli": dict(scores={"avg_metric": 60.0, "accuracy": {}},
                           std={"avg_metric": 1.0}, selected_learning_rate=1e-3,
                           num_seeds=len(seeds), seed_scores=scores)})


def test_table_gives_transfer_per_seed_and_a_verdict_per_claim(tmp_path):
  row_results = [_row("coupled", 128, 128, [50.0, 51.0, 52.0], [0.9, 0.5]),
                 _row("in32", 32, 128, [55.0, 54.0, 56.0], [0.9, 0.4]),
                 _row("in32_reinvested", 32, 128, [60.0, 61.0, 59.0], [0.9, 0.6]),
                 _row("in32_out512", 32, 512, [54.0, 57.0, 55.0], [0.95, 0.7])]
  model_dirs = {r["name"]: str(tmp_path / r["name"]) for r in row_results}
  outputs = report.write_outputs(str(tmp_path), row_results, model_dirs,
                                say=lambda m: None)
  rows = {r["name"]: r["tasks"]["xnli"] for r in outputs["table"]["rows"]}
  assert rows["coupled"]["transfer_seeds"] == [51.0, 52.0, 53.0]  # es, ru mean
  assert rows["coupled"]["transfer"] == pytest.approx(52.0)
  assert rows["coupled"]["transfer_std"] == pytest.approx(1.0)
  verdicts = {c["claim"]: c["verdict"] for c in outputs["table"]["claims"]["xnli"]}
  assert verdicts == {"reinvested": "reproduced", "output_embedding": "inconclusive"}
  markdown = (tmp_path / "results.md").read_text()
  assert "| coupled | 52.0 ± 1.0 | 51.0, 52.0, 53.0 |" in markdown
  assert "- **reproduced**: a small input embedding" in markdown
  assert "(in32_out512 - in32 = +0.3 points, 95% CI [" in markdown
  stored = json.loads((tmp_path / "results.json").read_text())
  figure = stored["figures"]["output_embedding_similarity"]
  assert figure.endswith("layer_similarity_output_embedding.png")
  assert (tmp_path / "figures" / "layer_similarity_output_embedding.png"
          ).read_bytes()[:4] == b"\x89PNG"


def test_small_scale_rows_share_one_schedule_and_resolve_three_seeds(tmp_path):
  rows = rows_lib.scale_rows("small")
  assert [r.name for r in rows] == list(rows_lib.DEMO_ROWS) + [
      "random_init"]
  assert [r.name for r in rows if not r.pretrained] == ["random_init"]
  configs = {r.name: rows_lib.load_row_config(r, {}) for r in rows}
  rows_lib.check_same_schedule(configs)          # raises on any difference
  small, demo = configs["coupled"], rows_lib.load_row_config(
      rows_lib.scale_rows("demo")[0], {})
  assert small.trainer.train_steps > demo.trainer.train_steps
  assert small.task.model.vocab_size == 2500
  options = suite.resolve_defaults(suite.SuiteOptions(
      output_dir=str(tmp_path), scale="small"))
  assert (options.num_seeds, options.tasks) == (3, ["xnli"])
  assert options.learning_rates == [5e-4, 1e-3]


def test_random_init_row_is_fine_tuned_from_its_model_config_alone(
    tmp_path, monkeypatch):
  row = rows_lib.scale_rows("small")[-1]
  config = rows_lib.load_row_config(row, {})
  model_dir = str(tmp_path / "models" / row.name / "pretrain")
  lines = []
  done = suite.pretrain_row(row, config, model_dir, suite.SuiteOptions(
      output_dir=str(tmp_path)), say=lines.append)
  assert done["eval_masked_lm_accuracy"] is None and done["global_step"] == 0
  assert done["counts"]["ft_params"] > 0
  assert (tmp_path / "models" / row.name / "pretrain" / "model_config.yaml").exists()
  assert lines == [f"[ablation] {row.name}: no pre-training (fine-tuned from "
                   "random weights)"]
  calls = []
  monkeypatch.setattr(suite.finetune_sweep, "run_sweep",
                      lambda *args, **kwargs: calls.append(args) or {
                          "records_dir": "records"})
  options = suite.resolve_defaults(suite.SuiteOptions(output_dir=str(tmp_path),
                                                      scale="small"))
  suite.finetune_row(row, model_dir, str(tmp_path), options,
                     data={"xtreme_records_dir": "xtreme"}, records={}, say=None)
  encoder = calls[0][2]
  assert list(encoder) == ["encoder.model_config"]
  assert encoder["encoder.model_config"].endswith("pretrain/model_config.yaml")
  config = finetuning_experiment.load_finetuning_config(
      params_override=dict(encoder, **{"data.task": "xnli"}))
  assert config.encoder.init_checkpoint is None
  assert config.encoder.model_config == encoder["encoder.model_config"]

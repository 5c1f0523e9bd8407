"""The sweep's one selection rule (English dev, ties to the smaller rate) and
its mean / std over seeds."""
import os

import numpy as np
import pytest

from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import sweep


def _run(rate, en_dev, ar, en):
  return {"learning_rate": rate, "english_dev_metric": en_dev,
          "scores": {"dev": xtreme_scorer.add_averages(
              "xnli", {"ar": {"accuracy": ar}, "en": {"accuracy": en}})}}


def test_sweep_selects_rate_on_english_dev_and_reports_std():
  runs = [_run(1e-5, 60.0, 40.0, 60.0), _run(1e-5, 70.0, 50.0, 70.0),
          _run(3e-5, 80.0, 30.0, 80.0), _run(3e-5, 60.0, 34.0, 60.0),
          _run(5e-5, 50.0, 90.0, 50.0), _run(5e-5, 50.0, 90.0, 50.0)]
  summary = sweep.summarize_runs(runs, "dev")
  assert summary["english_dev_by_rate"] == {"1e-05": 65.0, "3e-05": 70.0,
                                            "5e-05": 50.0}
  assert summary["selected_learning_rate"] == 3e-5
  assert summary["scores"]["accuracy"] == {"ar": 32.0, "en": 70.0}
  assert summary["scores"]["avg_accuracy"] == pytest.approx(51.0)
  assert summary["std"]["accuracy"]["ar"] == pytest.approx(np.std([30, 34], ddof=1))
  assert summary["std"]["avg_accuracy"] == pytest.approx(np.std([55, 47], ddof=1))
  table = xtreme_scorer.format_markdown({"xnli": summary["scores"]},
                                        std={"xnli": summary["std"]})
  assert "32.00 ± 2.83" in table


def test_equal_english_dev_selects_the_smaller_rate_in_any_order():
  english_dev = {1e-5: 65.0, 3e-5: 70.0, 5e-5: 70.0}
  for rates in ([1e-5, 3e-5, 5e-5], [5e-5, 3e-5, 1e-5], [5e-5, 1e-5, 3e-5]):
    runs = [_run(rate, english_dev[rate], 40.0, english_dev[rate])
            for rate in rates]
    assert sweep.summarize_runs(runs, "dev")["selected_learning_rate"] == 3e-5


def test_rates_without_an_english_dev_score_rank_last():
  assert sweep.select_learning_rate({1e-5: None, 3e-5: 0.0}) == 3e-5
  assert sweep.select_learning_rate({3e-5: None, 1e-5: None}) == 1e-5


def test_runs_without_scores_have_no_mean():
  runs = [{"learning_rate": 1e-5, "english_dev_metric": None, "scores": {}}]
  summary = sweep.summarize_runs(runs, "test")
  assert summary["selected_learning_rate"] == 1e-5
  assert summary["scores"] is None and summary["std"] is None
  assert summary["english_dev_by_rate"] == {"1e-05": None}


def test_the_reuse_key_covers_the_result_settings_and_no_path(
    tmp_path, monkeypatch, checkpoint_dir, xnli_records, tiny_cfg):
  """A run is reused only with the same result settings: a frozen-embedding
  rerun is not; the same records and checkpoint spelled by another path are."""
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import finetuning_data  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_experiment  # pylint: disable=g-import-not-at-top

  def identity(records_dir, checkpoint):
    return sweep.SweepContext(
        finetuning_data.read_metadata(records_dir), records_dir, tiny_cfg,
        None, None, init_checkpoint=checkpoint).identity

  config = finetuning_experiment.FinetuningConfig()
  inputs = identity(str(xnli_records), str(checkpoint_dir))
  absolute = sweep.run_fingerprint(config, 10, inputs)
  monkeypatch.chdir(xnli_records.parent)
  relative = sweep.run_fingerprint(config, 10, identity(
      "xnli", os.path.relpath(checkpoint_dir, xnli_records.parent)))
  assert relative == absolute
  assert absolute["init_checkpoint_sha256"] not in ("", str(checkpoint_dir))
  assert absolute["model_config"]["hidden_size"] == 64
  run_dir = str(tmp_path / "out" / "runs" / "run")
  fileio.makedirs(run_dir)
  sweep.check_run_config(run_dir, absolute)
  sweep.check_run_config(run_dir, relative)  # the same run: reused
  frozen = sweep.run_fingerprint(
      finetuning_experiment.FinetuningConfig(freeze_input_embeddings=True),
      10, inputs)
  with pytest.raises(finetuning_experiment.FinetuningError,
                     match="freeze_input_embeddings is False there, True now"
                     r"\). Pass --overwrite to start .*out again"):
    sweep.check_run_config(run_dir, frozen)
  wider = dict(absolute, model_config=dict(absolute["model_config"],
                                           hidden_size=32))
  with pytest.raises(finetuning_experiment.FinetuningError,
                     match="model_config.hidden_size is 64 there, 32 now"):
    sweep.check_run_config(run_dir, wider)


def test_results_md_shows_the_english_dev_score_of_every_rate(tmp_path):
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  runs = [_run(1e-5, 60.0, 40.0, 60.0), _run(1e-5, 70.0, 50.0, 70.0),
          _run(3e-5, 80.0, 30.0, 80.0), _run(3e-5, 60.0, 34.0, 60.0),
          _run(5e-5, None, 90.0, 50.0)]
  finetuning_runner.write_results(
      "xnli", {"score_split": "dev"}, runs, str(tmp_path),
      records_dir="records/xnli", compare_paper=False, progress=lambda s: None)
  markdown = (tmp_path / "results.md").read_text()
  assert ("| 1e-05 | 65.00 |  |\n| 3e-05 | 70.00 | selected |\n"
          "| 5e-05 | - |  |\n") in markdown
  assert "learning rate 3e-05, mean over 2 seed(s)" in markdown
  assert "Selected: the best English dev score (the mean over the rate's " \
      "seeds; equal scores: the smaller rate)" in markdown

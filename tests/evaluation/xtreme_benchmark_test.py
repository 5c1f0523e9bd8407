"""All nine tasks and the XTREME score, against the official scorer's numbers.

The expected values below are what the official XTREME `evaluate.py` (run
outside this repository on the folders `benchmark_fixtures` writes) reports
for those folders.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import benchmark_fixtures
from rembert_tf.evaluation import xtreme_benchmark as b
from rembert_tf.evaluation import xtreme_scorer as s
from rembert_tf.evaluation import xtreme_tasks

REPO = pathlib.Path(__file__).resolve().parents[2]

# The official scorer's output on benchmark_fixtures' folders.
OFFICIAL = {
    "all_task": 64.1902803808934,
    "classification": 75.87301587301587,
    "tagging": 81.50927999203861,
    "qa": 47.09796376463043,
    "retrieval": 60.82702020202019,
    "pawsx": {"avg_accuracy": 76.19047619047619},
    "xnli": {"avg_accuracy": 75.55555555555556},
    "panx": {"avg_f1": 83.1111111111111, "avg_precision": 82.41666666666667,
             "avg_recall": 84.5},
    "udpos": {"avg_f1": 79.90744887296613, "avg_precision": 80.0865800865801,
              "avg_recall": 79.74025974025975},
    "bucc2018": {"avg_f1": 54.788961038961034,
                 "avg_precision": 62.85714285714286,
                 "avg_recall": 49.52380952380952},
    "tatoeba": {"avg_accuracy": 66.86507936507935},
    "xquad": {"avg_exact_match": 21.969696969696972,
              "avg_f1": 70.35353535353535},
    "mlqa": {"avg_exact_match": 38.095238095238095,
             "avg_f1": 60.31746031746031},
    "tydiqa": {"avg_exact_match": 23.14814814814815,
               "avg_f1": 68.70370370370371},
}
OFFICIAL_BUCC = {"f1": {"de": 75.0, "fr": 72.72727272727272,
                        "ru": 71.42857142857143, "zh": 0.0},
                 "precision": {"de": 100.0, "fr": 80.0,
                               "ru": 71.42857142857143, "zh": 0.0}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
  return benchmark_fixtures.write_benchmark_folders(
      tmp_path_factory.mktemp("xtreme"))


def test_nine_tasks_equal_the_official_scorer(folders):
  results = s.evaluate_folders(*folders)
  assert list(results) == list(xtreme_tasks.TASKS)
  report = b.official_report(results)
  for key, expected in OFFICIAL.items():
    if isinstance(expected, dict):
      for metric, value in expected.items():
        assert report[key][metric] == pytest.approx(value, abs=1e-9), (key, metric)
    else:
      assert report[key] == pytest.approx(expected, abs=1e-9), key
  for metric, values in OFFICIAL_BUCC.items():
    assert report["bucc2018"][metric] == pytest.approx(values, abs=1e-9)
  assert report["udpos"]["f1"]["af"] == pytest.approx(80.0)
  assert report["tatoeba"]["accuracy"]["ar"] == pytest.approx(200 / 3)
  assert report["mlqa"]["f1"]["de"] == pytest.approx(800 / 9)
  # Every language of every task, in the benchmark's order.
  for task in xtreme_tasks.XTREME_TASKS.values():
    metric = s.task_metric(task.name).headline[0]
    assert list(report[task.name][metric]) == list(task.languages), task.name
  summary = report[b.SUMMARY_KEY]
  assert summary["score"] == pytest.approx(OFFICIAL["all_task"], abs=1e-9)
  assert summary["missing_tasks"] == [] and summary["missing_languages"] == {}


def test_every_task_entry_names_a_known_category_and_metric():
  assert b.CATEGORIES == {"classification": ("xnli", "pawsx"),
                          "tagging": ("udpos", "panx"),
                          "qa": ("xquad", "mlqa", "tydiqa"),
                          "retrieval": ("bucc2018", "tatoeba")}
  for task in xtreme_tasks.XTREME_TASKS.values():
    assert task.category in b.CATEGORY_LABELS, task.name
    assert task.metric in s.METRICS, task.name
    assert task.languages and len(set(task.languages)) == len(task.languages)
    assert set(task.paper_results) <= set(s.task_metric(task.name).table_metrics)
  assert [s.task_metric(t).name for t in ("xnli", "panx", "mlqa", "bucc2018")
          ] == ["accuracy", "entity_f1", "mlqa", "pair_f1"]
  with pytest.raises(s.ScoringError, match="Unknown task 'nope'"):
    s.task_metric("nope")


def test_partial_results_name_what_is_missing(folders):
  pred, gold = folders
  results = s.evaluate_folders(pred, gold, tasks=["xnli", "bucc2018", "tatoeba"],
                               languages=None)
  results["xnli"] = s.score_task("xnli", pred, gold, languages=["ar", "de"])
  report = b.official_report(results)
  # The official keys only where every task of theirs is present.
  assert "all_task" not in report and "classification" not in report
  assert report["retrieval"] == pytest.approx(OFFICIAL["retrieval"], abs=1e-9)
  summary = report["xtreme"]
  xnli = results["xnli"]["avg_metric"]
  assert xnli == pytest.approx(100 * (5 / 6 + 4 / 6) / 2)
  assert summary["score"] == pytest.approx(
      (xnli + OFFICIAL["bucc2018"]["avg_f1"]
       + OFFICIAL["tatoeba"]["avg_accuracy"]) / 3)
  assert summary["tasks"] == ["xnli", "bucc2018", "tatoeba"]
  assert summary["missing_tasks"] == ["pawsx", "udpos", "panx", "xquad", "mlqa",
                                      "tydiqa"]
  assert summary["categories"]["classification"] == {
      "score": xnli, "tasks": ["xnli"], "missing_tasks": ["pawsx"]}
  assert summary["categories"]["qa"]["score"] is None
  assert summary["missing_languages"]["xnli"][:3] == ["bg", "el", "en"]
  table = b.format_markdown(summary)
  assert "| classification | xnli (missing: pawsx) | " in table
  assert "| question answering | - (missing: xquad, mlqa, tydiqa) | - |" in table
  assert "| **XTREME** | 3 of 9 tasks |" in table
  assert "Missing tasks: pawsx, udpos, panx, xquad, mlqa, tydiqa" in table
  assert "xnli: mean over the languages present; missing bg, el, en" in table


def test_bucc_pairs_are_checked_and_an_empty_prediction_scores_zero(folders,
                                                                    tmp_path):
  pred, gold = folders
  assert s.score_task("bucc2018", pred, gold, languages=["zh"])["f1"] == {
      "zh": 0.0}
  bad = tmp_path / "bad"
  (bad / "bucc2018").mkdir(parents=True)
  (bad / "bucc2018/test-de.tsv").write_text("de-000001 en-000002\n")
  with pytest.raises(s.ScoringError,
                     match=r"test-de.tsv: line 1 has 1 tab-separated field"):
    s.score_task("bucc2018", bad, gold, languages=["de"])
  (bad / "bucc2018/test-de.tsv").write_text("")
  with pytest.raises(s.ScoringError, match=r"test-de.tsv is empty: expected "
                     "one gold pair"):
    s.score_task("bucc2018", pred, bad, languages=["de"])


def test_command_prints_and_writes_the_xtreme_score(folders, tmp_path):
  pred, gold = folders
  out = tmp_path / "results.json"
  done = subprocess.run(
      [sys.executable, str(REPO / "tools" / "evaluate_xtreme.py"),
       f"--prediction_folder={pred}", f"--label_folder={gold}",
       f"--output_file={out}"],
      capture_output=True, text=True, cwd=str(REPO), timeout=300, check=False,
      env=dict(os.environ, PYTHONPATH=str(REPO)))
  assert done.returncode == 0, done.stderr
  assert "| **XTREME** | 9 of 9 tasks | **64.19** |" in done.stdout
  assert "| structured prediction | udpos, panx | 81.51 |" in done.stdout
  assert "| bucc2018 | f1 | 54.79 |" in done.stdout
  written = json.loads(out.read_text())
  assert list(written)[:6] == ["all_task", "classification", "tagging", "qa",
                               "retrieval", "xtreme"]
  assert written["all_task"] == pytest.approx(OFFICIAL["all_task"], abs=1e-9)
  assert written["udpos"]["avg_f1"] == pytest.approx(
      OFFICIAL["udpos"]["avg_f1"], abs=1e-9)

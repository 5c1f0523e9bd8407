"""rembert-retrieve end to end: download layout -> predictions -> the scorer; bad input.

All cases run through the command's `main` in one process
(`testlib.run_command_cases`).
"""
import json
import random
import shutil

import pytest

import testlib
from rembert_tf.demo import retrieval_sets
from rembert_tf.evaluation import xtreme_scorer

MODULE = "rembert_tf.cli.retrieve"


def _identity_sets(root):
  """Tatoeba and BUCC sets whose "de" side is the English sentences themselves:
  any encoder retrieves them perfectly."""
  rng = random.Random(11)
  english = [e for _, e in retrieval_sets.sample_parallel(rng, "es", 24)]
  retrieval_sets.write_tatoeba(root, "de", [(e, e) for e in english])
  pairs = [(e, e) for _, e in retrieval_sets.sample_parallel(rng, "es", 36)]
  for split, chunk in (("dev", pairs[:18]), ("test", pairs[18:])):
    retrieval_sets.write_bucc_split(root, "de", split, rng, chunk[:10],
                                    chunk[10:])


@pytest.fixture(scope="module")
def runs(checkpoint_dir, demo_sets, tmp_path_factory):
  """Every case's result, from one process."""
  from rembert_tf.export import encoder_export
  tmp = tmp_path_factory.mktemp("retrieve")
  saved_model = encoder_export.export_encoder(checkpoint_dir, tmp / "saved",
                                              verify=False)
  sets = tmp / "sets"  # the demo sets (es, zh) and the identity sets (de)
  shutil.copytree(demo_sets, sets)
  _identity_sets(sets)
  no_sample = tmp / "no_sample"
  shutil.copytree(demo_sets / "download", no_sample)
  (no_sample / "bucc2018/zh-en.dev.gold").unlink()
  no_test_gold = tmp / "no_test_gold"
  shutil.copytree(demo_sets / "download", no_test_gold)
  for lang in ("es", "zh"):
    (no_test_gold / f"bucc2018/{lang}-en.test.gold").unlink()
  common = [f"--data_dir={sets / 'download'}",
            f"--label_folder={sets / 'labels'}", "--layer=2"]
  cases = {
      "checkpoint": [f"--checkpoint={checkpoint_dir}",
                     f"--output_dir={tmp / 'a'}"] + common,
      "saved_model": [f"--checkpoint={saved_model}",
                      f"--output_dir={tmp / 'b'}", "--strategy=mirrored",
                      "--batch_size=4"] + common,
      "bucc_with_gold": [f"--checkpoint={checkpoint_dir}", "--tasks=bucc2018",
                         f"--data_dir={demo_sets / 'download'}",
                         f"--output_dir={tmp / 'h'}"],
      "bucc_overwritten": [f"--checkpoint={checkpoint_dir}", "--tasks=bucc2018",
                           f"--data_dir={no_test_gold}", "--overwrite",
                           f"--output_dir={tmp / 'h'}"],
      "another_task": [f"--checkpoint={checkpoint_dir}", "--tasks=tatoeba",
                       f"--data_dir={demo_sets / 'download'}",
                       f"--output_dir={tmp / 'h'}"],
      "overlap": [f"--checkpoint={checkpoint_dir}", "--overwrite",
                  f"--output_dir={tmp / 'checkpoint_link'}"] + common,
      "no_sample_set": [f"--checkpoint={checkpoint_dir}",
                        f"--data_dir={no_sample}", f"--output_dir={tmp / 'd'}"],
      "missing_language": [f"--checkpoint={checkpoint_dir}",
                           f"--output_dir={tmp / 'e'}", "--tasks=tatoeba",
                           "--languages=es,fr"] + common,
      "exists": [f"--checkpoint={checkpoint_dir}",
                 f"--output_dir={tmp / 'a'}"] + common,
      "layer": [f"--checkpoint={checkpoint_dir}", f"--output_dir={tmp / 'f'}",
                f"--data_dir={demo_sets / 'download'}", "--layer=9"],
      "task": [f"--checkpoint={checkpoint_dir}", f"--output_dir={tmp / 'g'}",
               f"--data_dir={demo_sets / 'download'}", "--tasks=xnli"],
  }
  (tmp / "checkpoint_link").symlink_to(checkpoint_dir)
  results = testlib.run_command_cases(MODULE, list(cases.values()))
  return tmp, dict(zip(cases, results))


def test_predictions_in_the_submission_layout_score_as_results_say(runs):
  tmp, results = runs
  assert results["checkpoint"]["code"] in (0, None), results["checkpoint"]
  out = tmp / "a"
  written = json.loads((out / "results.json").read_text())
  assert (written["layer"], written["num_layers"]) == (2, 4)
  tatoeba = (out / "predictions/tatoeba/test-es.tsv").read_text().splitlines()
  assert len(tatoeba) == 30 and all(0 <= int(l) < 30 for l in tatoeba)
  bucc_lines = (out / "predictions/bucc2018/test-zh.tsv").read_text().splitlines()
  assert all(l.startswith("zh-") and "\ten-" in l for l in bucc_lines)
  # The scorer, on the files written, gives what results.json reports:
  # Tatoeba against the given labels, BUCC against the test gold the demo
  # sets keep (copied to OUTPUT_DIR/labels).
  assert sorted(p.name for p in (out / "labels/bucc2018").iterdir()) == [
      "test-de.tsv", "test-es.tsv", "test-zh.tsv"]
  # Languages in the benchmark's order, then the others (es is no BUCC one).
  for task, labels, order in (("tatoeba", tmp / "sets/labels",
                               ["de", "es", "zh"]),
                              ("bucc2018", out / "labels", ["de", "zh", "es"])):
    rescored = xtreme_scorer.score_task(task, out / "predictions", labels)
    assert rescored == written["scores"][task], task
    assert list(rescored[xtreme_scorer.task_metric(task).headline[0]]) == order
  bucc = written["tasks"]["bucc2018"]
  assert set(bucc["thresholds"]) == {"de", "es", "zh"}
  assert bucc["num_predictions"]["zh"] == len(bucc_lines)
  assert 0 <= bucc["sample_scores"]["es"]["f1"] <= 100
  stdout = results["checkpoint"]["stdout"]
  assert "layer 2 of 4" in stdout and "| tatoeba | accuracy |" in stdout
  assert "### bucc2018 thresholds (chosen on the sample set)" in stdout


def test_a_saved_model_on_two_replicas_predicts_the_same(runs):
  tmp, results = runs
  assert results["saved_model"]["code"] in (0, None), results["saved_model"]
  for task, lang in (("tatoeba", "es"), ("tatoeba", "zh"), ("bucc2018", "es")):
    name = f"predictions/{task}/test-{lang}.tsv"
    assert (tmp / "b" / name).read_text() == (tmp / "a" / name).read_text()


def test_identical_sentences_are_retrieved_perfectly(runs):
  tmp, results = runs
  assert results["checkpoint"]["code"] in (0, None), results["checkpoint"]
  scores = json.loads((tmp / "a/results.json").read_text())["scores"]
  assert scores["tatoeba"]["accuracy"]["de"] == 100.0
  assert scores["bucc2018"]["f1"]["de"] == 100.0


def test_overwrite_replaces_predictions_and_drops_stale_labels(runs):
  tmp, results = runs
  assert results["bucc_with_gold"]["code"] in (0, None)
  assert results["bucc_overwritten"]["code"] in (0, None)
  # Default layer for 4 blocks: 4 // 2 + 2 = 4.
  assert "layer 4 of 4" in results["bucc_with_gold"]["stdout"]
  # The second run had no test gold: the first run's labels are gone, and
  # its results have no scores to report.
  assert not (tmp / "h/labels/bucc2018").exists()
  written = json.loads((tmp / "h/results.json").read_text())
  assert written["scores"] == {}
  assert "no gold labels to score them" in results["bucc_overwritten"]["stdout"]
  assert (tmp / "h/predictions/bucc2018/test-es.tsv").exists()
  # A later run for another task was refused: the results stay BUCC's.
  assert results["another_task"]["code"] == 1
  assert list(written["tasks"]) == ["bucc2018"]
  assert sorted(p.name for p in (tmp / "h/predictions").iterdir()) == [
      "bucc2018"]


@pytest.mark.parametrize("case,expected,output", [
    ("no_sample_set", ["no_sample/bucc2018/zh-en.dev.gold",
                       "a BUCC language without a sample set",
                       "the threshold is chosen on BUCC's sample set"], "d"),
    ("missing_language", ["tatoeba/fr-en.fr", "run XTREME's download script"],
     "e"),
    ("exists", ["a/predictions already exists", "--overwrite"], None),
    ("another_task", ["h/predictions already exists", "--overwrite"], None),
    ("overlap", ["--output_dir", "checkpoint_link is --checkpoint",
                 "Choose --output_dir outside --checkpoint"], None),
    ("layer", ["--layer 9: the encoder of", "has 4 layers; choose 1..4"], "f"),
    ("task", ["--tasks xnli: retrieval tasks are bucc2018, tatoeba"], "g"),
])
def test_bad_input_is_one_line_and_writes_nothing(runs, case, expected, output):
  tmp, results = runs
  result = results[case]
  lines = result["stderr"].strip().splitlines()
  assert result["code"] == 1, result
  assert len(lines) == 1 and lines[0].startswith("rembert-retrieve: error: ")
  for part in expected:
    assert part in lines[0], (part, lines[0])
  if output:
    assert not (tmp / output).exists()

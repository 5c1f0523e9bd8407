"""rembert-retrieve --data_source tfds: TFDS -> predictions -> the scorer; the
same predictions as from the download layout; bad input.

Every case runs through the command's `main` in one process under
`tfds.testing.mock_data` (`tfds_testlib.run_command_cases`), with metadata
written as prepared datasets have it (`retrieval_tfds_fixtures`).
"""
import json
import pathlib

import pytest

import retrieval_tfds_fixtures as fixtures
import testlib
import tfds_testlib
from rembert_tf.evaluation import xtreme_benchmark
from rembert_tf.evaluation import xtreme_scorer

HERE = pathlib.Path(__file__).resolve().parent
MODULE = "rembert_tf.cli.retrieve"
PROG = "rembert-retrieve"
# Bad input: case -> (extra argv, what the one line names); {tfds} is the
# TFDS folder, {download} the download folder.
ERRORS = {
    "not_prepared": (["--data_source=tfds", "--tfds_data_dir={tfds}",
                      "--languages=fr"],
                     ["TFDS dataset bucc/bucc_fr is not prepared in {tfds}",
                      "`tfds build bucc --config bucc_fr --data_dir {tfds}`"]),
    "missing_split": (["--data_source=tfds", "--tfds_data_dir={tfds}",
                       "--tasks=tatoeba", "--languages=ar"],
                      ["TFDS dataset tatoeba/tatoeba_ar in {tfds} has no "
                       "split 'train' (its splits: test)",
                       "`tfds build tatoeba --config tatoeba_ar --data_dir "
                       "{tfds}`", "or leave ar out (--languages)"]),
    "data_dir_with_tfds": (["--data_source=tfds", "--tfds_data_dir={tfds}",
                            "--data_dir={download}"],
                           ["--data_dir is XTREME's download/ folder",
                            "give --tfds_data_dir alone"]),
    "download_without_folder": ([], ["Give --data_dir (the XTREME download/ "
                                     "folder), or --data_source tfds"]),
    "tfds_folder_with_download": (["--data_dir={download}",
                                   "--tfds_data_dir={tfds}"],
                                  ["--tfds_data_dir is read with "
                                   "--data_source tfds"]),
}


@pytest.fixture(scope="module")
def runs(checkpoint_dir, tmp_path_factory):
  """(tmp, {case: result}): every case from one process."""
  tmp = tmp_path_factory.mktemp("retrieve_tfds")
  fixtures.write_tatoeba_download(tmp)
  folders = dict(tfds=tmp / "tfds", download=tmp / "download")
  common = [f"--checkpoint={checkpoint_dir}", "--layer=2"]
  cases = {
      "tfds": common + ["--data_source=tfds", f"--tfds_data_dir={tmp / 'tfds'}",
                        f"--output_dir={tmp / 'from_tfds'}"],
      "download": common + [f"--data_dir={tmp / 'download'}", "--tasks=tatoeba",
                            f"--label_folder={tmp / 'labels'}",
                            f"--output_dir={tmp / 'from_download'}"],
      # No --tfds_data_dir: TFDS's default, here TFDS_DATA_DIR.
      "tfds_default": common + ["--data_source=tfds", "--tasks=tatoeba",
                                f"--output_dir={tmp / 'from_default'}"],
  }
  for case, (argv, _) in ERRORS.items():
    cases[case] = common + [a.format(**folders) for a in argv] + [
        f"--output_dir={tmp / case}"]
  results = tfds_testlib.run_command_cases(
      MODULE, "retrieval_tfds_fixtures:tfds_examples", tmp / "tfds",
      list(cases.values()), paths=[HERE])
  return tmp, folders, dict(zip(cases, results))


def _assert_ran(result):
  assert result["code"] == 0, result
  assert "error" not in result["stderr"].lower(), result["stderr"]


def _lines(path: pathlib.Path):
  return path.read_text().splitlines()


def _tatoeba_accuracy(predictions, labels) -> float:
  return 100 * sum(p == g for p, g in zip(predictions, labels)) / len(labels)


def _f1(predictions, gold) -> float:
  found = len(set(predictions) & set(gold))
  if not found:
    return 0.0
  precision, recall = found / len(set(predictions)), found / len(set(gold))
  return 100 * 2 * precision * recall / (precision + recall)


def test_tfds_predictions_in_the_submission_layout_score_as_computed(runs):
  tmp, _, results = runs
  _assert_ran(results["tfds"])
  out = tmp / "from_tfds"
  written = json.loads((out / "results.json").read_text())
  # Every prepared language, in the benchmark's order; tatoeba_ar lacks the
  # split Tatoeba reads and is not taken.
  assert written["tasks"]["tatoeba"]["languages"] == ["es", "ru", "zh"]
  assert written["tasks"]["bucc2018"]["languages"] == ["ru", "zh"]
  expected = {"tatoeba": {}, "bucc2018": {}}
  for lang in ("es", "ru", "zh"):
    predicted = _lines(out / f"predictions/tatoeba/test-{lang}.tsv")
    labels = _lines(out / f"labels/tatoeba/test-{lang}.tsv")
    assert labels == [str(i) for i in range(len(fixtures.tatoeba_pairs(lang)))]
    expected["tatoeba"][lang] = _tatoeba_accuracy(predicted, labels)
  for lang in ("ru", "zh"):
    predicted = _lines(out / f"predictions/bucc2018/test-{lang}.tsv")
    assert all(l.startswith(f"{lang}-") and "\ten-" in l for l in predicted)
    gold = [f"{s}\t{t}" for s, _, t, _ in fixtures.bucc_pairs(lang, "test")]
    assert sorted(_lines(out / f"labels/bucc2018/test-{lang}.tsv")) == sorted(gold)
    expected["bucc2018"][lang] = _f1(predicted, gold)
  # English sentences paired with themselves are found, whatever the encoder.
  assert expected["tatoeba"]["ru"] == 100.0
  scored = xtreme_scorer.evaluate_folders(out / "predictions", out / "labels")
  assert scored["tatoeba"]["accuracy"] == pytest.approx(expected["tatoeba"])
  assert scored["bucc2018"]["f1"] == pytest.approx(expected["bucc2018"])
  assert {t: written["scores"][t] for t in scored} == scored
  report = xtreme_benchmark.official_report(scored)
  assert report["retrieval"] == pytest.approx(
      (sum(expected["bucc2018"].values()) / 2
       + sum(expected["tatoeba"].values()) / 3) / 2)
  assert set(written["tasks"]["bucc2018"]["thresholds"]) == {"ru", "zh"}


def test_the_same_sentences_from_download_and_tfds_give_the_same_predictions(
    runs):
  tmp, _, results = runs
  _assert_ran(results["download"])
  from_download = json.loads((tmp / "from_download/results.json").read_text())
  from_tfds = json.loads((tmp / "from_tfds/results.json").read_text())
  for lang in fixtures.TATOEBA_SIZES:
    name = f"predictions/tatoeba/test-{lang}.tsv"
    assert ((tmp / "from_download" / name).read_text()
            == (tmp / "from_tfds" / name).read_text()), lang
    assert (from_download["scores"]["tatoeba"]["accuracy"][lang]
            == from_tfds["scores"]["tatoeba"]["accuracy"][lang])


def test_without_tfds_data_dir_tfds_default_is_read(runs):
  tmp, _, results = runs
  _assert_ran(results["tfds_default"])
  for lang in ("es", "ru", "zh"):
    name = f"predictions/tatoeba/test-{lang}.tsv"
    assert ((tmp / "from_default" / name).read_text()
            == (tmp / "from_tfds" / name).read_text()), lang


@pytest.mark.parametrize("case", ERRORS)
def test_bad_input_is_one_line_naming_the_fix_and_writes_nothing(runs, case):
  tmp, folders, results = runs
  testlib.assert_one_line_error(PROG, results[case], *(
      part.format(**folders) for part in ERRORS[case][1]))
  assert not (tmp / case).exists()

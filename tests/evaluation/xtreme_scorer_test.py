"""Scorer tests: every metric against hand-computed numbers."""
import json

import pytest

import testlib

from rembert_tf.common import errors
from rembert_tf.evaluation import xtreme_metrics as m
from rembert_tf.evaluation import xtreme_scorer as s

def _write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _squad(qas):
  """qas: {qid: [answers]} -> SQuAD v1.1 JSON text."""
  return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "c", "qas": [
          {"id": q, "question": "?", "answers": [
              {"text": a, "answer_start": 0} for a in answers]}
          for q, answers in qas.items()]}]}]}, ensure_ascii=False)


# --- normalisation -----------------------------------------------------------


def test_squad_normalisation():
  assert m.squad_normalize("The  Eiffel-Tower, a landmark!") == "eiffeltower landmark"
  assert m.squad_exact_match("the eiffel tower", "Eiffel Tower.") == 1.0
  # pred tokens [eiffel, tower, paris], gold [eiffel, tower]: P=2/3 R=1 F1=0.8
  assert m.squad_f1("Eiffel Tower Paris", "the Eiffel Tower") == pytest.approx(0.8)
  assert m.squad_f1("", "x") == 0.0


def test_mlqa_german_and_spanish_articles():
  assert m.mlqa_normalize("Die Katze, der Hund!", "de") == "katze hund"
  assert m.mlqa_exact_match("der Hund", "Hund", "de") == 1.0
  # Spanish articles removed, not English ones.
  assert m.mlqa_normalize("Los gatos y la casa", "es") == "gatos y casa"
  assert m.mlqa_normalize("the casa", "es") == "the casa"
  # SQuAD normalisation would keep "der".
  assert m.squad_exact_match("der Hund", "Hund") == 0.0


def test_mlqa_unicode_punctuation():
  # «» and ¿? are Unicode punctuation: removed by MLQA, kept by SQuAD v1.1.
  assert m.mlqa_normalize("«¿Qué?»", "es") == "qué"
  assert m.squad_normalize("«Qué»") == "«qué»"


def test_mlqa_arabic_article():
  # Every "ال" becomes a space: "الكتاب" -> " كتاب".
  assert m.mlqa_normalize("الكتاب", "ar") == "كتاب"
  assert m.mlqa_exact_match("الكتاب", "كتاب", "ar") == 1.0
  # pred [كتاب, جديد] vs gold [كتاب]: P=1/2 R=1 F1=2/3
  assert m.mlqa_f1("الكتاب الجديد", "كتاب", "ar") == pytest.approx(2 / 3)


def test_mlqa_chinese_mixed_segmentation():
  assert m.mixed_segmentation("北京abc 大学") == ["北", "京", "abc", "大", "学"]
  assert m.mlqa_normalize("北京大学。", "zh") == "北 京 大 学"
  # pred [北,京,大,学], gold [北,京]: P=1/2 R=1 F1=2/3
  assert m.mlqa_f1("北京大学", "北京", "zh") == pytest.approx(2 / 3)
  assert m.mlqa_exact_match("北京", "北京。", "zh") == 1.0
  with pytest.raises(ValueError, match="fr"):
    m.mlqa_normalize("x", "fr")


# --- folder scoring ----------------------------------------------------------


@pytest.fixture
def folders(tmp_path):
  pred, gold = tmp_path / "pred", tmp_path / "gold"
  # xnli: en 3/4 correct, ar 1/2.
  _write(gold / "xnli/test-en.tsv", "a\tb\tentailment\na\tb\tneutral\n"
         "a\tb\tcontradiction\na\tb\tneutral\n")
  _write(pred / "xnli/test-en.tsv", "entailment\nneutral\ncontradiction\nentailment\n")
  _write(gold / "xnli/test-ar.tsv", "entailment\nneutral\n")
  _write(pred / "xnli/test-ar.tsv", "entailment\nentailment\n")
  # panx en: gold entities PER(0-1), LOC(3); predicted PER(0-1), ORG(3), LOC(5)
  # -> tp=1, pred=3, gold=2: P=1/3 R=1/2 F1=0.4
  _write(gold / "panx/test-en.tsv", "Ann\tB-PER\nLee\tI-PER\nin\tO\nRome\tB-LOC\n\n"
         "x\tO\ny\tO\n")
  _write(pred / "panx/test-en.tsv", "B-PER\nI-PER\nO\nB-ORG\n\nO\nB-LOC\n")
  # mlqa zh: q1 exact (punctuation), q2 F1 2/3 EM 0 -> EM 50, F1 83.33
  _write(gold / "mlqa/test-zh.json", _squad({"q1": ["北京。"], "q2": ["北京"]}))
  _write(pred / "mlqa/test-zh.json", json.dumps({"q1": "北京", "q2": "北京大学"}))
  # mlqa ar: q1 exact after article removal -> 100 / 100
  _write(gold / "mlqa/test-ar.json", _squad({"q1": ["كتاب", "الكتب"]}))
  _write(pred / "mlqa/test-ar.json", json.dumps({"q1": "الكتاب"}))
  # tydiqa en: q1 EM (max over answers), q2 F1 0.8 -> EM 50 F1 90
  _write(gold / "tydiqa/test-en.json",
         _squad({"q1": ["wrong", "the cat"], "q2": ["the Eiffel Tower"]}))
  _write(pred / "tydiqa/test-en.json",
         json.dumps({"q1": "Cat", "q2": "Eiffel Tower Paris"}))
  return pred, gold


def test_evaluate_folders_hand_computed(folders):
  pred, gold = folders
  r = s.evaluate_folders(pred, gold)
  assert r["xnli"]["accuracy"] == {"ar": 50.0, "en": 75.0}
  assert r["xnli"]["avg_accuracy"] == pytest.approx(62.5)
  assert r["xnli"]["avg_metric"] == pytest.approx(62.5)
  assert r["panx"]["f1"]["en"] == pytest.approx(40.0)
  assert r["panx"]["precision"]["en"] == pytest.approx(100 / 3)
  assert r["panx"]["recall"]["en"] == pytest.approx(50.0)
  assert r["panx"]["avg_metric"] == pytest.approx(40.0)
  assert r["mlqa"]["exact_match"] == {"ar": 100.0, "zh": 50.0}
  assert r["mlqa"]["f1"]["zh"] == pytest.approx(100 * (1 + 2 / 3) / 2)
  assert r["mlqa"]["avg_metric"] == pytest.approx(
      (75.0 + (100 + 100 * (1 + 2 / 3) / 2) / 2) / 2)
  assert r["tydiqa"]["exact_match"]["en"] == pytest.approx(50.0)
  assert r["tydiqa"]["f1"]["en"] == pytest.approx(90.0)
  table = s.format_markdown(r, compare_paper=True)
  assert "| xnli | accuracy | 62.50 | 70.70 | 71.30 |" in table
  assert "| mlqa | exact_match | 75.00 | 37.30 | - |" in table


def test_length_mismatch_names_both_files(folders):
  pred, gold = folders
  _write(pred / "xnli/test-ar.tsv", "entailment\n")
  with pytest.raises(s.ScoringError) as e:
    s.evaluate_folders(pred, gold, tasks=["xnli"])
  assert "xnli/test-ar.tsv has 1 predictions" in str(e.value)
  assert str(gold / "xnli/test-ar.tsv") in str(e.value)


def test_tag_and_qa_mismatches(folders):
  pred, gold = folders
  _write(pred / "panx/test-en.tsv", "B-PER\nI-PER\nO\n\nO\nO\n")
  with pytest.raises(s.ScoringError, match="sentence 0 has 3 tags"):
    s.score_task("panx", pred, gold)
  _write(pred / "mlqa/test-ar.json", json.dumps({}))
  with pytest.raises(s.ScoringError, match="1 missing"):
    s.score_task("mlqa", pred, gold)
  r = s.score_task("mlqa", pred, gold, allow_missing_answers=True)
  assert r["exact_match"]["ar"] == 0.0


def test_missing_label_file_is_named(folders):
  pred, gold = folders
  _write(pred / "xnli/test-de.tsv", "entailment\n")
  with pytest.raises(s.ScoringError, match=r"Missing label file .*xnli/test-de.tsv"):
    s.score_task("xnli", pred, gold)


def test_scores_json_has_the_official_shape(folders, tmp_path):
  pred, gold = folders
  out = tmp_path / "scores.json"
  scores = s.evaluate_folders(pred, gold, tasks=["xnli", "tydiqa"])
  s.write_json(scores, out)
  scores = json.loads(out.read_text())
  assert list(scores) == ["xnli", "tydiqa"]
  assert scores["tydiqa"]["avg_metric"] == pytest.approx(70.0)
  assert set(scores["tydiqa"]) == {"exact_match", "f1", "avg_exact_match",
                                   "avg_f1", "avg_metric"}
  assert list(scores["xnli"]["accuracy"]) == ["ar", "en"]  # benchmark order


def test_headline_score_is_the_selection_metric(folders):
  pred, gold = folders
  r = s.evaluate_folders(pred, gold)
  assert s.headline_score("tydiqa", r["tydiqa"], "en") == pytest.approx(70.0)
  assert s.headline_score("panx", r["panx"], "en") == pytest.approx(40.0)
  assert s.headline_score("xnli", r["xnli"], "de") is None


def _one_line_error(capsys, *args, **kwargs):
  """Runs the scorer as the command does; returns (exit code, stderr)."""
  command = errors.command("rembert-evaluate-xtreme")(
      lambda argv: s.evaluate_folders(*args, **kwargs))
  with pytest.raises(SystemExit) as e:
    command([])
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "Traceback" not in err
  assert "--prediction_folder" not in err   # no --help dump
  return e.value.code, err


@pytest.mark.parametrize("case", ["no_paragraphs", "empty_labels",
                                  "empty_predictions", "binary", "no_folder"])
def test_bad_files_are_one_line_naming_file_and_field(folders, capsys, case):
  pred, gold = folders
  tasks, expected = ["xnli"], None
  if case == "no_paragraphs":
    _write(gold / "tydiqa/test-en.json", json.dumps({"data": [{"title": "t"}]}))
    tasks, expected = ["tydiqa"], ["tydiqa/test-en.json", "'paragraphs'"]
  elif case == "empty_labels":
    _write(gold / "xnli/test-ar.tsv", "")
    expected = ["xnli/test-ar.tsv is empty", "one label per line"]
  elif case == "empty_predictions":
    _write(pred / "mlqa/test-ar.json", "")
    tasks, expected = ["mlqa"], ["mlqa/test-ar.json is not valid JSON"]
  elif case == "binary":
    (pred / "xnli/test-en.tsv").write_bytes(b"\x80\x81\xfe\x00" * 20)
    expected = ["xnli/test-en.tsv is not UTF-8 text"]
  else:
    pred = pred / "nope"
    expected = ["nope does not exist"]
  code, err = _one_line_error(capsys, pred, gold, tasks=tasks)
  assert code == errors.EXIT_ERROR
  assert err.startswith("rembert-evaluate-xtreme: error: ")
  for part in expected:
    assert part in err


def test_output_file_where_no_file_can_go_is_refused_before_scoring(folders,
                                                                    tmp_path):
  pred, gold = folders
  (tmp_path / "a_file").write_text("x")
  (tmp_path / "loop").symlink_to("loop")
  base = [f"--prediction_folder={pred}", f"--label_folder={gold}",
          "--tasks=xnli"]
  cases = [
      (f"{tmp_path}/a_file/scores.json",
       f"{tmp_path}/a_file is a file, not a directory"),
      (str(tmp_path / "pred"),
       f"--output_file {tmp_path}/pred is a directory; give the path of the "
       "JSON file"),
      (f"{tmp_path}/loop/scores.json", f"{tmp_path}/loop is a symbolic link "
       "that leads nowhere"),
  ]
  new = f"{tmp_path}/new/scores.json"
  refused_later = [  # After the first write: a rerun, inputs as outputs.
      (new, f"{new} already exists; choose another output or pass "
       "--overwrite"),
      (f"{pred}/xnli/scores.json", f"--output_file {pred}/xnli/scores.json "
       f"lies inside --prediction_folder {pred}"),
      (f"{tmp_path}/gold_link/scores.json", f"--output_file {tmp_path}/"
       f"gold_link/scores.json lies inside --label_folder {gold}")]
  (tmp_path / "gold_link").symlink_to(gold)
  results = testlib.run_command_cases(
      "rembert_tf.cli.evaluate_xtreme",
      [base + [f"--output_file={out}"] for out, _ in cases] +
      [base + [f"--output_file={new}"]] +
      [base + [f"--output_file={out}"] for out, _ in refused_later] +
      [base + [f"--output_file={new}", "--overwrite"]])
  for case, result in zip(cases + [None] + refused_later, results):
    if case is None:
      continue
    part = case[1]
    testlib.assert_one_line_error("rembert-evaluate-xtreme", result, part)
    assert "| xnli |" not in result["stdout"]  # refused before scoring
  assert results[len(cases)]["code"] == 0, results[len(cases)]
  assert results[-1]["code"] == 0, results[-1]
  assert json.loads((tmp_path / "new/scores.json").read_text())["xnli"]
  assert (tmp_path / "a_file").read_text() == "x"
  assert not (pred / "xnli" / "scores.json").exists()

"""Prediction and label folders for all nine XTREME tasks and all their languages.

Small, deterministic and different per language: each task's predictions are
right in some places and wrong in others (a tag changed, a pair dropped, a
line number off by one, a partial answer), so every metric takes a value
strictly between its extremes somewhere. The numbers the tests expect on
these folders are the official XTREME scorer's on the same files.
"""
import json
import pathlib

from rembert_tf.evaluation import xtreme_tasks

LANGS = {name: task.languages for name, task in xtreme_tasks.XTREME_TASKS.items()}
UPOS = ("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ "
        "SYM VERB X").split()


def _write(path: pathlib.Path, text: str):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _lines(values) -> str:
  return "".join(f"{v}\n" for v in values)


def _classification(root_pred, root_gold, task, labels):
  for i, lang in enumerate(LANGS[task]):
    gold = [labels[(j * 2 + i) % len(labels)] for j in range(6)]
    pred = [labels[(labels.index(g) + 1) % len(labels)] if (j + i) % 4 == 0
            else g for j, g in enumerate(gold)]
    _write(root_gold / task / f"test-{lang}.tsv", _lines(gold))
    _write(root_pred / task / f"test-{lang}.tsv", _lines(pred))


def _sentences_text(sentences) -> str:
  return "".join(_lines(s) + "\n" for s in sentences)


def _udpos(root_pred, root_gold):
  for i, lang in enumerate(LANGS["udpos"]):
    gold = [[UPOS[(s * 7 + w * 3 + i) % len(UPOS)] for w in range(4 + s)]
            for s in range(3)]
    pred = [[UPOS[(UPOS.index(t) + 1) % len(UPOS)] if (s + w * 3 + i) % 5 == 0
             else t for w, t in enumerate(sentence)]
            for s, sentence in enumerate(gold)]
    _write(root_gold / "udpos" / f"test-{lang}.tsv", _sentences_text(gold))
    _write(root_pred / "udpos" / f"test-{lang}.tsv", _sentences_text(pred))


def _panx(root_pred, root_gold):
  gold = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "I-ORG", "I-ORG", "O"],
          ["O", "B-LOC", "O", "B-PER"]]
  for i, lang in enumerate(LANGS["panx"]):
    pred = [list(s) for s in gold]
    pred[i % 3][(i // 3) % len(pred[i % 3])] = "O"
    if i % 4 == 1:
      pred[1][1] = "B-ORG"
    if i % 5 == 2:
      pred[2][0] = "B-MISC"
    _write(root_gold / "panx" / f"test-{lang}.tsv", _sentences_text(gold))
    _write(root_pred / "panx" / f"test-{lang}.tsv", _sentences_text(pred))


def _bucc(root_pred, root_gold):
  for i, lang in enumerate(LANGS["bucc2018"]):
    gold = [(f"{lang}-{k:06d}", f"en-{(k * 7 + i) % 50:06d}")
            for k in range(5 + i)]
    if i == 3:   # nothing mined: an empty prediction file scores 0
      pred = []
    else:
      pred = [p for k, p in enumerate(gold) if k % 3 != i % 3]
      pred += [(f"{lang}-{90 + k:06d}", f"en-{k:06d}") for k in range(i)]
      pred += pred[:1]   # a pair written twice counts once
    _write(root_gold / "bucc2018" / f"test-{lang}.tsv",
           _lines("\t".join(p) for p in gold))
    _write(root_pred / "bucc2018" / f"test-{lang}.tsv",
           _lines("\t".join(p) for p in pred))


def _tatoeba(root_pred, root_gold):
  for i, lang in enumerate(LANGS["tatoeba"]):
    n = 6 + i % 3
    gold = [(j * 5 + i) % n for j in range(n)]
    pred = [(g + 1) % n if (j + i) % 3 == 0 else g for j, g in enumerate(gold)]
    _write(root_gold / "tatoeba" / f"test-{lang}.tsv", _lines(gold))
    _write(root_pred / "tatoeba" / f"test-{lang}.tsv", _lines(pred))


def _squad_json(answers) -> str:
  """{qid: [gold texts]} -> SQuAD v1.1 JSON."""
  return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "c", "qas": [
          {"id": q, "question": "?", "answers": [
              {"text": a, "answer_start": 0} for a in texts]}
          for q, texts in answers.items()]}]}]}, ensure_ascii=False)


# Per MLQA language: (gold, prediction) pairs exercising its normalisation.
MLQA_ANSWERS = {
    "en": [("the red cat", "red cat."), ("Paris", "in Paris"), ("1999", "2000")],
    "es": [("el gato", "gato"), ("la casa roja", "casa"), ("Madrid", "Roma")],
    "de": [("der Hund", "Hund!"), ("die Stadt Berlin", "Berlin"),
           ("ein Haus", "das Haus")],
    "ar": [("الكتاب", "كتاب"), ("باريس", "باريس فرنسا"), ("القطة", "كلب")],
    "hi": [("भारत", "भारत।"), ("दिल्ली शहर", "दिल्ली"), ("गंगा", "यमुना")],
    "vi": [("của Hà Nội", "Hà Nội"), ("con mèo", "mèo"), ("sông", "núi")],
    "zh": [("北京大学", "北京"), ("上海", "上海。"), ("长江", "黄河")],
}
SQUAD_ANSWERS = [("the Eiffel Tower", "Eiffel Tower"),
                 ("in 1889", "1889 in Paris"), ("Gustave Eiffel", "Eiffel"),
                 ("iron", "steel")]


def _qa(root_pred, root_gold, task):
  for i, lang in enumerate(LANGS[task]):
    if task == "mlqa":
      pairs = MLQA_ANSWERS[lang]
    else:
      pairs = SQUAD_ANSWERS[i % 2:] + SQUAD_ANSWERS[:i % 2]
      pairs = pairs[:2 + i % 3]
    gold = {f"{task}-{lang}-{k}": [g] for k, (g, _) in enumerate(pairs)}
    pred = {f"{task}-{lang}-{k}": p for k, (_, p) in enumerate(pairs)}
    _write(root_gold / task / f"test-{lang}.json", _squad_json(gold))
    _write(root_pred / task / f"test-{lang}.json",
           json.dumps(pred, ensure_ascii=False))


def write_benchmark_folders(root: pathlib.Path, tasks=None):
  """ROOT/predictions and ROOT/labels for `tasks` (default: all nine)."""
  pred, gold = root / "predictions", root / "labels"
  tasks = tasks or xtreme_tasks.TASKS
  writers = {
      "xnli": lambda: _classification(pred, gold, "xnli",
                                      ["contradiction", "entailment", "neutral"]),
      "pawsx": lambda: _classification(pred, gold, "pawsx", ["0", "1"]),
      "udpos": lambda: _udpos(pred, gold),
      "panx": lambda: _panx(pred, gold),
      "xquad": lambda: _qa(pred, gold, "xquad"),
      "mlqa": lambda: _qa(pred, gold, "mlqa"),
      "tydiqa": lambda: _qa(pred, gold, "tydiqa"),
      "bucc2018": lambda: _bucc(pred, gold),
      "tatoeba": lambda: _tatoeba(pred, gold),
  }
  for task in tasks:
    writers[task]()
  return pred, gold

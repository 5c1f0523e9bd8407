"""Scores XTREME prediction folders against label folders, like the official scorer.

Builds on the metric definitions in `xtreme_metrics` (no Model Garden piece
covers XTREME scoring). Folder layout, for both predictions and labels:

```
FOLDER/<task>/<split>-<lang>.tsv    xnli, pawsx: one label per line
                                     panx: one tag per line, blank line between
                                     sentences
FOLDER/<task>/<split>-<lang>.json   xquad, mlqa, tydiqa: predictions
                                     {question_id: answer_text}; labels are
                                     SQuAD v1.1 JSON ({"data": [...]})
```
A label TSV may also be a raw XTREME data file (`sentence1<TAB>sentence2<TAB>
label`, `token<TAB>tag`): the last tab-separated field of a line is the label.

The result has the official scorer's shape, scores in percent:
`{task: {metric: {lang: score}, "avg_<metric>": x, "avg_metric": y}}`, where
`avg_metric` is accuracy (xnli, pawsx), F1 (panx) or the mean of exact match
and F1 (QA tasks).

Example:
```python
from rembert_tf.evaluation import xtreme_scorer
results = xtreme_scorer.evaluate_folders("preds/", "labels/", tasks=["xnli"],
                                         split="dev")
print(xtreme_scorer.format_markdown(results, compare_paper=True))
xtreme_scorer.write_json(results, "scores.json")
```
"""
import json
import math
import os
import pathlib
import tempfile
from typing import Dict, List, Optional, Sequence

from rembert_tf.evaluation import xtreme_metrics

# Languages per task, in the benchmark's order.
TASK_LANGUAGES = {
    "xnli": "ar bg de el en es fr hi ru sw th tr ur vi zh".split(),
    "pawsx": "de en es fr ja ko zh".split(),
    "panx": ("ar he vi id jv ms tl eu ml ta te af nl en de el bn hi mr ur fa "
             "fr it pt es bg ru ja ka ko th sw yo my zh kk tr et fi hu").split(),
    "xquad": "en es de el ru tr ar vi th zh hi".split(),
    "mlqa": "en es de ar hi vi zh".split(),
    "tydiqa": "en ar bn fi id ko ru sw te".split(),
}
TASKS = tuple(TASK_LANGUAGES)
CLASSIFICATION_TASKS = ("xnli", "pawsx")
TAGGING_TASKS = ("panx",)
QA_TASKS = ("xquad", "mlqa", "tydiqa")
TASK_METRICS = {
    "xnli": ("accuracy",), "pawsx": ("accuracy",),
    "panx": ("f1", "precision", "recall"),
    "xquad": ("exact_match", "f1"), "mlqa": ("exact_match", "f1"),
    "tydiqa": ("exact_match", "f1"),
}
# The paper's averages (base scale; seed results table): (coupled, decoupled).
PAPER_RESULTS = {
    "xnli": {"accuracy": (70.7, 71.3)},
    "pawsx": {"accuracy": (85.3, 85.0)},
    "panx": {"f1": (69.2, 68.9)},
    "xquad": {"exact_match": (46.2, 46.9), "f1": (63.2, 63.8)},
    "mlqa": {"exact_match": (37.3, None), "f1": (53.1, 53.1)},
    "tydiqa": {"exact_match": (None, 42.8), "f1": (None, 58.1)},
}


class ScoringError(ValueError):
  """A prediction or label file is missing, malformed or does not match."""


def file_extension(task: str) -> str:
  return "json" if task in QA_TASKS else "tsv"


def _check_task(task: str):
  if task not in TASK_LANGUAGES:
    raise ScoringError(f"Unknown task {task!r}; XTREME tasks here are "
                       f"{', '.join(TASKS)}.")


def _open_text(path):
  path = pathlib.Path(path)
  if not path.is_file():
    raise ScoringError(f"Missing file {path}.")
  return path.open("r", encoding="utf-8")


# --- Readers -----------------------------------------------------------------


def read_labels(path) -> List[str]:
  """One label per line; the last tab-separated field is the label."""
  with _open_text(path) as f:
    return [line.rstrip("\r\n").split("\t")[-1].strip() for line in f]


def read_tags(path) -> List[List[str]]:
  """One tag per line (last tab-separated field), blank line between sentences."""
  sentences, current = [], []
  with _open_text(path) as f:
    for line in f:
      line = line.strip()
      if line:
        current.append(line.split("\t")[-1].strip())
      else:
        sentences.append(current)
        current = []
  if current:
    sentences.append(current)
  return sentences


def read_squad_answers(path) -> Dict[str, List[str]]:
  """SQuAD v1.1 JSON -> {question_id: [gold answer texts]}."""
  with _open_text(path) as f:
    try:
      dataset = json.load(f)
    except json.JSONDecodeError as e:
      raise ScoringError(f"{path} is not valid JSON: {e}") from None
  articles = dataset.get("data") if isinstance(dataset, dict) else dataset
  if not isinstance(articles, list):
    raise ScoringError(f"{path}: a label file must be SQuAD v1.1 JSON with a "
                       "'data' list of articles.")
  answers = {}
  for article in articles:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        answers[qa["id"]] = [a["text"] for a in qa["answers"]]
  return answers


def read_qa_predictions(path) -> Dict[str, str]:
  with _open_text(path) as f:
    try:
      predictions = json.load(f)
    except json.JSONDecodeError as e:
      raise ScoringError(f"{path} is not valid JSON: {e}") from None
  if not isinstance(predictions, dict) or "data" in predictions:
    raise ScoringError(f"{path}: a prediction file must be a JSON object "
                       "{question_id: answer_text}.")
  return {str(k): str(v) for k, v in predictions.items()}


def has_gold_answers(answers: Dict[str, List[str]]) -> bool:
  """False for XTREME's label-stripped QA files (every answer text empty)."""
  return any(text for texts in answers.values() for text in texts)


# --- Scoring -----------------------------------------------------------------


def score_file_pair(task: str, prediction_file, label_file, language: str,
                    allow_missing_answers: bool = False) -> Dict[str, float]:
  """Scores one language of one task; returns {metric: percent}."""
  _check_task(task)
  if task in CLASSIFICATION_TASKS:
    predictions = read_labels(prediction_file)
    labels = read_labels(label_file)
    if len(predictions) != len(labels):
      raise ScoringError(
          f"{task}/{language}: {prediction_file} has {len(predictions)} "
          f"predictions but {label_file} has {len(labels)} labels; they must "
          "have one line per example, in the same order.")
    scores = xtreme_metrics.accuracy(labels, predictions)
  elif task in TAGGING_TASKS:
    predictions = read_tags(prediction_file)
    labels = read_tags(label_file)
    if len(predictions) != len(labels):
      raise ScoringError(
          f"{task}/{language}: {prediction_file} has {len(predictions)} "
          f"sentences but {label_file} has {len(labels)}; both need one tag "
          "per line and a blank line between sentences.")
    for i, (p, l) in enumerate(zip(predictions, labels)):
      if len(p) != len(l):
        raise ScoringError(
            f"{task}/{language}: sentence {i} has {len(p)} tags in "
            f"{prediction_file} but {len(l)} in {label_file}.")
    scores = xtreme_metrics.entity_f1(labels, predictions)
  else:
    predictions = read_qa_predictions(prediction_file)
    answers = read_squad_answers(label_file)
    missing = [q for q in answers if q not in predictions]
    extra = [q for q in predictions if q not in answers]
    if (missing and not allow_missing_answers) or (
        extra and not allow_missing_answers):
      raise ScoringError(
          f"{task}/{language}: {prediction_file} has {len(predictions)} "
          f"answers for the {len(answers)} questions of {label_file} "
          f"({len(missing)} missing, e.g. {missing[:3]}; {len(extra)} unknown, "
          f"e.g. {extra[:3]}). Pass allow_missing_answers / "
          "--allow_missing_answers to score missing questions as 0 like the "
          "official scorer.")
    if task == "mlqa":
      scores = xtreme_metrics.mlqa_scores(answers, predictions, language)
    else:
      scores = xtreme_metrics.squad_scores(answers, predictions)
  return {metric: 100.0 * value for metric, value in scores.items()}


def _languages_in_folder(folder: pathlib.Path, task: str, split: str) -> List[str]:
  ext = file_extension(task)
  found = {p.name[len(split) + 1:-len(ext) - 1]
           for p in (folder / task).glob(f"{split}-*.{ext}")}
  ordered = [l for l in TASK_LANGUAGES[task] if l in found]
  return ordered + sorted(found - set(ordered))


def add_averages(task: str, per_language: Dict[str, Dict[str, float]]) -> Dict:
  """{lang: {metric: x}} -> the official shape with averages."""
  scores = {}
  for language, metrics in per_language.items():
    for metric, value in metrics.items():
      scores.setdefault(metric, {})[language] = value
  for metric in list(scores):
    scores[f"avg_{metric}"] = xtreme_metrics.mean(scores[metric].values())
  if task in QA_TASKS:
    scores["avg_metric"] = (scores["avg_exact_match"] + scores["avg_f1"]) / 2
  elif "avg_f1" in scores:
    scores["avg_metric"] = scores["avg_f1"]
  else:
    scores["avg_metric"] = scores["avg_accuracy"]
  return scores


def score_task(task: str, prediction_folder, label_folder, split: str = "test",
               languages: Optional[Sequence[str]] = None,
               allow_missing_answers: bool = False) -> Dict:
  """Scores every language of `task` (default: each with a prediction file)."""
  _check_task(task)
  prediction_folder = pathlib.Path(prediction_folder)
  label_folder = pathlib.Path(label_folder)
  ext = file_extension(task)
  if languages is None:
    languages = _languages_in_folder(prediction_folder, task, split)
    if not languages:
      raise ScoringError(
          f"No {task} predictions in {prediction_folder / task}: expected "
          f"files named {split}-<lang>.{ext} (e.g. "
          f"{prediction_folder / task / f'{split}-en.{ext}'}).")
  per_language = {}
  for language in languages:
    prediction_file = prediction_folder / task / f"{split}-{language}.{ext}"
    label_file = label_folder / task / f"{split}-{language}.{ext}"
    for path, kind in ((prediction_file, "prediction"), (label_file, "label")):
      if not path.is_file():
        raise ScoringError(
            f"Missing {kind} file {path} for {task}/{language} (layout: "
            f"<folder>/{task}/{split}-<lang>.{ext}).")
    per_language[language] = score_file_pair(
        task, prediction_file, label_file, language,
        allow_missing_answers=allow_missing_answers)
  return add_averages(task, per_language)


def evaluate_folders(prediction_folder, label_folder,
                     tasks: Optional[Sequence[str]] = None,
                     split: str = "test",
                     languages: Optional[Sequence[str]] = None,
                     allow_missing_answers: bool = False) -> Dict[str, Dict]:
  """Scores each task (default: every task folder present in both folders)."""
  prediction_folder = pathlib.Path(prediction_folder)
  label_folder = pathlib.Path(label_folder)
  for folder, kind in ((prediction_folder, "prediction"), (label_folder, "label")):
    if not folder.is_dir():
      raise ScoringError(f"The {kind} folder {folder} does not exist.")
  if tasks is None:
    tasks = [t for t in TASKS if (prediction_folder / t).is_dir()
             and (label_folder / t).is_dir()]
    if not tasks:
      raise ScoringError(
          f"No task folder ({', '.join(TASKS)}) is in both {prediction_folder} "
          f"and {label_folder}.")
  results = {}
  for task in tasks:
    results[task] = score_task(task, prediction_folder, label_folder, split,
                               languages, allow_missing_answers)
  return results


# --- Output ------------------------------------------------------------------


def write_json(results: Dict, path):
  """Writes `results` as JSON, atomically (temp file + rename)."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
  with os.fdopen(fd, "w", encoding="utf-8") as f:
    json.dump(results, f, indent=2, ensure_ascii=False)
    f.write("\n")
  os.replace(tmp, path)


def _cell(value, std=None) -> str:
  if value is None:
    return "-"
  if std is not None and not math.isnan(std):
    return f"{value:.2f} ± {std:.2f}"
  return f"{value:.2f}"


def _main_metrics(task: str, scores: Dict) -> List[str]:
  return [m for m in TASK_METRICS[task] if m in scores
          and m not in ("precision", "recall")]


def format_markdown(results: Dict[str, Dict], compare_paper: bool = False,
                    std: Optional[Dict[str, Dict]] = None) -> str:
  """Markdown: a task x language table per metric, then the task averages.

  `std` (same shape as `results`) adds "± std" to each cell (seed sweeps).
  `compare_paper` puts the paper's coupled / decoupled averages beside ours.
  """
  lines = []
  for task, scores in results.items():
    task_std = (std or {}).get(task, {})
    metrics = _main_metrics(task, scores)
    languages = list(scores[metrics[0]].keys())
    lines.append(f"### {task}")
    lines.append("")
    lines.append("| metric | " + " | ".join(languages) + " | avg |")
    lines.append("| --- " * (len(languages) + 2) + "|")
    for metric in metrics:
      cells = [_cell(scores[metric][l], task_std.get(metric, {}).get(l))
               for l in languages]
      cells.append(_cell(scores[f"avg_{metric}"],
                         task_std.get(f"avg_{metric}")))
      lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines.append("")
  lines.append("### averages")
  lines.append("")
  header = "| task | metric | ours |"
  if compare_paper:
    header += " paper coupled | paper decoupled |"
  lines.append(header)
  lines.append("| --- " * (header.count("|") - 1) + "|")
  for task, scores in results.items():
    task_std = (std or {}).get(task, {})
    for metric in _main_metrics(task, scores):
      row = (f"| {task} | {metric} | "
             f"{_cell(scores[f'avg_{metric}'], task_std.get(f'avg_{metric}'))} |")
      if compare_paper:
        coupled, decoupled = PAPER_RESULTS.get(task, {}).get(metric,
                                                             (None, None))
        row += f" {_cell(coupled)} | {_cell(decoupled)} |"
      lines.append(row)
  return "\n".join(lines) + "\n"

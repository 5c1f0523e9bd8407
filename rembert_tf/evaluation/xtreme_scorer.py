"""Scores XTREME prediction folders against label folders, like the official scorer.

Builds on `xtreme_metrics` and the task table `xtreme_tasks`; each family of
tasks is scored by one `TaskMetric` of `METRICS`. Files are
`FOLDER/<task>/<split>-<lang>.tsv` (one label, tag or line number per line;
`<source id><TAB><English id>` for bucc2018) or `.json` (QA: predictions
{question_id: text}, labels SQuAD v1.1); a label TSV may be a raw XTREME file
(the last tab-separated field is the label). A missing or malformed file is
a `ScoringError` naming the file and field. Results have the official
shape, in percent: `{task: {metric: {lang: score}, "avg_<metric>": x,
"avg_metric": y}}`.

Example:
<!-- snippet: not run: needs predictions and labels in XTREME's layout -->
```python
from rembert_tf.evaluation import xtreme_scorer
results = xtreme_scorer.evaluate_folders("preds/", "labels/", tasks=["xnli"],
                                         split="dev")
print(xtreme_scorer.format_markdown(results, compare_paper=True))
xtreme_scorer.write_json(results, "scores.json")
```
"""
import dataclasses
import json
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_metrics
from rembert_tf.evaluation import xtreme_tasks


class ScoringError(errors.InputError):
  """A prediction or label file is missing, malformed or does not match."""


def _read_text(path, what: str = "text") -> str:
  """A UTF-8 file's text; a missing or binary file is a ScoringError."""
  path = fileio.as_str(path)
  if not fileio.isfile(path):
    raise ScoringError(f"Missing file {path}.")
  try:
    return fileio.read_text(path)
  except UnicodeDecodeError as e:
    raise ScoringError(
        f"{path} is not UTF-8 {what} ({e.reason} at byte {e.start})" +
        ("; give the text file of predictions or labels." if what == "text"
         else ".")) from None


def _read_json(path):
  text = _read_text(path, "JSON")
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise ScoringError(f"{path} is not valid JSON: {e}") from None


def _require_lines(path, values, what: str):
  if not values:
    raise ScoringError(f"{path} is empty: expected {what}.")
  return values


def read_labels(path) -> List[str]:
  """One label per line; the last tab-separated field is the label."""
  return [line.split("\t")[-1].strip()
          for line in _read_text(path).splitlines()]


def read_tags(path) -> List[List[str]]:
  """One tag per line (last tab-separated field), blank line between sentences."""
  sentences = [[]]
  for line in _read_text(path).splitlines():
    if line.strip():
      sentences[-1].append(line.strip().split("\t")[-1].strip())
    else:
      sentences.append([])
  return sentences[:-1] if not sentences[-1] else sentences


def read_pairs(path) -> List[Tuple[str, str]]:
  """`<source id><TAB><English id>` lines (BUCC); blank lines are skipped."""
  pairs = []
  for number, line in enumerate(_read_text(path).splitlines(), 1):
    fields = line.strip().split("\t")
    if not line.strip():
      continue
    if len(fields) != 2:
      raise ScoringError(
          f"{path}: line {number} has {len(fields)} tab-separated field(s); "
          "each line must be one aligned pair `<source id><TAB><English id>` "
          "(e.g. de-000001<TAB>en-000042).")
    pairs.append((fields[0].strip(), fields[1].strip()))
  return pairs


def _field(value, key: str, path, where: str, kind=list):
  """value[key], checked: a missing or mistyped field names file and field."""
  if not isinstance(value, dict) or key not in value:
    raise ScoringError(f"{path}: {where} has no field '{key}'; a label file "
                       "must be SQuAD v1.1 JSON (data[].paragraphs[].qas[]"
                       ".answers[].text).")
  if not isinstance(value[key], kind):
    raise ScoringError(f"{path}: field '{key}' of {where} must be a "
                       f"{kind.__name__}.")
  return value[key]


def read_squad_answers(path) -> Dict[str, List[str]]:
  """SQuAD v1.1 JSON -> {question_id: [gold answer texts]}."""
  dataset = _read_json(path)
  articles = dataset.get("data") if isinstance(dataset, dict) else dataset
  if not isinstance(articles, list):
    raise ScoringError(f"{path}: a label file must be SQuAD v1.1 JSON with a "
                       "'data' list of articles.")
  answers = {}
  for a, article in enumerate(articles):
    for p, paragraph in enumerate(_field(article, "paragraphs", path,
                                         f"data[{a}]")):
      for q, qa in enumerate(_field(paragraph, "qas", path,
                                    f"data[{a}].paragraphs[{p}]")):
        where = f"data[{a}].paragraphs[{p}].qas[{q}]"
        answers[str(_field(qa, "id", path, where, kind=object))] = [
            _field(answer, "text", path, f"{where}.answers[{i}]", kind=str)
            for i, answer in enumerate(_field(qa, "answers", path, where))]
  return answers


def read_qa_predictions(path) -> Dict[str, str]:
  predictions = _read_json(path)
  if not isinstance(predictions, dict) or "data" in predictions:
    raise ScoringError(f"{path}: a prediction file must be a JSON object "
                       "{question_id: answer_text}.")
  return {str(k): str(v) for k, v in predictions.items()}


# --- How each task is scored: one registry entry per metric family ----------


def _score_labels(task, prediction_file, label_file, language, allow_missing):
  del allow_missing
  predictions = _require_lines(prediction_file, read_labels(prediction_file),
                               "one predicted label per line")
  labels = _require_lines(label_file, read_labels(label_file),
                          "one label per line")
  if len(predictions) != len(labels):
    raise ScoringError(
        f"{task}/{language}: {prediction_file} has {len(predictions)} "
        f"predictions but {label_file} has {len(labels)} labels; they must "
        "have one line per example, in the same order.")
  return xtreme_metrics.accuracy(labels, predictions)


def _score_tags(task, prediction_file, label_file, language, allow_missing):
  del allow_missing
  predictions = _require_lines(prediction_file, read_tags(prediction_file),
                               "one tag per line, blank line between sentences")
  labels = _require_lines(label_file, read_tags(label_file),
                          "token<TAB>tag lines, blank line between sentences")
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
  return xtreme_metrics.entity_f1(labels, predictions)


def _score_pairs(task, prediction_file, label_file, language, allow_missing):
  del task, language, allow_missing
  # No pair predicted is a valid (empty) prediction: it scores 0.
  predictions = read_pairs(prediction_file)
  labels = _require_lines(label_file, read_pairs(label_file),
                          "one gold pair `<source id><TAB><English id>` per "
                          "line")
  return xtreme_metrics.pair_f1(labels, predictions)


def _qa_scorer(score_fn):
  def score(task, prediction_file, label_file, language, allow_missing):
    predictions = read_qa_predictions(prediction_file)
    answers = read_squad_answers(label_file)
    if not answers:
      raise ScoringError(f"{label_file} has no questions (data[].paragraphs[]"
                         ".qas[] is empty everywhere).")
    missing = [q for q in answers if q not in predictions]
    extra = [q for q in predictions if q not in answers]
    if (missing or extra) and not allow_missing:
      raise ScoringError(
          f"{task}/{language}: {prediction_file} has {len(predictions)} "
          f"answers for the {len(answers)} questions of {label_file} "
          f"({len(missing)} missing, e.g. {missing[:3]}; {len(extra)} unknown, "
          f"e.g. {extra[:3]}). Pass allow_missing_answers / "
          "--allow_missing_answers to score missing questions as 0 like the "
          "official scorer.")
    return score_fn(answers, predictions, language)
  return score


@dataclasses.dataclass(frozen=True)
class TaskMetric:
  """How the benchmark scores one family of tasks: `score` gives fractions;
  `table_metrics` are shown in tables; `headline`: those whose mean is a
  language's single score."""
  name: str
  extension: str
  table_metrics: Tuple[str, ...]
  headline: Tuple[str, ...]
  score: Callable[..., Dict[str, float]]


_QA = ("exact_match", "f1")
ACCURACY = TaskMetric("accuracy", "tsv", ("accuracy",), ("accuracy",),
                      _score_labels)
# seqeval's F1: PAN-X entities; UD-POS tags, passed to seqeval as they are
# (as the official scorer does).
ENTITY_F1 = TaskMetric("entity_f1", "tsv", ("f1",), ("f1",), _score_tags)
PAIR_F1 = TaskMetric("pair_f1", "tsv", ("precision", "recall", "f1"),
                     ("f1",), _score_pairs)
SQUAD = TaskMetric("squad", "json", _QA, _QA, _qa_scorer(
    lambda answers, predictions, language: xtreme_metrics.squad_scores(
        answers, predictions)))
MLQA = TaskMetric("mlqa", "json", _QA, _QA,
                  _qa_scorer(xtreme_metrics.mlqa_scores))
# The metric an `xtreme_tasks` entry names -> how it is scored.
METRICS = {m.name: m for m in (ACCURACY, ENTITY_F1, PAIR_F1, SQUAD, MLQA)}


def task_metric(task: str) -> TaskMetric:
  if task not in xtreme_tasks.XTREME_TASKS:
    raise ScoringError(f"Unknown task {task!r}; XTREME tasks here are "
                       f"{', '.join(xtreme_tasks.TASKS)}.")
  return METRICS[xtreme_tasks.XTREME_TASKS[task].metric]


def headline_score(task: str, scores: Dict, language: str) -> Optional[float]:
  """A language's single score (percent), e.g. English dev for selection."""
  metric = task_metric(task)
  if not all(language in scores.get(m, {}) for m in metric.headline):
    return None
  return xtreme_metrics.mean(scores[m][language] for m in metric.headline)


# --- Scoring -----------------------------------------------------------------


def score_file_pair(task: str, prediction_file, label_file, language: str,
                    allow_missing_answers: bool = False) -> Dict[str, float]:
  """Scores one language of one task; returns {metric: percent}."""
  scores = task_metric(task).score(task, prediction_file, label_file, language,
                                   allow_missing_answers)
  return {metric: 100.0 * value for metric, value in scores.items()}


def _languages_in_folder(folder: str, task: str, split: str) -> List[str]:
  ext = task_metric(task).extension
  found = {fileio.basename(p)[len(split) + 1:-len(ext) - 1]
           for p in fileio.glob(fileio.join(folder, task, f"{split}-*.{ext}"))}
  return xtreme_tasks.XTREME_TASKS[task].in_benchmark_order(found)


def add_averages(task: str, per_language: Dict[str, Dict[str, float]]) -> Dict:
  """{lang: {metric: x}} -> the official shape with averages."""
  scores = {}
  for language, metrics in per_language.items():
    for metric, value in metrics.items():
      scores.setdefault(metric, {})[language] = value
  for metric in list(scores):
    scores[f"avg_{metric}"] = xtreme_metrics.mean(scores[metric].values())
  scores["avg_metric"] = xtreme_metrics.mean(
      scores[f"avg_{m}"] for m in task_metric(task).headline)
  return scores


def score_task(task: str, prediction_folder, label_folder, split: str = "test",
               languages: Optional[Sequence[str]] = None,
               allow_missing_answers: bool = False) -> Dict:
  """Scores every language of `task` (default: each with a prediction file)."""
  prediction_folder = fileio.as_str(prediction_folder)
  label_folder = fileio.as_str(label_folder)
  ext = task_metric(task).extension
  if languages is None:
    languages = _languages_in_folder(prediction_folder, task, split)
    if not languages:
      raise ScoringError(
          f"No {task} predictions in {fileio.join(prediction_folder, task)}: "
          f"expected files named {split}-<lang>.{ext} (e.g. "
          f"{fileio.join(prediction_folder, task, f'{split}-en.{ext}')}).")
  per_language = {}
  for language in languages:
    prediction_file = fileio.join(prediction_folder, task,
                                  f"{split}-{language}.{ext}")
    label_file = fileio.join(label_folder, task, f"{split}-{language}.{ext}")
    for path, kind in ((prediction_file, "prediction"), (label_file, "label")):
      if not fileio.isfile(path):
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
  prediction_folder = fileio.as_str(prediction_folder)
  label_folder = fileio.as_str(label_folder)
  for folder, kind in ((prediction_folder, "prediction"), (label_folder, "label")):
    if not fileio.isdir(folder):
      raise ScoringError(f"The {kind} folder {folder} does not exist.")
  if tasks is None:
    tasks = [t for t in xtreme_tasks.TASKS
             if fileio.isdir(fileio.join(prediction_folder, t))
             and fileio.isdir(fileio.join(label_folder, t))]
    if not tasks:
      raise ScoringError(
          f"No task folder ({', '.join(xtreme_tasks.TASKS)}) is in both "
          f"{prediction_folder} and {label_folder}.")
  return {task: score_task(task, prediction_folder, label_folder, split,
                           languages, allow_missing_answers) for task in tasks}


# --- Output ------------------------------------------------------------------


def write_json(results: Dict, path):
  """Writes `results` as JSON, atomically (temporary name, then rename)."""
  path = fileio.as_str(path)
  fileio.makedirs(fileio.dirname(path) or ".")
  fileio.write_text(path, json.dumps(results, indent=2, ensure_ascii=False)
                    + "\n")


def _cell(value, std=None) -> str:
  if value is None:
    return "-"
  if std is not None and not math.isnan(std):
    return f"{value:.2f} ± {std:.2f}"
  return f"{value:.2f}"


def _main_metrics(task: str, scores: Dict) -> List[str]:
  return [m for m in task_metric(task).table_metrics if m in scores]


def format_markdown(results: Dict[str, Dict], compare_paper: bool = False,
                    std: Optional[Dict[str, Dict]] = None) -> str:
  """Markdown: a task x language table per metric, then the task averages.

  `std` adds "± std" to each cell; `compare_paper` shows the paper's averages.
  """
  lines = []
  for task, scores in results.items():
    task_std = (std or {}).get(task, {})
    metrics = _main_metrics(task, scores)
    languages = list(scores[metrics[0]])
    lines += [f"### {task}", "", "| metric | " + " | ".join(languages) +
              " | avg |", "| --- " * (len(languages) + 2) + "|"]
    for metric in metrics:
      cells = [_cell(scores[metric][l], task_std.get(metric, {}).get(l))
               for l in languages]
      cells.append(_cell(scores[f"avg_{metric}"],
                         task_std.get(f"avg_{metric}")))
      lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines.append("")
  header = "| task | metric | ours |" + (
      " paper coupled | paper decoupled |" if compare_paper else "")
  lines += ["### averages", "", header,
            "| --- " * (header.count("|") - 1) + "|"]
  for task, scores in results.items():
    task_std = (std or {}).get(task, {})
    for metric in _main_metrics(task, scores):
      row = (f"| {task} | {metric} | "
             f"{_cell(scores[f'avg_{metric}'], task_std.get(f'avg_{metric}'))} |")
      if compare_paper:
        paper = xtreme_tasks.XTREME_TASKS[task].paper_results
        coupled, decoupled = paper.get(metric, (None, None))
        row += f" {_cell(coupled)} | {_cell(decoupled)} |"
      lines.append(row)
  return "\n".join(lines) + "\n"

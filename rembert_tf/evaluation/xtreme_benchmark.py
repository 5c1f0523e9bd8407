"""The XTREME benchmark as a whole: its categories and the XTREME score.

The categories are the official scorer's (classification, tagging, qa,
retrieval; each task's entry in `xtreme_tasks` names its own). A category's
score is the mean of its tasks' `avg_metric`, the XTREME score the mean of
all nine; `summarize` scores the tasks present and names what is missing.
"""
from typing import Dict, List, Mapping, Optional, Sequence

from rembert_tf.evaluation import xtreme_tasks

# Category key (as in the official results file) -> its label; an entry of
# `xtreme_tasks` names its task's category.
CATEGORY_LABELS = {"classification": "classification",
                   "tagging": "structured prediction",
                   "qa": "question answering", "retrieval": "retrieval"}
# Category key -> its tasks, in the benchmark's order.
CATEGORIES = {key: tuple(t.name for t in xtreme_tasks.XTREME_TASKS.values()
                         if t.category == key) for key in CATEGORY_LABELS}
# The official results file's key for the XTREME score.
ALL_TASKS_KEY = "all_task"
SUMMARY_KEY = "xtreme"


def _mean(values: Sequence[float]) -> Optional[float]:
  return sum(values) / len(values) if values else None


def _group(results: Mapping[str, Dict], tasks: Sequence[str]) -> Dict:
  present = [t for t in tasks if t in results]
  return dict(score=_mean([results[t]["avg_metric"] for t in present]),
              tasks=present, missing_tasks=[t for t in tasks if t not in results])


def missing_languages(results: Mapping[str, Dict]) -> Dict[str, List[str]]:
  """{task: benchmark languages without a score}, for the tasks present."""
  missing = {}
  for task, scores in results.items():
    if task not in xtreme_tasks.XTREME_TASKS:
      continue
    scored = set()
    for value in scores.values():
      if isinstance(value, dict):
        scored |= set(value)
    absent = [l for l in xtreme_tasks.XTREME_TASKS[task].languages
              if l not in scored]
    if absent:
      missing[task] = absent
  return missing


def summarize(results: Mapping[str, Dict]) -> Dict:
  """The XTREME score and category means over the tasks in `results`.

  Returns {"score", "tasks", "missing_tasks", "missing_languages",
  "categories": {key: {"score", "tasks", "missing_tasks"}}}; a score is None
  where no task of it is present.
  """
  summary = _group(results, xtreme_tasks.TASKS)
  summary["missing_languages"] = missing_languages(results)
  summary["categories"] = {key: _group(results, tasks)
                           for key, tasks in CATEGORIES.items()}
  return summary


def official_report(results: Mapping[str, Dict]) -> Dict:
  """What results.json holds: the official scorer's keys, `summarize`'s under `xtreme`, every task's scores."""
  summary = summarize(results)
  report = {}
  if not summary["missing_tasks"]:
    report[ALL_TASKS_KEY] = summary["score"]
  for key, category in summary["categories"].items():
    if not category["missing_tasks"]:
      report[key] = category["score"]
  report[SUMMARY_KEY] = summary
  report.update(results)
  return report


def _cell(value: Optional[float]) -> str:
  return "-" if value is None else f"{value:.2f}"


def format_markdown(summary: Dict) -> str:
  """The XTREME score and category means as a markdown table, with gaps named."""
  lines = ["### XTREME score", "", "| category | tasks | score |",
           "| --- | --- | --- |"]
  for key, category in summary["categories"].items():
    tasks = ", ".join(category["tasks"]) or "-"
    if category["missing_tasks"]:
      tasks += f" (missing: {', '.join(category['missing_tasks'])})"
    lines.append(f"| {CATEGORY_LABELS[key]} | {tasks} | "
                 f"{_cell(category['score'])} |")
  scored = len(summary["tasks"])
  lines.append(f"| **XTREME** | {scored} of {len(xtreme_tasks.TASKS)} tasks | "
               f"**{_cell(summary['score'])}** |")
  lines.append("")
  if summary["missing_tasks"]:
    lines.append(f"Missing tasks: {', '.join(summary['missing_tasks'])}; the "
                 "scores above are means over the tasks present (the official "
                 "scorer reports a category or the XTREME score only when all "
                 "its tasks are present).")
  for task, languages in summary["missing_languages"].items():
    lines.append(f"{task}: mean over the languages present; missing "
                 f"{', '.join(languages)}.")
  return "\n".join(lines) + "\n"

"""The paper-style results table of the suite, as JSON and markdown.

One row per model (E_in, E_out, layers, #PT, #FT, MLM accuracy, each task's
mean ± std over seeds, their average, the paper's numbers), then tables per
language, of zero-shot transfer with the claims tested, and of CKA.
"""
from typing import Dict, List, Optional, Sequence

import numpy as np

from rembert_tf.ablation import comparisons
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.evaluation import xtreme_tasks

MAIN_METRIC = "avg_metric"


def format_count(n: int) -> str:
  """Whole millions as the paper writes them; two decimals below 100M."""
  return f"{round(n / 1e6)}M" if n >= 1e8 else f"{n / 1e6:.2f}M"


def _language_metric(task: str) -> str:
  """The per-language column: accuracy, entity F1, or F1 for QA."""
  return xtreme_scorer.task_metric(task).table_metrics[-1]


def paper_score(task: str, column: Optional[str]) -> Optional[str]:
  """The paper's figure for a task, as it reports it ("EM / F1" for QA)."""
  entry = xtreme_tasks.XTREME_TASKS.get(task)
  if column is None or entry is None or not entry.paper_results:
    return None
  index = 0 if column == "coupled" else 1
  values = [value[index] for value in entry.paper_results.values()]
  if all(v is None for v in values):
    return None
  return " / ".join("-" if v is None else f"{v:.1f}" for v in values)


def _in_order(lists) -> List[str]:
  """The items of `lists`, each once, in the order they first appear."""
  return list(dict.fromkeys(item for items in lists for item in items))


def build_table(row_results: List[Dict]) -> Dict:
  """row_results: per row {name, model, counts, mlm_accuracy, sweeps, similarity}."""
  tasks = _in_order(row["sweeps"] for row in row_results)
  rows = []
  for row in row_results:
    model = row["model"]
    entry = dict(
        name=row["name"], input_embedding_size=model["input_embedding_size"],
        output_embedding_size=model["output_embedding_size"],
        coupled=model["coupled"], num_hidden_layers=model["num_hidden_layers"],
        num_output_layers=model["num_output_layers"],
        pt_params=row["counts"]["pt_params"], ft_params=row["counts"]["ft_params"],
        mlm_accuracy=row.get("mlm_accuracy"), paper_column=row.get("paper_column"),
        tasks={}, languages={}, layer_similarity=row.get("similarity_diagonal"))
    for task, sweep in row["sweeps"].items():
      metric = _language_metric(task)
      entry["tasks"][task] = dict(
          score=sweep["scores"][MAIN_METRIC], std=sweep["std"][MAIN_METRIC],
          learning_rate=sweep["selected_learning_rate"],
          num_seeds=sweep["num_seeds"], paper=paper_score(task, row.get("paper_column")),
          **_transfer(sweep, metric))
      entry["languages"][task] = dict(sweep["scores"].get(metric, {}))
    scores = [t["score"] for t in entry["tasks"].values()]
    entry["average"] = float(np.mean(scores)) if scores and len(scores) == len(tasks) else None
    rows.append(entry)
  claims = {task: comparisons.compare_claims(
      {row["name"]: row["tasks"][task]["transfer_seeds"] for row in rows
       if task in row["tasks"]}) for task in tasks}
  return dict(tasks=tasks, rows=rows, claims=claims)


def _transfer(sweep: Dict, metric: str) -> Dict:
  """Each seed's zero-shot transfer (non-English mean), their mean and std."""
  seeds = [comparisons.transfer_score(scores.get(metric, {}))
           for scores in sweep.get("seed_scores", [])]
  seeds = [s for s in seeds if s is not None]
  if not seeds:
    return dict(transfer=None, transfer_std=None, transfer_seeds=[])
  std = float(np.std(seeds, ddof=1)) if len(seeds) > 1 else 0.0
  return dict(transfer=float(np.mean(seeds)), transfer_std=std,
              transfer_seeds=seeds)


def _pct(value) -> str:
  return "-" if value is None else f"{value:.1f}"


def _markdown(head: Sequence[str], rows: List[List[str]]) -> List[str]:
  """A markdown table: the first column left-aligned, the others right."""
  return (["| " + " | ".join(head) + " |",
           "| --- |" + " ---: |" * (len(head) - 1)] +
          ["| " + " | ".join(cells) + " |" for cells in rows])


def _main_table(table: Dict) -> List[str]:
  tasks = table["tasks"]
  rows = []
  for row in table["rows"]:
    layers = str(row["num_hidden_layers"]) + (
        f"+{row['num_output_layers']}" if row["num_output_layers"] else "")
    e_out = f"{row['output_embedding_size']}" + (" (coupled)" if row["coupled"] else "")
    cells = [row["name"], str(row["input_embedding_size"]), e_out, layers,
             format_count(row["pt_params"]), format_count(row["ft_params"]),
             "-" if row["mlm_accuracy"] is None else f"{row['mlm_accuracy']:.4f}"]
    for task in tasks:
      result = row["tasks"].get(task)
      cell = "-" if result is None else f"{result['score']:.1f} ± {result['std']:.1f}"
      if result and result["paper"]:
        cell += f" (paper {result['paper']})"
      cells.append(cell)
    rows.append(cells + [_pct(row["average"])])
  return _markdown(["model", "E_in", "E_out", "layers", "#PT", "#FT",
                    "MLM acc", *tasks, "avg"], rows)


def _language_table(table: Dict, task: str) -> List[str]:
  languages = _in_order(row["languages"].get(task, {}) for row in table["rows"])
  return [f"**{task}** zero-shot {_language_metric(task)} per language "
          "(fine-tuned on English; mean over seeds)", ""] + _markdown(
              ["model", *languages],
              [[row["name"]] + [_pct(row["languages"].get(task, {}).get(l))
                                for l in languages] for row in table["rows"]])


def _transfer_section(table: Dict, task: str) -> List[str]:
  """Each row's transfer per seed, then one verdict line per claim."""
  rows = []
  for row in table["rows"]:
    result = row["tasks"].get(task) or {}
    if result.get("transfer") is not None:
      rows.append([row["name"], f"{result['transfer']:.1f} ± "
                   f"{result['transfer_std']:.1f}",
                   ", ".join(f"{v:.1f}" for v in result["transfer_seeds"])])
  lines = [f"**{task}** zero-shot transfer: {_language_metric(task)} averaged "
           "over the languages other than English, per fine-tuning seed", ""]
  lines += _markdown(["model", "mean ± std", "seeds"], rows)
  claims = table.get("claims", {}).get(task, [])
  if claims:
    lines += ["", "The paper's claims on this transfer (difference of the "
              "rows' means, Welch t interval over seeds):", ""]
    lines += [f"- {comparisons.verdict_line(result)}" for result in claims]
  return lines


def _similarity_table(table: Dict) -> List[str]:
  depth = max((len(r["layer_similarity"] or []) for r in table["rows"]), default=0)
  if not depth:
    return []
  rows = []
  for row in table["rows"]:
    values = row["layer_similarity"] or []
    rows.append([row["name"]] + [f"{v:.3f}" for v in values] +
                ["-"] * (depth - len(values)))
  return ["Linear CKA between each pre-trained model and its fine-tuned "
          "version, per layer (1 = unchanged by fine-tuning)", ""] + _markdown(
              ["model"] + [f"layer {i + 1}" for i in range(depth)], rows)


def to_markdown(table: Dict) -> str:
  parts = [_main_table(table)]
  parts += [_language_table(table, task) for task in table["tasks"]]
  parts += [_transfer_section(table, task) for task in table["tasks"]]
  similarity = _similarity_table(table)
  if similarity:
    parts.append(similarity)
  return "\n\n".join("\n".join(p) for p in parts) + "\n"

"""The suite's report: `results.md`, `results.json` and the figures (MLM
curves, the results as bars, layer similarity), rewritten each time from the
rows' stored results.
"""
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from rembert_tf.ablation import comparisons
from rembert_tf.ablation import results_table
from rembert_tf.common import fileio
from rembert_tf.evaluation import plotting

LOSS_TAG = "training_loss"
ACCURACY_TAG = "masked_lm_accuracy"


def read_scalars(summary_dir, tags: Sequence[str]
                 ) -> Dict[str, List[Tuple[int, float]]]:
  """{tag: [(step, value), ...]} from the TensorBoard event files of the
  directory (TensorBoard's reader: steps a resumed run wrote again replace
  the earlier ones)."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  from tensorboard.util import tensor_util  # pylint: disable=g-import-not-at-top
  if not fileio.isdir(summary_dir):  # a row that wrote no summaries
    return {tag: [] for tag in tags}
  events = event_accumulator.EventAccumulator(
      fileio.as_str(summary_dir), size_guidance={event_accumulator.TENSORS: 0})
  events.Reload()
  written = events.Tags()["tensors"]
  return {tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto)))
                for e in (events.Tensors(tag) if tag in written else [])]
          for tag in tags}


def plot_mlm_curves(model_dirs: Dict[str, str], path) -> None:
  """One PNG: MLM loss (left) and accuracy (right) per step, a line per run."""
  figure, (loss_axes, acc_axes) = plotting.new_figure(width=11, height=4,
                                                      cols=2)
  for name, model_dir in model_dirs.items():
    train = read_scalars(fileio.join(model_dir, "train"), [LOSS_TAG, ACCURACY_TAG])
    held_out = read_scalars(fileio.join(model_dir, "validation"), [ACCURACY_TAG])
    for axes, points in ((loss_axes, train[LOSS_TAG]),
                         (acc_axes, train[ACCURACY_TAG])):
      if points:
        steps, values = zip(*points)
        line, = axes.plot(steps, values, label=name, linewidth=1.4)
        if axes is acc_axes and held_out[ACCURACY_TAG]:
          h_steps, h_values = zip(*held_out[ACCURACY_TAG])
          axes.plot(h_steps, h_values, "o", color=line.get_color(), markersize=5)
  loss_axes.set(title="MLM training loss", xlabel="step", ylabel="loss")
  acc_axes.set(title="MLM accuracy (line: training, dot: held-out)",
               xlabel="step", ylabel="accuracy")
  for axes in (loss_axes, acc_axes):
    axes.grid(alpha=0.3)
  acc_axes.legend(fontsize=8, loc="lower right")
  plotting.save_png(figure, path)


def _bar_groups(table: Dict):
  """(group labels, {row: (values, stds)}) for the bar chart: one task's
  languages and its score, or each task's score and their average."""
  tasks = table["tasks"]
  if len(tasks) == 1:
    task = tasks[0]
    languages = list(dict.fromkeys(
        lang for row in table["rows"] for lang in row["languages"].get(task, {})))
    groups = languages + [f"{task} avg"]

    def bars(row):
      result = row["tasks"].get(task, {})
      return ([row["languages"].get(task, {}).get(l, np.nan) for l in languages]
              + [result.get("score", np.nan)],
              [0.0] * len(languages) + [result.get("std", 0.0)])
  else:
    groups = tasks + ["avg"]

    def bars(row):
      results = [row["tasks"].get(t, {}) for t in tasks]
      average = np.nan if row["average"] is None else row["average"]
      return ([r.get("score", np.nan) for r in results] + [average],
              [r.get("std", 0.0) for r in results] + [0.0])
  return groups, {row["name"]: bars(row) for row in table["rows"]}


def plot_results(table: Dict, path) -> None:
  """Grouped bars of the results table (scores in percent, std as error bars)."""
  groups, data = _bar_groups(table)
  width = 0.8 / max(1, len(data))
  figure, axes = plotting.new_figure(width=max(6.0, 1.1 * len(groups) + 2), height=4)
  positions = np.arange(len(groups))
  for i, (name, (values, stds)) in enumerate(data.items()):
    axes.bar(positions + (i - (len(data) - 1) / 2) * width, values, width,
             yerr=stds, capsize=2, label=name)
  axes.set_xticks(positions, groups)
  axes.set_ylabel("score (%)")
  axes.set_title("zero-shot results (fine-tuned on English)")
  axes.grid(axis="y", alpha=0.3)
  axes.legend(fontsize=8, ncol=2)
  plotting.save_png(figure, path)


def plot_similarity_curves(diagonals: Dict[str, List[float]], path,
                           title: str = "pre-trained vs fine-tuned, per layer"
                           ) -> None:
  """CKA(pre-trained layer i, fine-tuned layer i) against i, a line per model."""
  figure, axes = plotting.new_figure(width=6, height=4)
  for name, values in diagonals.items():
    if values:
      axes.plot(range(1, len(values) + 1), values, marker="o", label=name)
  axes.set(title=title, xlabel="layer",
           ylabel="linear CKA", ylim=(0.0, 1.02))
  axes.xaxis.get_major_locator().set_params(integer=True)
  axes.grid(alpha=0.3)
  axes.legend(fontsize=8)
  plotting.save_png(figure, path)


def _output_embedding_pair(diagonals: Dict[str, List[float]]):
  """The (small E_out, large E_out) rows whose CKA curves both exist."""
  claim = next(c for c in comparisons.CLAIMS if c.key == "output_embedding")
  return next(((small, large) for large, small in claim.pairs
               if diagonals.get(small) and diagonals.get(large)), None)


def write_outputs(output_dir: str, row_results: List[Dict], model_dirs: Dict[str, str],
                  say) -> Dict[str, Any]:
  table = results_table.build_table(row_results)
  markdown = results_table.to_markdown(table)
  figures_dir = fileio.join(output_dir, "figures")
  fileio.makedirs(figures_dir)
  paths = dict(mlm_curves=fileio.join(figures_dir, "mlm_curves.png"),
               results=fileio.join(figures_dir, "results.png"))
  plot_mlm_curves(model_dirs, paths["mlm_curves"])
  if table["tasks"]:
    plot_results(table, paths["results"])
  diagonals = {r["name"]: r["similarity_diagonal"] for r in row_results
               if r.get("similarity_diagonal")}
  if diagonals:
    paths["layer_similarity"] = fileio.join(figures_dir, "layer_similarity.png")
    plot_similarity_curves(diagonals, paths["layer_similarity"])
  pair = _output_embedding_pair(diagonals)
  if pair:
    # The paper's figure: a small and a large E_out, the rest equal.
    paths["output_embedding_similarity"] = fileio.join(
        figures_dir, "layer_similarity_output_embedding.png")
    plot_similarity_curves(
        {name: diagonals[name] for name in pair},
        paths["output_embedding_similarity"],
        title="small vs large output embedding: pre-trained vs fine-tuned")
  fileio.write_text(fileio.join(output_dir, "results.md"), markdown)
  fileio.write_json(fileio.join(output_dir, "results.json"),
                    dict(table, figures=paths))
  say(markdown)
  say(f"[ablation] table: {fileio.join(output_dir, 'results.md')}; figures: "
      + ", ".join(paths.values()))
  return dict(table=table, markdown=markdown, figures=paths)

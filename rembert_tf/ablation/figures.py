"""The suite's pictures: MLM curves, the results bar chart, layer similarity."""
from typing import Dict, List, Sequence, Tuple

import numpy as np

from rembert_tf.common import fileio
from rembert_tf.evaluation import plotting

LOSS_TAG = "training_loss"
ACCURACY_TAG = "masked_lm_accuracy"


def read_scalars(summary_dir, tags: Sequence[str]
                 ) -> Dict[str, List[Tuple[int, float]]]:
  """{tag: [(step, value), ...]} by step from every event file in the directory
  (TF2 and TF1 summaries); a step written twice keeps its last value."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  found: Dict[str, Dict[int, float]] = {tag: {} for tag in tags}
  for path in fileio.glob(fileio.join(summary_dir, "events.out.tfevents.*")):
    try:
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag not in found:
            continue
          if value.HasField("tensor"):
            number = float(tf.make_ndarray(value.tensor))
          else:
            number = float(value.simple_value)
          found[value.tag][int(event.step)] = number
    except tf.errors.DataLossError:
      pass   # the last record of a file cut short by a kill
  return {tag: sorted(points.items()) for tag, points in found.items()}


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
  """(group labels, {row: (values, stds)}) for the bar chart."""
  tasks = table["tasks"]
  rows = table["rows"]
  if len(tasks) == 1:
    task = tasks[0]
    languages = []
    for row in rows:
      languages += [l for l in row["languages"].get(task, {}) if l not in languages]
    groups = languages + ["avg"]
    data = {}
    for row in rows:
      values = [row["languages"].get(task, {}).get(l, np.nan) for l in languages]
      result = row["tasks"].get(task)
      data[row["name"]] = (values + [result["score"] if result else np.nan],
                           [0.0] * len(languages) + [result["std"] if result else 0.0])
    return [f"{task} {g}" if g == "avg" else g for g in groups], data
  data = {}
  for row in rows:
    values = [row["tasks"][t]["score"] if t in row["tasks"] else np.nan for t in tasks]
    stds = [row["tasks"][t]["std"] if t in row["tasks"] else 0.0 for t in tasks]
    data[row["name"]] = (values + [row["average"] if row["average"] is not None
                                   else np.nan], stds + [0.0])
  return tasks + ["avg"], data


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

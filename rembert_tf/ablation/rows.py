"""The suite's rows: which models are compared, each with its experiment.

At base scale a row is one experiment `configs/experiments/ablation_*.yaml`;
at demo and small scale rows share their scale's schedule with their own
preset `configs/models/demo_ablation_<row>.yaml`. `check_same_schedule`
refuses rows whose experiments differ in anything but the model.

Example:
```python
from rembert_tf.ablation import rows
for row in rows.scale_rows("small"):
  print(row.name, row.experiment, row.model_preset)
config = rows.load_row_config(rows.scale_rows("demo")[0], {"trainer": {"train_steps": 10}})
```
"""
import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.pretraining import experiments as pretraining_experiments
from rembert_tf.runtime import experiment_files

# The CPU scales: their shared schedule, as experiment YAMLs read in order
# (small scale is the demo schedule, trained longer).
SCALE_EXPERIMENTS = {"demo": ("demo_ablation",),
                     "small": ("demo_ablation", "small_ablation")}
# The paper's comparisons at demo size; row NAME's model preset is
# configs/models/demo_ablation_NAME.yaml.
DEMO_ROWS = ("coupled", "decoupled", "in32", "in32_reinvested", "in32_out512",
             "in32_extra_output_layers")
# Small scale adds the floor the rows are read against: the decoupled row's
# architecture fine-tuned from random weights (no pre-training).
RANDOM_INIT_ROW = ("random_init", "demo_ablation_decoupled")
# Rows the paper reports numbers for, and their column of the task table's
# `paper_results` (evaluation.xtreme_tasks).
PAPER_ROWS = {"coupled_768": "coupled", "decoupled_768": "decoupled"}


@dataclasses.dataclass(frozen=True)
class AblationRow:
  name: str                            # directory name and table label
  experiment: str                      # experiment YAML name or path
  extends: Tuple[str, ...] = ()        # YAMLs read before `experiment`
  model_preset: Optional[str] = None   # overrides task.model_preset
  paper_column: Optional[str] = None   # "coupled" / "decoupled" in the paper
  pretrained: bool = True              # False: fine-tuned from random weights


def base_rows(experiment_names: Optional[Sequence[str]] = None
              ) -> List[AblationRow]:
  """Rows from experiment YAMLs (default: every ablation_* experiment)."""
  if not experiment_names:
    experiment_names = sorted(
        p.stem for p in experiment_files.EXPERIMENT_CONFIG_DIR.glob("ablation_*.yaml"))
  result = []
  for experiment in experiment_names:
    experiment_files.resolve_experiment_path(experiment)   # names the choices if absent
    stem = str(experiment).rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = stem[len("ablation_"):] if stem.startswith("ablation_") else stem
    result.append(AblationRow(name=name, experiment=str(experiment),
                              paper_column=PAPER_ROWS.get(name)))
  return result


def scale_rows(scale: str) -> List[AblationRow]:
  """The rows of a CPU scale: the demo-size presets on the scale's schedule
  (and, at small scale, the random-initialisation row)."""
  *extends, experiment = SCALE_EXPERIMENTS[scale]
  schedule = dict(experiment=experiment, extends=tuple(extends))
  rows = [AblationRow(name=name, model_preset=f"demo_ablation_{name}",
                      **schedule) for name in DEMO_ROWS]
  if scale == "small":
    name, preset = RANDOM_INIT_ROW
    rows.append(AblationRow(name=name, model_preset=preset, pretrained=False,
                            **schedule))
  return rows


def select_rows(rows: List[AblationRow], names: Optional[Sequence[str]]
                ) -> List[AblationRow]:
  """The rows named in `names` (all when empty), in the suite's order."""
  if not names:
    return rows
  known = {row.name for row in rows}
  unknown = [n for n in names if n not in known]
  if unknown:
    raise errors.UsageError(
        f"--models {','.join(unknown)}: no such row; the rows of this scale "
        f"are {', '.join(sorted(known))}.")
  return [row for row in rows if row.name in names]


def load_row_config(row: AblationRow, override: Dict[str, Any]):
  """The row's ExperimentConfig: its YAML, its preset, then the suite override."""
  merged = dict(override)
  if row.model_preset:
    task = dict(merged.get("task", {}))
    task["model_preset"] = row.model_preset
    merged["task"] = task
  return pretraining_experiments.load_experiment_config(
      [*row.extends, row.experiment], merged)


def _schedule(config) -> Dict[str, Any]:
  values = config.as_dict()
  task = dict(values["task"])
  task.pop("model", None)
  task.pop("model_preset", None)
  return {"task": task, "trainer": values["trainer"], "runtime": values["runtime"]}


def _first_difference(a, b, prefix=""):
  if isinstance(a, dict) and isinstance(b, dict):
    for key in sorted(set(a) | set(b)):
      found = _first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
      if found:
        return found
    return None
  return (prefix.rstrip("."), a, b) if a != b else None


def check_same_schedule(configs: Dict[str, Any]) -> None:
  """Raises UsageError naming the first field in which two rows' experiments
  differ outside the model (data, schedule, optimizer, runtime)."""
  names = list(configs)
  reference = _schedule(configs[names[0]])
  for name in names[1:]:
    found = _first_difference(reference, _schedule(configs[name]))
    if found:
      field, ours, theirs = found
      raise errors.UsageError(
          f"rows {names[0]} and {name} differ in {field} ({ours!r} vs "
          f"{theirs!r}): the suite compares models trained identically. Make "
          "the experiment YAMLs agree, set the field for all rows with "
          "--params_override, or pass --allow_different_schedules.")

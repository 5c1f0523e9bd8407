"""The paper's fine-tuning protocol for one row and task, on the fine-tuning library.

One `finetuning_runner.run_finetuning` sweep (learning rates x seeds,
selected on English dev, mean and std over the selected rate's seeds) per row
and task; the runner skips a finished run and resumes an interrupted one, and
a finished sweep leaves a completion marker the suite skips it by.
"""
from typing import Any, Callable, Dict, Optional, Sequence, Union

from rembert_tf.ablation import completion
from rembert_tf.common import errors
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import finetuning_runner
from rembert_tf.runtime import experiment_files

# Fields the suite sets for each run -> what to use instead.
SET_PER_RUN = {
    "data.task": "choose the tasks with --tasks",
    "encoder.init_checkpoint": "each row's pre-trained model is fine-tuned",
    "encoder.model_config": "each row's pre-trained model is fine-tuned",
    "trainer.learning_rate": "choose the rates with --learning_rates",
    "sweep.learning_rates": "choose the rates with --learning_rates",
    "sweep.num_seeds": "choose the seeds per rate with --num_seeds",
    "trainer.seed": "choose the seeds per rate with --num_seeds",
    **{f"data.{name}": "give --xtreme_records_dir or --xtreme_data_dir" for name
       in ("records_dir", "data_dir", "data_source", "tfds_data_dir")},
    "data.sentencepiece_model": "give --sentencepiece_model",
}


def checked_overrides(overrides: Any) -> Dict[str, Any]:
  """The suite's fine-tuning overrides as {field: value}, refused now (not after
  pre-training) when a field is unknown, mistyped or one the suite sets."""
  flat = _flat_overrides(overrides)
  for field in flat:
    if field in SET_PER_RUN:
      raise errors.UsageError(f"fine-tuning override {field}: the suite sets "
                              f"it for each run ({SET_PER_RUN[field]}).")
  finetuning_experiment.load_finetuning_config(
      params_override=flat, source="the suite's fine-tuning overrides")
  return flat


def _flat_overrides(
    params_override: Union[str, Sequence[str], Dict[str, Any], None],
    prefix: str = "") -> Dict[str, Any]:
  """`--params_override` (or a list of them, in order) as {dotted field:
  value}."""
  flat = {}
  if isinstance(params_override, (list, tuple)):
    for text in params_override:
      flat.update(_flat_overrides(text, prefix))
    return flat
  for key, value in experiment_files.parse_override(params_override).items():
    if isinstance(value, dict) and value:
      flat.update(_flat_overrides(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def _finetune(sweep_dir: str, fields: Dict[str, Any], num_seeds: int,
              say: Callable[[str], None]) -> Dict[str, Any]:
  config = finetuning_experiment.load_finetuning_config(
      params_override=dict(fields, **{"sweep.num_seeds": num_seeds}))
  return finetuning_runner.run_finetuning(config, output_dir=sweep_dir,
                                         progress=say)


def run_sweep(task: str, sweep_dir: str, encoder: Dict[str, Optional[str]],
              data: Dict[str, Any], learning_rates: Sequence[float],
              num_seeds: int, overrides: Dict[str, Any],
              keep_first_seed: bool = False,
              say: Callable[[str], None] = print) -> Dict[str, Any]:
  """Every (rate, seed) run of one model on one task; returns the summary.

  `encoder`: the `encoder.*` fields (a checkpoint, or a model config for
  random weights); `data`: the `data.*` fields. With `keep_first_seed` the
  first seed of each rate keeps its fine-tuned checkpoint (the layer
  similarity reads the selected rate's). A finished sweep is not redone.
  """
  settings = dict(overrides, **encoder, **{"data.task": task,
                                           "sweep.learning_rates": list(learning_rates)})
  done = completion.read_complete(sweep_dir)
  if done is not None and done.get("settings") == dict(settings, num_seeds=num_seeds):
    say(f"[ablation] skip fine-tuning sweep {sweep_dir}: finished earlier")
    return done
  fields = dict(settings, **data)
  if keep_first_seed:
    results = _finetune(sweep_dir, dict(fields, **{"trainer.keep_checkpoints": True}),
                        1, say)
  if num_seeds > 1 or not keep_first_seed:
    results = _finetune(sweep_dir, fields, num_seeds, say)
  selected = results["selected_learning_rate"]
  runs = [r for r in results["runs"] if r["learning_rate"] == selected]
  summary = dict(
      settings=dict(settings, num_seeds=num_seeds), task=task,
      selected_learning_rate=selected, num_seeds=results["num_seeds"],
      scores=results["scores"], std=results["std"],
      records_dir=results["records_dir"],
      seed_scores=[r["scores"][results["score_split"]] for r in runs],
      finetuned_checkpoint=min(runs, key=lambda r: r["seed"])["run_dir"])
  completion.mark_complete(sweep_dir, summary)
  return summary

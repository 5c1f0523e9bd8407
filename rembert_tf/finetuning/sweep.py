"""The paper's fine-tuning protocol: a sweep of learning rates x seeds, resumable.

Both `rembert-finetune` (`finetuning_runner.run_finetuning`) and the ablation
suite use this module; the selection rule below is the only one.

* Each (rate, seed) run lives in `runs/lr-<lr>_seed-<s>/`. Its
  `run_config.json` holds what changes its weights (the run fingerprint:
  the settings, the training records, the initial weights and the model
  config by content, never a path). The output directory's sweep is every
  run asked for and every run it already holds (another rate or seed of an
  earlier command); a run made with other settings is refused before any
  run starts. A finished run (its `run.json` exists) is skipped and its
  stored result returned, unless the records or splits it predicted changed
  since: then it predicts them again, from its kept checkpoint or trained
  again, and its result says which (`redone`). An interrupted run resumes
  from its newest checkpoint (`training_loop`), after the `ckpt-N_temp`
  directories a killed save left are removed.
* Selection: the rate with the best mean English dev score over its seeds
  (English's headline score; on the scored split when the task has no dev
  set). A rate without any English dev score ranks below every scored rate;
  among rates with equal scores the SMALLER learning rate is selected, so the
  choice does not depend on the order the rates were given in.
* Summary of the selected rate: the mean and the sample standard deviation
  (ddof=1; 0 for a single seed) over its seeds of every number in the
  official-shape scores, averages included (an `avg_*` is the mean over seeds
  of each seed's average over languages).

Example:
<!-- snippet: not run: a fragment: `runs` comes from the caller's code -->
```python
from rembert_tf.finetuning import sweep
summary = sweep.summarize_runs(runs, score_split="dev")
summary["selected_learning_rate"], summary["scores"]["avg_metric"]
print(sweep.selection_markdown(summary))   # English dev of each rate, the selected one
sweep.select_learning_rate({1e-5: 70.0, 3e-5: 70.0, 5e-5: None})   # 1e-05
```
"""
import collections
import dataclasses
import functools
import hashlib
import json
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import predictions
from rembert_tf.finetuning import training_loop
from rembert_tf.checkpoints import checkpoint_layout

RUN_RESULT_FILE = "run.json"
RUN_CONFIG_FILE = "run_config.json"
# Fields of a run's configuration that change its result.
# Every setting that changes a run's result (its weights, predictions or
# scores), and none that does not (paths as spelled, loop and checkpoint
# cadence, log verbosity, the evaluation batch).
_RESULT_FIELDS = ("learning_rate", "seed", "num_train_steps",
                  "warmup_proportion", "train_batch_size", "weight_decay_rate",
                  "deterministic", "freeze_input_embeddings", "n_best_size",
                  "max_answer_length")


@dataclasses.dataclass(frozen=True)
class SweepContext:
  """What every run of a sweep shares."""
  meta: Dict[str, Any]                 # the records' metadata.json
  records_dir: str
  model_config: Any                    # the encoder's RemBertConfig
  restore_encoder: Optional[Callable]  # loads the pre-trained weights
  strategy: tf.distribute.Strategy
  splits: Sequence[str] = ("dev", "test")
  init_checkpoint: Optional[str] = None
  progress: Callable[[str], None] = print
  stop: Optional[threading.Event] = None  # set by SIGTERM
  mixed_precision: Optional[str] = None

  @functools.cached_property
  def records_sha256(self) -> Dict[str, str]:
    """Every records file (labels and side files too) by sha256; not
    metadata.json, which names paths."""
    return {name: fileio.sha256(fileio.join(self.records_dir, name))
            for name in fileio.files_under(fileio.as_str(self.records_dir))
            if name != finetuning_data.METADATA_FILE}

  @functools.cached_property
  def identity(self) -> Dict[str, Any]:
    """What every run's weights depend on beside its trainer settings."""
    train_file = self.meta["splits"]["train"]["en"]["file"]
    return {"task": self.meta["task"],
            "train_records_sha256": self.records_sha256[train_file],
            "init_checkpoint_sha256": _checkpoint_identity(
                self.init_checkpoint),
            "model_config": self.model_config.as_dict(),
            "mixed_precision_dtype": self.mixed_precision}

  def predicted(self) -> Dict[str, Any]:
    """What a finished run's predictions were made from (in its run.json)."""
    return {"records_sha256": hashlib.sha256(json.dumps(
        self.records_sha256, sort_keys=True).encode()).hexdigest(),
            "splits": sorted(self.splits)}


# --- One run: fingerprint, skip or resume ----------------------------------------


def run_label(meta: Dict, config: finetuning_experiment.FinetuningConfig
              ) -> str:
  return f"{meta['task']} lr={config.learning_rate:g} seed={config.seed}"


def run_directory(output_dir: str,
                  config: finetuning_experiment.FinetuningConfig) -> str:
  return fileio.join(output_dir, "runs",
                     f"lr-{config.learning_rate:g}_seed-{config.seed}")


def run_fingerprint(config: finetuning_experiment.FinetuningConfig,
                    steps: int, identity: Dict[str, Any]) -> Dict[str, Any]:
  """What a run's weights depend on (written to its run_config.json): its
  result settings and `identity` (`SweepContext.identity`)."""
  values = {k: getattr(config, k) for k in _RESULT_FIELDS}
  values["num_train_steps"] = steps
  values.update(identity)
  return values


def _checkpoint_identity(init_checkpoint) -> str:
  """The sha256 of the index of the checkpoint `init_checkpoint` resolves
  to; its path when it is not a checkpoint of ours; "" for none."""
  if not init_checkpoint:
    return ""
  try:
    prefix = checkpoint_layout.resolve(init_checkpoint).encoder_checkpoint
    return fileio.sha256(prefix + ".index")
  except (errors.RemBertError, OSError, tf.errors.OpError):
    return fileio.as_str(init_checkpoint)


def check_run_config(run_dir: str, fingerprint: Dict[str, Any]) -> None:
  """Refuses to resume or skip a run directory made with other settings."""
  path = fileio.join(run_dir, RUN_CONFIG_FILE)
  if not fileio.exists(path):
    fileio.write_text(path, json.dumps(fingerprint, indent=1) + "\n")
    return
  diffs = _differences(fileio.read_json(path), fingerprint)
  if diffs:
    output_dir = fileio.dirname(fileio.dirname(run_dir))
    raise finetuning_experiment.FinetuningError(
        f"{path}: this run was made with other settings (" + "; ".join(diffs)
        + f"). Pass --overwrite to start {output_dir} again, or use another "
        "--output_dir.")


def _differences(saved: Dict[str, Any], now: Dict[str, Any],
                 prefix: str = "") -> List[str]:
  """"FIELD is A there, B now" for each field of both that differs (a
  dict field by its own fields); a setting that a run directory of an
  earlier version did not record is not held against it."""
  diffs = []
  for key, value in now.items():
    if key not in saved or saved[key] == value:
      continue
    if isinstance(value, dict) and isinstance(saved[key], dict):
      diffs += _differences(saved[key], value, f"{prefix}{key}.")
    else:
      diffs.append(f"{prefix}{key} is {saved[key]!r} there, {value!r} now")
  return diffs


def _predict_again(run_dir: str, label: str, progress) -> str:
  """A finished run whose records or splits changed: its predictions and
  result removed (run.json last), so that it predicts again, from its kept
  checkpoint or trained again; returns which."""
  kept = fileio.glob(fileio.join(run_dir, "ckpt-*.index"))
  how = ("predicted again from its kept checkpoint" if kept else
         "trained again (its checkpoint was not kept; --keep_checkpoints "
         "keeps it)")
  progress(f"[finetune] {label}: the records or splits changed after it "
           f"finished; {how}")
  fileio.rmtree(fileio.join(run_dir, "predictions"))
  fileio.rmtree(fileio.join(run_dir, predictions.SCORES_FILE))
  fileio.remove(fileio.join(run_dir, RUN_RESULT_FILE))
  return f"{how}: the records or splits changed after it finished"


def run_once(context: SweepContext, run_dir: str,
             config: finetuning_experiment.FinetuningConfig) -> Dict:
  """Trains once (or resumes), writes every split's predictions, scores.

  A finished run (its run.json exists, same settings) is returned as it was.
  """
  meta, records_dir = context.meta, fileio.as_str(context.records_dir)
  run_dir = fileio.as_str(run_dir)
  label = run_label(meta, config)
  steps = finetuning_experiment.num_train_steps(meta, config)
  fileio.makedirs(run_dir)
  check_run_config(run_dir, run_fingerprint(config, steps, context.identity))
  result_file = fileio.join(run_dir, RUN_RESULT_FILE)
  redone = None
  if fileio.exists(result_file):
    done = fileio.read_json(result_file)
    # A result of an earlier version (no "predicted") is taken as it is.
    if done.get("predicted", context.predicted()) == context.predicted():
      context.progress(f"[finetune] {label}: finished earlier, skipped "
                       f"({result_file})")
      return done
    redone = _predict_again(run_dir, label, context.progress)
  for stale in checkpoint_layout.remove_temporaries([run_dir]):
    logging.info("Removed %s (left by a killed checkpoint save).", stale)
  try:
    task, model = training_loop.train_run(
        meta, records_dir, run_dir, context.model_config,
        context.restore_encoder, config, context.strategy, label,
        context.progress, stop=context.stop)
    predictor = predictions.Predictor(task, model, context.strategy,
                                      config.eval_batch_size)
    scores_by_split = predictions.predict_and_score(
        predictor, meta, records_dir, run_dir, config, context.splits)
  except Exception as e:  # pylint: disable=broad-except
    if not fileio.is_disk_full(e):
      raise
    checkpoint_layout.remove_temporaries([run_dir])
    raise run_disk_full_error(run_dir, e) from None
  result = {"learning_rate": config.learning_rate, "seed": config.seed,
            "num_train_steps": steps, "scores": scores_by_split,
            "english_dev_metric": predictions.english_dev_metric(
                meta, scores_by_split),
            "run_dir": run_dir, "predicted": context.predicted()}
  if redone:
    result["redone"] = redone
  xtreme_scorer.write_json(result, result_file)
  if not config.keep_checkpoints:
    training_loop.remove_training_checkpoints(run_dir)
  return result


def run_disk_full_error(run_dir: str, error: BaseException
                        ) -> errors.InputError:
  """A run's write (a checkpoint, predictions) that ran out of space: the
  run named, its unfinished checkpoint removed, the earlier ones kept."""
  reason = ("disk quota exceeded" if "quota" in str(error).lower()
            else "no space left on the device")
  return errors.InputError(
      f"{run_dir}: writing it failed: {reason}. The unfinished checkpoint "
      "is removed, the run's earlier checkpoints are kept. Free space there, "
      "then run the same command: it resumes from the newest checkpoint.")


def run_sweep(context: SweepContext, output_dir: str,
              run_configs: Sequence[finetuning_experiment.FinetuningConfig]
              ) -> List[Dict]:
  """Every run in order (`run_configs`: the base trainer config with each
  run's overrides, `finetuning_experiment.run_overrides`), then every other
  run output_dir holds (an earlier command's rate or seed), each checked
  against its run_config.json before any run starts; finished ones are
  skipped."""
  asked = {(c.learning_rate, c.seed) for c in run_configs}
  configs = list(run_configs) + [
      run_configs[0].replace(learning_rate=rate, seed=seed)
      for rate, seed in earlier_runs(output_dir) if (rate, seed) not in asked]
  for config in configs:
    run_dir = run_directory(output_dir, config)
    if fileio.exists(fileio.join(run_dir, RUN_CONFIG_FILE)):
      check_run_config(run_dir, run_fingerprint(
          config, finetuning_experiment.num_train_steps(context.meta, config),
          context.identity))
  runs = []
  for config in configs:
    run_dir = run_directory(output_dir, config)
    earlier = "" if (config.learning_rate, config.seed) in asked else (
        " (an earlier command's run)")
    context.progress(f"[finetune] run {len(runs) + 1}/{len(configs)}: "
                     f"{run_label(context.meta, config)} in {run_dir}"
                     + earlier)
    runs.append(run_once(context, run_dir, config))
  return runs


def earlier_runs(output_dir: str) -> List[Tuple[float, int]]:
  """(learning rate, seed) of every run output_dir holds (started)."""
  runs_dir = fileio.join(output_dir, "runs")
  found = []
  for name in fileio.listdir(runs_dir) if fileio.isdir(runs_dir) else []:
    path = fileio.join(runs_dir, name, RUN_CONFIG_FILE)
    if fileio.exists(path):
      saved = fileio.read_json(path)
      found.append((saved["learning_rate"], saved["seed"]))
  return sorted(found)


# --- Selection and summary ----------------------------------------------------------


def select_learning_rate(english_dev_by_rate: Dict[float, Optional[float]]
                         ) -> float:
  """The rate with the best English dev score (see the module docstring):
  unscored rates rank last, ties go to the smaller rate."""
  return max(english_dev_by_rate,
             key=lambda rate: (english_dev_by_rate[rate] is not None,
                               english_dev_by_rate[rate] or 0.0, -rate))


def mean_and_std(values: List[float]) -> Tuple[float, float]:
  """Mean and sample standard deviation over seeds (0 for one run)."""
  std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
  return float(np.mean(values)), std


def _leafwise(score_dicts: List[Dict]) -> Tuple[Dict, Dict]:
  mean, std = {}, {}
  for key, value in score_dicts[0].items():
    values = [scores[key] for scores in score_dicts]
    if isinstance(value, dict):
      mean[key], std[key] = _leafwise(values)
    else:
      mean[key], std[key] = mean_and_std([float(v) for v in values])
  return mean, std


def mean_and_std_over_seeds(score_dicts: List[Optional[Dict]]
                            ) -> Tuple[Optional[Dict], Optional[Dict]]:
  """Mean and sample std over runs of every number in official-shape scores;
  (None, None) when a run has none (no labelled files)."""
  if not score_dicts or not all(score_dicts):
    return None, None
  return _leafwise(score_dicts)


def summarize_runs(runs: List[Dict], score_split: str) -> Dict:
  """Picks the rate on English dev; mean / std of its seeds' scores.

  `runs`: dicts with learning_rate, english_dev_metric and scores
  ({split: official-shape scores}), as `run_once` returns them.
  """
  by_rate = collections.defaultdict(list)
  for run in runs:
    by_rate[run["learning_rate"]].append(run)
  english_dev = {}
  for rate, rate_runs in sorted(by_rate.items()):
    values = [r["english_dev_metric"] for r in rate_runs
              if r["english_dev_metric"] is not None]
    english_dev[rate] = float(np.mean(values)) if values else None
  selected = select_learning_rate(english_dev)
  mean, std = mean_and_std_over_seeds(
      [run["scores"].get(score_split) for run in by_rate[selected]])
  return {"selected_learning_rate": selected,
          "english_dev_by_rate": {f"{k:g}": v for k, v in english_dev.items()},
          "num_seeds": len(by_rate[selected]), "scores": mean, "std": std}


def selection_markdown(summary: Dict) -> str:
  """Markdown: each rate's English dev score (mean over its seeds), the
  selected rate marked; what chose the rate, as `summarize_runs` saw it."""
  selected = f"{summary['selected_learning_rate']:g}"
  lines = ["| learning rate | English dev (mean over seeds) | |",
           "| ---: | ---: | --- |"]
  for rate, score in summary["english_dev_by_rate"].items():
    shown = "-" if score is None else f"{score:.2f}"
    mark = "selected" if rate == selected else ""
    lines.append(f"| {rate} | {shown} | {mark} |")
  return "\n".join(lines + [
      "", "Selected: the best English dev score (the mean over the rate's "
      "seeds; equal scores: the smaller rate), over every run of the output "
      "directory, earlier commands' runs included."])

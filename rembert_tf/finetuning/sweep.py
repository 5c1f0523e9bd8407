"""The paper's fine-tuning protocol: a sweep of learning rates x seeds, resumable.

Both `rembert-finetune` (`finetuning_runner.run_finetuning`) and the ablation
suite use this module; the selection rule below is the only one.

* Each (rate, seed) run lives in `runs/lr-<lr>_seed-<s>/`. Its
  `run_config.json` holds what changes its result (the run fingerprint); a
  directory started with other settings is refused. A finished run (its
  `run.json` exists) is skipped and its stored result returned; an
  interrupted one resumes from its newest checkpoint (`training_loop`), after
  the `ckpt-N_temp` directories a killed save left are removed.
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
from rembert_tf.checkpoints import checkpoint_temporaries

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


# --- One run: fingerprint, skip or resume ----------------------------------------


def run_label(meta: Dict, config: finetuning_experiment.FinetuningConfig
              ) -> str:
  return f"{meta['task']} lr={config.learning_rate:g} seed={config.seed}"


def run_directory(output_dir: str,
                  config: finetuning_experiment.FinetuningConfig) -> str:
  return fileio.join(output_dir, "runs",
                     f"lr-{config.learning_rate:g}_seed-{config.seed}")


def run_fingerprint(config: finetuning_experiment.FinetuningConfig,
                    steps: int, records_dir, init_checkpoint
                    ) -> Dict[str, Any]:
  """What a run's result depends on (written to its run_config.json)."""
  values = {k: getattr(config, k) for k in _RESULT_FIELDS}
  values["num_train_steps"] = steps
  # The records and the initial weights by content, never by path: their
  # metadata (sequence length, tokenizer, files) and the checkpoint's index
  # (every tensor's checksum).
  values["records_metadata_sha256"] = fileio.sha256(
      fileio.join(records_dir, finetuning_data.METADATA_FILE))
  values["init_checkpoint_sha256"] = _checkpoint_identity(init_checkpoint)
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
  """Refuses to resume or skip a run directory started with other settings."""
  path = fileio.join(run_dir, RUN_CONFIG_FILE)
  if not fileio.exists(path):
    fileio.write_text(path, json.dumps(fingerprint, indent=1) + "\n")
    return
  saved = fileio.read_json(path)
  # A setting that a run directory of an earlier version did not record is
  # not held against it.
  diffs = [f"{k} is {saved.get(k)!r} there, {v!r} now"
           for k, v in fingerprint.items() if k in saved and saved[k] != v]
  if diffs:
    raise finetuning_experiment.FinetuningError(
        f"{path}: this run directory was started with other settings ("
        + "; ".join(diffs) + "). Use another --output_dir, or remove "
        f"{run_dir} to start that run again.")


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
  check_run_config(run_dir, run_fingerprint(config, steps, records_dir,
                                            context.init_checkpoint))
  result_file = fileio.join(run_dir, RUN_RESULT_FILE)
  if fileio.exists(result_file):
    context.progress(f"[finetune] {label}: finished earlier, skipped "
                     f"({result_file})")
    return fileio.read_json(result_file)
  for stale in checkpoint_temporaries.remove([run_dir]):
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
    checkpoint_temporaries.remove([run_dir])
    raise run_disk_full_error(run_dir, e) from None
  result = {"learning_rate": config.learning_rate, "seed": config.seed,
            "num_train_steps": steps, "scores": scores_by_split,
            "english_dev_metric": predictions.english_dev_metric(
                meta, scores_by_split),
            "run_dir": run_dir}
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
  run's overrides, `finetuning_experiment.run_overrides`); finished ones are
  skipped."""
  runs = []
  for config in run_configs:
    run_dir = run_directory(output_dir, config)
    context.progress(f"[finetune] run {len(runs) + 1}/{len(run_configs)}: "
                     f"{run_label(context.meta, config)} in {run_dir}")
    runs.append(run_once(context, run_dir, config))
  return runs


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
  for rate, rate_runs in by_rate.items():
    values = [r["english_dev_metric"] for r in rate_runs
              if r["english_dev_metric"] is not None]
    english_dev[rate] = float(np.mean(values)) if values else None
  selected = select_learning_rate(english_dev)
  mean, std = mean_and_std_over_seeds(
      [run["scores"].get(score_split) for run in by_rate[selected]])
  return {"selected_learning_rate": selected,
          "english_dev_by_rate": {f"{k:g}": v for k, v in english_dev.items()},
          "scores": mean, "std": std}


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
  return "\n".join(lines)

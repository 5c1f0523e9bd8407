"""The paper's fine-tuning protocol: a sweep of learning rates x seeds, resumable.

Used by `rembert-finetune` and the ablation suite; the selection rule here is
the only one. Each (rate, seed) run lives in `runs/lr-<lr>_seed-<s>/`; its
`run_config.json` is the run's fingerprint (settings, records, initial
weights, by content): a run made with other settings is refused before any
run starts; a finished run (`run.json`) is skipped unless the records it
predicted changed (then it predicts again, `redone`); an interrupted one
resumes from its newest checkpoint. Selection: the best mean English dev
score over seeds; unscored rates rank last, ties go to the SMALLER rate.
Summary: mean and sample std (ddof=1; 0 for one seed) over the selected
rate's seeds of every number in the official-shape scores.

Example:
```python
from rembert_tf.finetuning import sweep
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
from official.core import config_definitions as cfg
from official.core import train_lib
from official.core import train_utils
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.data import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import predictions
from rembert_tf.finetuning import finetuning_task
from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings

RUN_RESULT_FILE = "run.json"
RUN_CONFIG_FILE = "run_config.json"
# Every setting that changes a run's result, and none that does not (paths,
# loop and checkpoint cadence, log verbosity, the evaluation batch).
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
    """Every records file by sha256 (not metadata.json, which names paths)."""
    return {name: fileio.sha256(fileio.join(self.records_dir, name))
            for name in fileio.files_under(fileio.as_str(self.records_dir))
            if name != finetuning_data.METADATA_FILE}

  @functools.cached_property
  def identity(self) -> Dict[str, Any]:
    """What the weights depend on beside the trainer settings."""
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
  """A run's run_config.json: what its weights depend on."""
  return {**{k: getattr(config, k) for k in _RESULT_FIELDS},
          "num_train_steps": steps, **identity}


def _checkpoint_identity(init_checkpoint) -> str:
  """The sha256 of the checkpoint's index; its path if not ours; "" for none."""
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
    raise finetuning_experiment.FinetuningError(
        f"{path}: this run was made with other settings (" + "; ".join(diffs)
        + "). Pass --overwrite to start "
        f"{fileio.dirname(fileio.dirname(run_dir))} again, or use another "
        "--output_dir.")


def _differences(saved: Dict[str, Any], now: Dict[str, Any],
                 prefix: str = "") -> List[str]:
  """"FIELD is A there, B now" for each differing field (a field older runs lack is skipped)."""
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
  """Removes a finished run's predictions and result (run.json last);
  returns whether it predicts again from its checkpoint or trains again."""
  how = ("predicted again from its kept checkpoint"
         if fileio.glob(fileio.join(run_dir, "ckpt-*.index")) else
         "trained again (its checkpoint was not kept; --keep_checkpoints "
         "keeps it)")
  progress(f"[finetune] {label}: the records or splits changed after it "
           f"finished; {how}")
  for name in ("predictions", predictions.SCORES_FILE, RUN_RESULT_FILE):
    fileio.rmtree(fileio.join(run_dir, name))
  return f"{how}: the records or splits changed after it finished"


def run_once(context: SweepContext, run_dir: str,
             config: finetuning_experiment.FinetuningConfig,
             params: cfg.ExperimentConfig) -> Dict:
  """Trains (or resumes) the run of `config` (Model Garden's `params`),
  predicts every split, scores; a finished run of the same records and
  splits is returned as its run.json holds it."""
  meta, records_dir = context.meta, fileio.as_str(context.records_dir)
  label, steps = run_label(meta, config), params.trainer.train_steps
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
  for stale in checkpoint_integrity.remove_temporaries([run_dir]):
    logging.info("Removed %s (left by a killed checkpoint save).", stale)
  try:
    task, model = train_run(params, run_dir, context.restore_encoder,
                            context.strategy, label, context.progress,
                            stop=context.stop)
    scores_by_split = predictions.predict_and_score(
        predictions.Predictor(task, model, context.strategy,
                              config.eval_batch_size),
        meta, records_dir, run_dir, config.n_best_size,
        config.max_answer_length, context.splits)
  except Exception as e:  # pylint: disable=broad-except
    if not fileio.is_disk_full(e):
      raise
    checkpoint_integrity.remove_temporaries([run_dir])
    reason = ("disk quota exceeded" if "quota" in str(e).lower()
              else "no space left on the device")
    raise errors.InputError(
        f"{run_dir}: writing it failed: {reason}. The unfinished checkpoint "
        "is removed, the run's earlier checkpoints are kept. Free space "
        "there, then run the same command: it resumes from the newest "
        "checkpoint.") from None
  result = {"learning_rate": config.learning_rate, "seed": config.seed,
            "num_train_steps": steps, "scores": scores_by_split,
            "english_dev_metric": predictions.english_dev_metric(
                meta, scores_by_split),
            "run_dir": run_dir, "predicted": context.predicted(),
            **({"redone": redone} if redone else {})}
  xtreme_scorer.write_json(result, result_file)
  if not config.keep_checkpoints:
    for path in fileio.glob(fileio.join(run_dir, "ckpt-*")) + [
        fileio.join(run_dir, "checkpoint")]:
      fileio.rmtree(path)  # the model and optimizer state
  return result


def run_sweep(context: SweepContext, output_dir: str,
              trainer: finetuning_experiment.FinetuningConfig,
              overrides: Sequence[Dict[str, Any]]) -> List[Dict]:
  """The runs of `trainer` with each {learning_rate, seed} of `overrides`,
  then every other run output_dir holds, all checked against their
  run_config.json before any starts."""
  asked = {(o["learning_rate"], o["seed"]) for o in overrides}
  overrides = list(overrides) + [
      {"learning_rate": rate, "seed": seed}
      for rate, seed in earlier_runs(output_dir) if (rate, seed) not in asked]
  runs = []
  for override in overrides:
    config = trainer.replace(**override)
    params = finetuning_experiment.experiment_config(
        context.meta, fileio.as_str(context.records_dir),
        context.model_config, config)
    run_dir = run_directory(output_dir, config)
    if fileio.exists(fileio.join(run_dir, RUN_CONFIG_FILE)):
      check_run_config(run_dir, run_fingerprint(
          config, params.trainer.train_steps, context.identity))
    runs.append((run_dir, config, params))
  results = []
  for run_dir, config, params in runs:
    earlier = "" if (config.learning_rate, config.seed) in asked else (
        " (an earlier command's run)")
    context.progress(f"[finetune] run {len(results) + 1}/{len(runs)}: "
                     f"{run_label(context.meta, config)} in {run_dir}"
                     + earlier)
    results.append(run_once(context, run_dir, config, params))
  return results


def earlier_runs(output_dir: str) -> List[Tuple[float, int]]:
  """(learning rate, seed) of every run output_dir holds (started)."""
  runs_dir = fileio.join(output_dir, "runs")
  saved = [fileio.join(runs_dir, name, RUN_CONFIG_FILE)
           for name in (fileio.listdir(runs_dir) if fileio.isdir(runs_dir)
                        else [])]
  return sorted((config["learning_rate"], config["seed"]) for config in
                map(fileio.read_json, filter(fileio.exists, saved)))


# --- One run: training on Model Garden's runner ---------------------------------


def _resume_step(task: finetuning_task.FinetuningTask, run_dir: str,
                 total_steps: int, label: str, progress) -> None:
  """Starts the task's input stream after the newest intact checkpoint's step."""
  latest = checkpoint_layout.latest_checkpoint(run_dir, report=progress)
  if latest is not None:
    checkpoint_integrity.name_as_latest(run_dir, latest)
    task.initial_train_step = int(latest.rsplit("-", 1)[1])
    progress(f"[finetune] {label}: resuming from {latest} at step "
             f"{task.initial_train_step}/{total_steps}")


def train_run(params: cfg.ExperimentConfig, run_dir: str, restore_encoder,
              strategy, label: str, progress,
              stop: Optional[threading.Event] = None):
  """Trains (or resumes) Model Garden's experiment `params` in `run_dir` on
  its orbit loop; on SIGTERM a checkpoint then `TrainingPreempted`. Returns
  (task, model)."""
  process_settings.set_seed(params.task.train_data.seed)
  task = finetuning_task.FinetuningTask(params.task, logging_dir=run_dir,
                                        restore_encoder=restore_encoder)
  _resume_step(task, run_dir, params.trainer.train_steps, label, progress)
  with strategy.scope():
    trainer = train_utils.create_trainer(params, task, train=True,
                                         evaluate=False)
  steps_per_loop = params.trainer.steps_per_loop
  saves = orbit_loop.Checkpoints(params.trainer.checkpoint_interval)
  stops = preemption.stop_actions(
      strategy, stop, lambda: saves.save(final=True), trainer.global_step)
  loop_steps = orbit_loop.LoopSteps(
      steps_per_loop, params.trainer.checkpoint_interval, strategy)
  # train_lib.run_experiment's runner, without its FLOP count (a graph
  # profile); the saves are `saves`', not the checkpoint manager's.
  with orbit_loop.orbit_prints_to_log(progress) as say:
    printer = orbit_loop.ProgressPrinter(
        trainer.global_step, params.trainer.train_steps, say,
        prefix=f"[finetune] {label}: ", batch_size=params.task.train_data.global_batch_size,
        steps_per_loop=steps_per_loop)
    runner = train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode="train",
        params=params.replace(trainer={"checkpoint_interval": 0}),
        model_dir=run_dir, trainer=trainer,
        train_actions=[printer, saves, *stops],
        controller_cls=orbit_loop.controller_with_steps(loop_steps))
    saves.attach(runner.checkpoint_manager, trainer.global_step)
    with strategy.scope():
      runner.controller.train(steps=params.trainer.train_steps)
    saves.save(final=True)
  return task, trainer.model


# --- Selection and summary ----------------------------------------------------------


def select_learning_rate(english_dev_by_rate: Dict[float, Optional[float]]
                         ) -> float:
  """The rate with the best English dev score; unscored last, ties to the smaller."""
  return max(english_dev_by_rate,
             key=lambda rate: (english_dev_by_rate[rate] is not None,
                               english_dev_by_rate[rate] or 0.0, -rate))


def mean_and_std_over_seeds(score_dicts: List[Optional[Dict]]
                            ) -> Tuple[Optional[Dict], Optional[Dict]]:
  """Mean and sample std (0 for one run) of every number in official-shape
  scores; (None, None) if any run has none."""
  if not score_dicts or not all(score_dicts):
    return None, None
  mean = tf.nest.map_structure(lambda *v: float(np.mean(v)), *score_dicts)
  std = tf.nest.map_structure(
      lambda *v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, *score_dicts)
  return mean, std


def summarize_runs(runs: List[Dict], score_split: str) -> Dict:
  """Picks the rate on English dev (`runs` as `run_once` returns them); mean
  / std of its seeds' scores."""
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
  """Markdown: each rate's mean English dev score, the selected one marked."""
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

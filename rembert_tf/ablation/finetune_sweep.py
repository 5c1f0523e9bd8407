"""The paper's fine-tuning protocol for the suite, on the fine-tuning library.

Each (learning rate, seed) is one `finetuning_runner.run_finetuning` call in
its own directory with a completion marker, so a killed sweep redoes only the
interrupted run; selection and summary are `finetuning.sweep`'s.
"""
from typing import Any, Callable, Dict, List, Optional, Sequence

from rembert_tf.ablation import completion
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import finetuning_runner
from rembert_tf.finetuning import sweep

SUMMARY_FILE = "sweep.json"
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
  flat = finetuning_experiment.flat_overrides(overrides)
  for field in flat:
    if field in SET_PER_RUN:
      raise errors.UsageError(f"fine-tuning override {field}: the suite sets "
                              f"it for each run ({SET_PER_RUN[field]}).")
  finetuning_experiment.load_finetuning_config(
      params_override=flat, source="the suite's fine-tuning overrides")
  return flat


def run_directory(sweep_dir, learning_rate: float, seed: int) -> str:
  return fileio.join(sweep_dir, f"lr-{learning_rate:g}_seed-{seed}")


def run_settings(task: str, init_checkpoint: Optional[str],
                 learning_rate: float, seed: int, overrides: Dict[str, Any],
                 model_config: Optional[str] = None) -> Dict[str, Any]:
  """A run's fields (the data aside), stored in its completion marker and
  compared to skip a finished run."""
  return {**overrides, "data.task": task,
          "encoder.init_checkpoint": init_checkpoint and str(init_checkpoint),
          "encoder.model_config": None if init_checkpoint else str(model_config),
          "trainer.learning_rate": learning_rate, "trainer.seed": seed,
          "sweep.num_seeds": 1}


def run_one(task: str, run_dir: str, init_checkpoint: Optional[str],
            data: Dict[str, Any], learning_rate: float, seed: int,
            overrides: Optional[Dict[str, Any]] = None,
            say: Callable[[str], None] = print,
            model_config: Optional[str] = None) -> Dict:
  """One fine-tuning run, or its stored result when it finished with the same settings."""
  args = run_settings(task, init_checkpoint, learning_rate, seed,
                      dict(overrides or {}), model_config)
  done = completion.read_complete(run_dir)
  if done is not None and done.get("args") == args:
    say(f"[ablation] skip fine-tuning {run_dir}: finished earlier "
        f"(English dev {_pct(done['english_dev'])})")
    return done
  say(f"[ablation] fine-tuning {task}, learning rate {learning_rate:g}, seed "
      f"{seed} -> {run_dir}")
  config = finetuning_experiment.load_finetuning_config(
      params_override=dict(args, **data))
  results = finetuning_runner.run_finetuning(config, output_dir=str(run_dir),
                                             progress=say)
  # The run's own directory (`runs/lr-<lr>_seed-<s>/`) holds the fine-tuned
  # encoder as a checkpoint directory.
  finetuned = (results.get("runs") or [{}])[0].get("run_dir", str(run_dir))
  record = dict(task=task, learning_rate=learning_rate, seed=seed, args=args,
                run_dir=str(run_dir), finetuned_checkpoint=finetuned,
                score_split=results["score_split"],
                scores=results["scores"],
                english_dev=_english_dev(results, learning_rate))
  completion.mark_complete(run_dir, record)
  return record


def _pct(value) -> str:
  return "-" if value is None else f"{value:.1f}"


def _english_dev(results: Dict, learning_rate: float) -> Optional[float]:
  by_rate = results.get("english_dev_by_rate") or {}
  return by_rate.get(f"{learning_rate:g}", next(iter(by_rate.values()), None))


def summarize(task: str, records: List[Dict]) -> Dict:
  """The selected rate (`sweep.summarize_runs`) and the mean / std of its seeds."""
  score_split = records[0]["score_split"]
  summary = sweep.summarize_runs(
      [dict(learning_rate=r["learning_rate"], english_dev_metric=r["english_dev"],
            scores={score_split: r["scores"]}) for r in records], score_split)
  selected = summary["selected_learning_rate"]
  runs = [r for r in records if r["learning_rate"] == selected]
  return dict(task=task, selected_learning_rate=selected,
              english_dev_by_rate=summary["english_dev_by_rate"],
              score_split=score_split, num_seeds=len(runs),
              scores=summary["scores"], std=summary["std"],
              run_dirs=[r["run_dir"] for r in runs],
              seed_scores=[r["scores"] for r in runs],
              finetuned_checkpoints=[r["finetuned_checkpoint"] for r in runs])


def run_sweep(task: str, sweep_dir: str, init_checkpoint: Optional[str],
              data: Callable[[], Dict[str, Any]],
              learning_rates: Sequence[float], num_seeds: int,
              first_seed: int = 0,
              overrides: Optional[Dict[str, Any]] = None,
              say: Callable[[str], None] = print,
              on_run_done: Optional[Callable[[str, bool], None]] = None,
              keep_first_seed: bool = False,
              model_config: Optional[str] = None) -> Dict:
  """Every (rate, seed) run of one model on one task, then the summary.

  `data()` gives the data fields of the next run; `overrides` apply to every
  run; `on_run_done(run_dir, skipped)` is called after each; without
  `init_checkpoint` runs start from random weights (`model_config`). A
  finished sweep is not redone.
  """
  seeds = list(range(first_seed, first_seed + num_seeds))
  done = completion.read_complete(sweep_dir)
  if done is not None and done.get("learning_rates") == list(learning_rates) \
      and done.get("seeds") == seeds and "seed_scores" in done:
    say(f"[ablation] skip fine-tuning sweep {sweep_dir}: finished earlier")
    return done
  records = []
  for rate in learning_rates:
    for seed in seeds:
      run_dir = run_directory(sweep_dir, rate, seed)
      skipped = completion.read_complete(run_dir) is not None
      # The first seed of each rate keeps its fine-tuned weights (for the
      # layer similarity of whichever rate is selected).
      keep = ({"trainer.keep_checkpoints": True}
              if keep_first_seed and seed == seeds[0] else {})
      records.append(run_one(task, run_dir, init_checkpoint, data(), rate,
                             seed, dict(overrides or {}, **keep), say,
                             model_config))
      if on_run_done:
        on_run_done(run_dir, skipped)
  summary = dict(summarize(task, records), learning_rates=list(learning_rates),
                 seeds=seeds)
  fileio.write_json(fileio.join(sweep_dir, SUMMARY_FILE), summary)
  completion.mark_complete(sweep_dir, summary)
  return summary

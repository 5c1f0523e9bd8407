"""The paper's fine-tuning protocol, run through the fine-tuning command.

Each (learning rate, seed) is one invocation of `python -m rembert_tf.finetune`
(in-process, by its command-line flags) into its own directory, so a sweep
killed midway redoes only the run that was interrupted. The rate is then
chosen on the English dev score (mean over seeds), and the selected rate's
scores are reported as mean and sample standard deviation over seeds; the
summary has the shape of the command's own `results.json`.

Example:
```python
from rembert_tf.ablation import finetune_sweep
summary = finetune_sweep.run_sweep(
    "xnli", "/tmp/suite/models/coupled/finetune/xnli",
    init_checkpoint="/tmp/suite/models/coupled/pretrain",
    data_args=lambda: ["--data_dir", "download", "--seq_length", "64"],
    learning_rates=[1e-4, 3e-4], num_seeds=2)
summary["selected_learning_rate"], summary["scores"]["avg_metric"]
```
"""
import importlib
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from rembert_tf.ablation import completion
from rembert_tf.common import fileio

FINETUNE_MODULE = "rembert_tf.cli.finetune"
RESULTS_FILE = "results.json"        # written by the fine-tuning command
SUMMARY_FILE = "sweep.json"


def run_finetune_command(args: Sequence[str]) -> None:
  """Runs the fine-tuning command in this process with exactly `args`.

  absl flags are global: they are reset to their defaults before and after,
  so nothing leaks into this invocation or out of it.
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(FINETUNE_MODULE)
  argv = [FINETUNE_MODULE] + list(args)
  was_parsed = flags.FLAGS.is_parsed()
  flags.FLAGS.unparse_flags()
  flags.FLAGS(argv)
  try:
    module.main(argv)
  finally:
    flags.FLAGS.unparse_flags()
    if was_parsed:
      flags.FLAGS([FINETUNE_MODULE])


def run_directory(sweep_dir, learning_rate: float, seed: int) -> str:
  return fileio.join(sweep_dir, f"lr-{learning_rate:g}_seed-{seed}")


def run_one(task: str, run_dir: str, init_checkpoint: str,
            data_args: Sequence[str], learning_rate: float, seed: int,
            extra_args: Sequence[str] = (),
            say: Callable[[str], None] = print) -> Dict:
  """One fine-tuning run (or its stored result when it already finished with
  the same settings; the data flags may differ: the records are the same)."""
  args = ["--task", task, "--init_checkpoint", str(init_checkpoint),
          "--output_dir", str(run_dir), "--learning_rate", f"{learning_rate:g}",
          "--seed", str(seed), "--num_seeds", "1", *extra_args]
  done = completion.read_complete(run_dir)
  if done is not None and done.get("args") == args:
    say(f"[ablation] skip fine-tuning {run_dir}: finished earlier "
        f"(English dev {_pct(done['english_dev'])})")
    return done
  say(f"[ablation] fine-tuning {task}, learning rate {learning_rate:g}, seed "
      f"{seed} -> {run_dir}")
  run_finetune_command(args + list(data_args))
  results = fileio.read_json(fileio.join(run_dir, RESULTS_FILE))
  # The command's own run directory (`runs/lr-<lr>_seed-<s>/`) holds the
  # fine-tuned encoder as a checkpoint directory.
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


def _mean_and_std(values: List[float]):
  mean = float(np.mean(values))
  std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
  return mean, std


def _leafwise(runs: List[Dict]):
  """Mean / std over runs of every number in their official-shape scores."""
  mean, std = {}, {}
  for key, value in runs[0].items():
    if isinstance(value, dict):
      mean[key], std[key] = _leafwise([r[key] for r in runs])
    else:
      mean[key], std[key] = _mean_and_std([float(r[key]) for r in runs])
  return mean, std


def summarize(task: str, records: List[Dict]) -> Dict:
  """Selects the rate with the best mean English dev score; mean/std of its seeds."""
  by_rate: Dict[float, List[Dict]] = {}
  for record in records:
    by_rate.setdefault(record["learning_rate"], []).append(record)
  english_dev = {}
  for rate, runs in by_rate.items():
    values = [r["english_dev"] for r in runs if r["english_dev"] is not None]
    english_dev[rate] = float(np.mean(values)) if values else None
  selected = max(by_rate, key=lambda r: (english_dev[r] is not None,
                                         english_dev[r] or 0.0, -r))
  runs = by_rate[selected]
  scores, std = _leafwise([r["scores"] for r in runs])
  return dict(task=task, selected_learning_rate=selected,
              english_dev_by_rate={f"{k:g}": v for k, v in english_dev.items()},
              score_split=runs[0]["score_split"], num_seeds=len(runs),
              scores=scores, std=std, run_dirs=[r["run_dir"] for r in runs],
              finetuned_checkpoints=[r["finetuned_checkpoint"] for r in runs])


def run_sweep(task: str, sweep_dir: str, init_checkpoint: str,
              data_args: Callable[[], Sequence[str]],
              learning_rates: Sequence[float], num_seeds: int,
              first_seed: int = 0, extra_args: Sequence[str] = (),
              say: Callable[[str], None] = print,
              on_run_done: Optional[Callable[[str, bool], None]] = None,
              keep_first_seed: bool = False) -> Dict:
  """Every (rate, seed) run of one model on one task, then the summary.

  `data_args()` gives the data flags of the next run (`--records_dir ...` or
  `--data_dir ...`); `on_run_done(run_dir, skipped)` is called after each run.
  A sweep that finished with the same rates and seeds is not redone.
  """
  seeds = list(range(first_seed, first_seed + num_seeds))
  done = completion.read_complete(sweep_dir)
  if done is not None and done.get("learning_rates") == list(learning_rates) \
      and done.get("seeds") == seeds:
    say(f"[ablation] skip fine-tuning sweep {sweep_dir}: finished earlier")
    return done
  records = []
  for rate in learning_rates:
    for seed in seeds:
      run_dir = run_directory(sweep_dir, rate, seed)
      skipped = completion.read_complete(run_dir) is not None
      # The first seed of each rate keeps its fine-tuned weights (for the
      # layer similarity of whichever rate is selected).
      keep = ["--keep_checkpoints"] if keep_first_seed and seed == seeds[0] else []
      records.append(run_one(task, run_dir, init_checkpoint, data_args(), rate,
                             seed, list(extra_args) + keep, say))
      if on_run_done:
        on_run_done(run_dir, skipped)
  summary = dict(summarize(task, records), learning_rates=list(learning_rates),
                 seeds=seeds)
  fileio.write_json(fileio.join(sweep_dir, SUMMARY_FILE), summary)
  completion.mark_complete(sweep_dir, summary)
  return summary

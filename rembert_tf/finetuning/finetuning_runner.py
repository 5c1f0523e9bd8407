"""Fine-tunes a RemBERT encoder on an XTREME task and evaluates every language.

The steps of `run_finetuning`, each in its own module:
1. the records (`run_inputs`: given, or written from XTREME's `download/`;
   checked against the task and the checkpoint's SentencePiece model);
2. the training runtime (`rembert_tf.runtime`: precision, determinism, the
   SIGTERM stop flag, the tf.distribute strategy);
3. the encoder (`run_inputs.encoder_source`: a checkpoint, or random weights);
4. the sweep of learning rates x seeds (`sweep`: each run trains on English
   with Model Garden's `train_lib` / orbit loop (`training_loop`), predicts
   every language in the benchmark layout and scores it (`predictions`);
   finished runs are skipped, an interrupted one resumes);
5. the results (`sweep.summarize_runs`: the rate selected on English dev,
   mean / std over seeds), written as results.json and results.md.

With `deterministic` (op determinism, fixed seeds, checkpointed dropout
generators, replayed input stream) a killed and rerun sweep ends with the
results of an uninterrupted one. SIGTERM saves a checkpoint of the step reached
(after the current device call, about a second of steps) and raises
`runtime.preemption.TrainingPreempted`.

Output of `run_finetuning(...)` under `output_dir`:
```
runs/lr-<lr>_seed-<s>/predictions/<task>/{dev,test}-<lang>.{tsv,json}
runs/lr-<lr>_seed-<s>/scores.json      the official scorer's shape
runs/lr-<lr>_seed-<s>/run.json         the run's result (marks it finished)
runs/lr-<lr>_seed-<s>/run_config.json  what the run was started with
runs/lr-<lr>_seed-<s>/train/           TensorBoard summaries
results.json                           selected rate, mean / std over seeds
results.md                             markdown table (optionally vs the paper)
```

Example (the stable entry point; the demo and the ablation suite call it
with the fine-tuning experiment, `finetuning_experiment`):
<!-- snippet: not run: needs fine-tuning records and a checkpoint -->
```python
from rembert_tf.finetuning import finetuning_experiment, finetuning_runner
config = finetuning_experiment.load_finetuning_config(["xtreme_xnli"], {
    "data.records_dir": "records/xnli",
    "encoder.init_checkpoint": "pretrain_dir",
    "sweep.learning_rates": [1e-5, 2e-5], "sweep.num_seeds": 3})
results = finetuning_runner.run_finetuning(config, "ft/xnli")
print(results["markdown"])
```
"""
from typing import Dict, List

from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import run_inputs
from rembert_tf.finetuning import sweep
from rembert_tf.runtime import choices
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies


def _results_markdown(task: str, score_split: str, summary: Dict,
                      runs: List[Dict], output_dir: str,
                      compare_paper: bool) -> str:
  mean, std = summary["scores"], summary["std"]
  if mean is None:
    return (f"## {task}: no labelled {score_split} files; predictions are "
            f"under {fileio.join(output_dir, 'runs')}\n")
  num_seeds = summary["num_seeds"]
  redone = [f"- lr={run['learning_rate']:g} seed={run['seed']}: "
            f"{run['redone']}" for run in runs if run.get("redone")]
  return (f"## {task}: zero-shot {score_split} scores, learning rate "
          f"{summary['selected_learning_rate']:g}, mean over {num_seeds} "
          "seed(s)\n\n" +
          xtreme_scorer.format_markdown(
              {task: mean}, compare_paper=compare_paper,
              std={task: std} if num_seeds > 1 else None).rstrip("\n") +
          "\n\n### learning rate, selected on English dev\n\n" +
          sweep.selection_markdown(summary) + "\n" +
          ("\n### runs that predicted again\n\n" + "\n".join(redone) + "\n"
           if redone else ""))


def write_results(task: str, meta: Dict, runs: List[Dict], output_dir: str,
                  records_dir: str, compare_paper: bool, progress) -> Dict:
  """results.json and results.md: the selected rate, mean / std over its
  seeds, and the runs that predicted again after their records changed."""
  score_split = meta["score_split"]
  summary = sweep.summarize_runs(runs, score_split)
  results = dict(summary, task=task, score_split=score_split, runs=runs,
                 records_dir=records_dir)
  markdown = _results_markdown(task, score_split, summary, runs, output_dir,
                               compare_paper)
  results["markdown"] = markdown
  xtreme_scorer.write_json(results, fileio.join(output_dir, "results.json"))
  fileio.write_text(fileio.join(output_dir, "results.md"), markdown)
  progress(markdown)
  return results


def run_finetuning(config: finetuning_experiment.FinetuningExperimentConfig,
                   output_dir, progress=print,
                   distribution_strategy=None, overwrite: bool = False) -> Dict:
  """Fine-tunes on English, predicts every language, scores; returns results.

  `config`: the fine-tuning experiment (`load_finetuning_config`). Records:
  `data.records_dir` (rembert-create-finetuning-data's O/<task>), or written
  to output_dir/records from `data.data_dir` (XTREME download/) or TFDS
  (`data.data_source: tfds`) with `data.sentencepiece_model` (default: the
  checkpoint's). The rate is selected on English dev, mean / std over seeds
  reported (`sweep`); a rerun after a kill resumes where it stopped, a
  rerun with another rate or seed adds to the sweep, one with other inputs
  or settings is refused (`sweep`, `run_inputs.prepare_records`) unless
  `overwrite`, which first removes output_dir's runs and results.
  `distribution_strategy`: a strategy built by the caller (else
  `config.runtime`'s). Returns a dict: task, selected_learning_rate,
  english_dev_by_rate, num_seeds, score_split, scores (official shape, mean
  over seeds), std, runs, markdown.
  """
  output_dir = fileio.as_str(output_dir)
  finetuning_experiment.check_settings(config)
  data, encoder, runtime = config.data, config.encoder, config.runtime
  num_rates = len(config.sweep.learning_rates) or 1
  # Nothing was written before this point.
  with outputs.writing_shared_output(output_dir):
    earlier = sweep.earlier_runs(output_dir)
    records_dir = run_inputs.prepare_records(
        data.task, output_dir, data.records_dir, data.data_dir,
        data.sentencepiece_model, encoder.init_checkpoint, data.seq_length,
        data.languages, data.splits, progress, data.data_source,
        data.tfds_data_dir, data.allow_unlabelled_dev,
        holds_runs=bool(earlier) and not overwrite)
    if overwrite and earlier:  # records of the same inputs are the same
      _remove_runs(output_dir, progress)
    meta = run_inputs.checked_metadata(
        data.task, records_dir, encoder.init_checkpoint, data.splits,
        num_rates, data.allow_unlabelled_dev,
        data.allow_sentencepiece_mismatch, progress)
    finetuning_data.check_records_intact(meta, records_dir, data.splits)
    with process_settings.training_settings(
        runtime.mixed_precision_dtype, deterministic=config.trainer.deterministic,
        checkpointed_dropout_generators=True), \
        preemption.sigterm_stop_flag() as stop:
      strategy_obj = distribution_strategy or strategies.make_strategy(
          choices.strategy_name(runtime.distribution_strategy)
          or choices.DEFAULT_STRATEGY, runtime.tpu)
      trainer = _with_jit_compile(config.trainer, strategy_obj, progress)
      model_cfg, restore_encoder, source = run_inputs.encoder_source(
          encoder.init_checkpoint, encoder.model_config, meta, records_dir)
      progress(f"[finetune] {data.task}: encoder from {source}")
      context = sweep.SweepContext(  # its fields in order
          meta, records_dir, model_cfg, restore_encoder, strategy_obj,
          data.splits, encoder.init_checkpoint, progress, stop,
          runtime.mixed_precision_dtype)
      runs = sweep.run_sweep(context, output_dir, [
          trainer.replace(**overrides)
          for overrides in finetuning_experiment.run_overrides(config)])
    return write_results(data.task, meta, runs, output_dir, records_dir,
                         config.sweep.compare_paper, progress)


def _remove_runs(output_dir: str, progress) -> None:
  """--overwrite: output_dir's runs and results go (its records stay)."""
  progress(f"[finetune] --overwrite: the runs and results of {output_dir} "
           "are removed")
  for name in ("runs", "results.json", "results.md"):
    fileio.rmtree(fileio.join(output_dir, name))


def _with_jit_compile(config: finetuning_experiment.FinetuningConfig,
                      strategy, progress
                      ) -> finetuning_experiment.FinetuningConfig:
  """`config` with jit_compile decided: as given, else what is faster on the
  strategy's devices (`strategies.jit_compile_default`)."""
  if config.jit_compile is not None:
    on = bool(config.jit_compile)
    progress(f"[finetune] XLA {'on' if on else 'off'}: trainer.jit_compile="
             f"{str(on).lower()} in the experiment ({'--nojit_compile' if on else '--jit_compile'}"
             f" or trainer.jit_compile={str(not on).lower()} turns it "
             f"{'off' if on else 'on'})")
    return config
  on = strategies.jit_compile_default(strategy)
  progress("[finetune] XLA on: the default on a GPU or TPU (--nojit_compile "
           "turns it off)" if on else "[finetune] XLA off: the default on a "
           "CPU, where it is faster (--jit_compile turns it on)")
  return config.replace(jit_compile=on)

"""Fine-tunes a RemBERT encoder on an XTREME task and evaluates every language.

`run_finetuning` takes the records (given, or written under
`<output_dir>/records/` and reused: `data.finetuning_data.prepare_records`),
checks them, sets up the runtime (`rembert_tf.runtime`) and the encoder,
runs the sweep of learning rates x seeds (`sweep`: each run trains on
English on Model Garden's runner and predicts every language), and writes
results.json and results.md under `output_dir`, beside
`runs/lr-<lr>_seed-<s>/`. With `deterministic` a killed and rerun sweep ends
with the results of an uninterrupted one.

Example:
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
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import finetuning_data
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import sweep
from rembert_tf.modeling import rembert_config
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies

FinetuningError = finetuning_experiment.FinetuningError


def encoder_source(encoder: finetuning_experiment.FinetuningEncoderConfig,
                   meta: Dict, records_dir: str
                   ) -> Tuple[rembert_config.RemBertConfig,
                              Optional[Callable], str]:
  """(model config, restore_encoder(encoder) or None, description)."""
  if not encoder.init_checkpoint:
    if encoder.model_config is None:
      raise FinetuningError("Give --init_checkpoint, or --model_config to "
                            "fine-tune from random weights.")
    model_cfg = rembert_config.load_model_config(encoder.model_config)
    restore, source = None, "random initialisation (no --init_checkpoint)"
  else:
    model_cfg = checkpoint_restore.model_config_of(encoder.init_checkpoint,
                                                   encoder.model_config)
    restore = lambda model: checkpoint_restore.restore_encoder(  # pylint: disable=g-long-lambda
        model, encoder.init_checkpoint)
    source = checkpoint_layout.resolve(
        encoder.init_checkpoint).encoder_checkpoint
  if meta["seq_length"] > model_cfg.max_position_embeddings:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: "
        f"seq_length {meta['seq_length']} > the model's "
        f"max_position_embeddings {model_cfg.max_position_embeddings}; "
        "recreate the records with a smaller --seq_length.")
  return model_cfg, restore, source


def check_records_intact(meta: Dict, records_dir, splits: Sequence[str]
                         ) -> None:
  """Raises, naming the file and the fix, if a records file a run reads holds
  fewer records than metadata.json counts (a cut-short copy)."""
  needed = [("train", "en")] + [
      (split, lang) for split in splits
      for lang in sorted(meta["splits"].get(split, {}))]
  for split, lang in needed:
    info = meta["splits"][split][lang]
    path = fileio.join(records_dir, info["file"])
    try:  # counted in TensorFlow's reader: a second for 10^5 records
      count = int(tf.data.TFRecordDataset(path).reduce(
          tf.constant(0, tf.int64), lambda n, _: n + 1))
      found = f"it holds {count} records"
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
      count, found = None, " ".join(errors.one_line(e).split(";")[0].split())
    if count != info["num_features"]:
      raise finetuning_data.TaskDataError(
          f"{path}: cut short or damaged ({found}; "
          f"{finetuning_data.METADATA_FILE} counts {info['num_features']}); "
          "recreate the records: rembert-create-finetuning-data --overwrite "
          f"for a --records_dir, or remove {records_dir} and rerun to "
          "rebuild it from --data_dir.")


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
  """results.json and results.md: the selected rate and mean / std over its seeds."""
  score_split = meta["score_split"]
  summary = sweep.summarize_runs(runs, score_split)
  markdown = _results_markdown(task, score_split, summary, runs, output_dir,
                               compare_paper)
  results = dict(summary, task=task, score_split=score_split, runs=runs,
                 records_dir=records_dir, markdown=markdown)
  xtreme_scorer.write_json(results, fileio.join(output_dir, "results.json"))
  fileio.write_text(fileio.join(output_dir, "results.md"), markdown)
  progress(markdown)
  return results


def _sentencepiece_models(data, encoder) -> Tuple[Optional[str],
                                                  Optional[str]]:
  """(the checkpoint's SentencePiece model, the one records are made with);
  one line when records are to be made and there is no source or model."""
  checkpoint_sp = encoder.init_checkpoint and (
      checkpoint_layout.find_sentencepiece(encoder.init_checkpoint))
  sp_model = data.sentencepiece_model or checkpoint_sp
  if data.records_dir is None and data.data_dir is None and (
      data.data_source != "tfds"):
    raise FinetuningError(
        "Give records_dir / --records_dir (rembert-create-finetuning-data "
        "output), data_dir / --data_dir (XTREME download/), or --data_source "
        "tfds.")
  if data.records_dir is None and sp_model is None:
    raise FinetuningError(
        f"Give --sentencepiece_model: the init checkpoint "
        f"{encoder.init_checkpoint} has no "
        f"{checkpoint_layout.SENTENCEPIECE_FILE}.")
  return checkpoint_sp, sp_model


def run_finetuning(config: finetuning_experiment.FinetuningExperimentConfig,
                   output_dir, progress=print,
                   distribution_strategy=None, overwrite: bool = False) -> Dict:
  """Fine-tunes on English, predicts every language, scores; returns what
  results.json holds.

  A rerun after a kill resumes; one with another rate or seed adds to the
  sweep; one with other inputs or settings is refused unless `overwrite`
  (which first removes the runs and results). `distribution_strategy`: the
  caller's (else `config.runtime`'s).
  """
  output_dir = fileio.as_str(output_dir)
  finetuning_experiment.check_settings(config)
  data, encoder, runtime = config.data, config.encoder, config.runtime
  checkpoint_sp, sp_model = _sentencepiece_models(data, encoder)
  # Nothing was written before this point.
  with strategies.writing_shared_output(output_dir):
    earlier = sweep.earlier_runs(output_dir)
    records_dir = finetuning_data.prepare_records(
        data, output_dir, sp_model, encoder.init_checkpoint,
        holds_runs=bool(earlier) and not overwrite, progress=progress)
    if overwrite and earlier:  # records of the same inputs are the same
      progress(f"[finetune] --overwrite: the runs and results of {output_dir} "
               "are removed")
      for name in ("runs", "results.json", "results.md"):
        fileio.rmtree(fileio.join(output_dir, name))
    meta = finetuning_data.checked_metadata(
        data, records_dir, checkpoint_sp,
        len(config.sweep.learning_rates) or 1, progress)
    check_records_intact(meta, records_dir, data.splits)
    with process_settings.training_settings(
        runtime.mixed_precision_dtype, deterministic=config.trainer.deterministic,
        checkpointed_dropout_generators=True), \
        preemption.sigterm_stop_flag() as stop:
      strategy_obj = distribution_strategy or strategies.make_strategy(
          runtime.distribution_strategy, runtime.tpu)
      trainer = _with_jit_compile(config.trainer, strategy_obj, progress)
      model_cfg, restore_encoder, source = encoder_source(encoder, meta,
                                                          records_dir)
      progress(f"[finetune] {data.task}: encoder from {source}")
      context = sweep.SweepContext(  # its fields in order
          meta, records_dir, model_cfg, restore_encoder, strategy_obj,
          data.splits, encoder.init_checkpoint, progress, stop,
          runtime.mixed_precision_dtype)
      runs = sweep.run_sweep(context, output_dir, trainer,
                             finetuning_experiment.run_overrides(config))
    return write_results(data.task, meta, runs, output_dir, records_dir,
                         config.sweep.compare_paper, progress)


def _with_jit_compile(config: finetuning_experiment.FinetuningConfig,
                      strategy, progress
                      ) -> finetuning_experiment.FinetuningConfig:
  """`config` with jit_compile as given, else the strategy's faster default."""
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

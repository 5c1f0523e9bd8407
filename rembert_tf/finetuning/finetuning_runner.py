"""Fine-tunes a RemBERT encoder on an XTREME task and evaluates every language.

`run_finetuning` prepares the records (given, or written under
`<output_dir>/records/` from XTREME's `download/` or TFDS and reused while
their inputs are the same by content, checked against the checkpoint's
SentencePiece model), the runtime
(`rembert_tf.runtime`) and the encoder, runs the sweep of learning rates x
seeds (`sweep`: each run trains on English on Model Garden's `train_lib` /
orbit loop and predicts every language), and writes results.json and
results.md under `output_dir`, beside `runs/lr-<lr>_seed-<s>/`. With
`deterministic` a killed and rerun sweep ends with the results of an
uninterrupted one.

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

from absl import logging
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import tfds_reader
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.data import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import sweep
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.runtime import choices
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies


FinetuningError = finetuning_experiment.FinetuningError


# --- What a run starts from: the records and the encoder ---------------------


def checkpoint_sentencepiece(init_checkpoint) -> Optional[str]:
  """The SentencePiece model stored with a checkpoint, if any."""
  return init_checkpoint and checkpoint_layout.find_sentencepiece(
      init_checkpoint) or None


def prepare_records(task, output_dir, records_dir, data_dir, sp_model,
                    init_checkpoint, seq_length, languages, splits,
                    progress, data_source: str = "download",
                    tfds_data_dir=None,
                    allow_unlabelled_dev: bool = False,
                    holds_runs: bool = False) -> str:
  """The records directory: given, or written under output_dir/records/<task>
  (reused for the same inputs). `holds_runs`: output_dir holds runs trained
  on those records. An output_dir that is, holds or lies in an input is refused."""
  outputs.refuse_overlap(output_dir, {
      "--init_checkpoint": init_checkpoint, "--records_dir": records_dir,
      "--data_dir": data_dir, "--tfds_data_dir": tfds_data_dir,
      "--sentencepiece_model": sp_model}, "--output_dir")
  if records_dir is not None:
    return fileio.as_str(records_dir)
  if data_source == "tfds":
    tfds_data_dir = root = tfds_reader.data_dir_or_default(tfds_data_dir)
  else:
    root = data_dir
  if root is None:
    raise FinetuningError("Give records_dir / --records_dir "
                          "(rembert-create-finetuning-data output), "
                          "data_dir / --data_dir (XTREME download/), or "
                          "--data_source tfds.")
  if sp_model is None:
    sp_model = checkpoint_sentencepiece(init_checkpoint)
    if sp_model is None:
      raise FinetuningError(
          "Give --sentencepiece_model: the init checkpoint "
          f"{init_checkpoint} has no "
          f"{checkpoint_layout.SENTENCEPIECE_FILE}.")
  records_root = fileio.join(output_dir, "records")
  existing = fileio.join(records_root, task)
  identity = finetuning_data.records_identity(
      task, data_dir, sp_model, seq_length, languages=languages,
      splits=splits, data_source=data_source, tfds_data_dir=tfds_data_dir)
  if fileio.exists(fileio.join(existing, finetuning_data.METADATA_FILE)):
    changes = finetuning_data.records_changes(
        finetuning_data.read_metadata(existing), identity)
    if not changes:  # a rerun (after a kill, another rate) reuses them
      progress(f"[finetune] records of an earlier run reused: {existing}")
      return existing
    _check_records_change(output_dir, existing, changes, holds_runs, progress)
  finetuning_data.create_finetuning_data(
      task, data_dir, sp_model, records_root,
      seq_length=seq_length, languages=languages, splits=splits,
      overwrite=True, progress=progress, data_source=data_source,
      tfds_data_dir=tfds_data_dir, allow_unlabelled_dev=allow_unlabelled_dev)
  return existing


def _check_records_change(output_dir: str, existing: str, changes,
                          holds_runs: bool, progress) -> None:
  """Under finished runs, changed training records are refused; changed dev /
  test files are rebuilt with a note (the runs then predict them again)."""
  if not holds_runs:
    return
  said = "; ".join(f"{name} is {there} there, {now} now"
                   for name, there, now in changes)
  if any(name in finetuning_data.TRAINING_SETTINGS or name == "train-en"
         for name, _, _ in changes):
    raise FinetuningError(
        f"{output_dir}: its runs were trained on records made with other "
        f"settings or files ({said}). Pass --overwrite to start "
        f"{output_dir} again, or use another --output_dir.")
  progress(f"[finetune] note: {existing} is made again: its dev / test "
           f"files changed ({said}); the finished runs predict them again.")


def checked_metadata(task: str, records_dir: str, init_checkpoint, splits,
                     num_learning_rates: int, allow_unlabelled_dev: bool,
                     allow_sp_model_mismatch: bool, progress) -> Dict:
  """The records' metadata.json once every check passes (task, training records,
  labelled dev files, the checkpoint's SentencePiece model)."""
  meta = finetuning_data.read_metadata(records_dir)
  metadata = fileio.join(records_dir, finetuning_data.METADATA_FILE)
  if meta["task"] != task:
    raise FinetuningError(f"{metadata}: field task is {meta['task']!r}, not "
                          f"{task!r}; give the records of {task}.")
  train = meta["splits"].get("train", {}).get("en", {})
  if not train.get("num_features"):
    raise FinetuningError(
        f"{metadata}: the English training split "
        f"({train.get('source', 'train-en')}) has no record, so there is "
        "nothing to train on; fix the training file and recreate the records.")
  check_labels(meta, records_dir, splits, num_learning_rates,
               allow_unlabelled_dev)
  check_tokenizer(meta, records_dir, init_checkpoint, allow_sp_model_mismatch,
                  progress)
  return meta


def check_labels(meta: Dict, records_dir: str, splits, num_learning_rates: int,
                 allow_unlabelled_dev: bool) -> None:
  """Refuses dev files without labels unless `allow_unlabelled_dev` (a sweep of
  several rates then takes the smallest)."""
  if allow_unlabelled_dev or "dev" not in splits:
    return
  metadata = fileio.join(records_dir, finetuning_data.METADATA_FILE)
  for lang, info in sorted(meta["splits"].get("dev", {}).items()):
    if not info.get("has_labels") or not info.get("num_examples"):
      state = "no labels" if info.get("num_examples") else "no examples"
      raise FinetuningError(
          f"{metadata}: dev-{lang} has {state} (from {info.get('source')}), "
          "so it gets no dev score"
          + (" and the learning rate cannot be selected on it"
             if lang == "en" and num_learning_rates > 1 else "") +
          ". Recreate the records from a labelled dev file, leave dev out "
          "(--splits test), or pass --allow_unlabelled_dev.")


def check_tokenizer(meta: Dict, records_dir: str, init_checkpoint,
                    allow_mismatch: bool, progress) -> None:
  """Records must come from the checkpoint's SentencePiece model."""
  checkpoint_model = checkpoint_sentencepiece(init_checkpoint)
  records_hash = meta.get("sp_model_sha256")
  if checkpoint_model is None or not records_hash:
    return
  checkpoint_hash = fileio.sha256(checkpoint_model)
  if checkpoint_hash == records_hash:
    return
  message = (
      f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: the records "
      f"were made with the SentencePiece model {meta.get('sp_model', '?')} "
      f"(sp_model_sha256 {records_hash}), but the checkpoint was trained with "
      f"{checkpoint_model} (sha256 {checkpoint_hash}). Recreate the records "
      f"with --sentencepiece_model {checkpoint_model}")
  if not allow_mismatch:
    raise FinetuningError(message + ", or pass "
                          "--allow_sentencepiece_mismatch to "
                          "fine-tune anyway.")
  logging.warning("%s", message)
  progress(f"[finetune] WARNING: {message} "
           "(--allow_sentencepiece_mismatch given; "
           "going on).")


def encoder_source(init_checkpoint, model_config, meta, records_dir
                   ) -> Tuple[rembert_config.RemBertConfig,
                              Optional[Callable], str]:
  """(model config, restore_encoder(encoder) or None, description); reads only the config now."""
  if not init_checkpoint:
    if model_config is None:
      raise FinetuningError("Give --init_checkpoint, or --model_config to "
                            "fine-tune from random weights.")
    model_cfg = (model_config
                 if isinstance(model_config, rembert_config.RemBertConfig)
                 else rembert_config.load_model_config(model_config))
    restore, source = None, "random initialisation (no --init_checkpoint)"
  else:
    model_cfg = checkpoint_restore.model_config_of(init_checkpoint, model_config)
    restore = lambda encoder: checkpoint_restore.restore_encoder(  # pylint: disable=g-long-lambda
        encoder, init_checkpoint)
    source = checkpoint_layout.resolve(init_checkpoint).encoder_checkpoint
  if meta["seq_length"] > model_cfg.max_position_embeddings:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: "
        f"seq_length {meta['seq_length']} > the model's "
        f"max_position_embeddings {model_cfg.max_position_embeddings}; "
        "recreate the records with a smaller --seq_length.")
  return model_cfg, restore, source


# --- The sweep and its results -----------------------------------------------


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

  A rerun after a kill resumes; one with another rate or seed adds to the
  sweep; one with other inputs or settings is refused unless `overwrite`
  (which first removes the runs and results). `distribution_strategy`: a
  strategy built by the caller (else `config.runtime`'s). Returns a dict:
  task, selected_learning_rate, english_dev_by_rate, num_seeds, score_split,
  scores (mean over seeds), std, runs, markdown.
  """
  output_dir = fileio.as_str(output_dir)
  finetuning_experiment.check_settings(config)
  data, encoder, runtime = config.data, config.encoder, config.runtime
  num_rates = len(config.sweep.learning_rates) or 1
  # Nothing was written before this point.
  with outputs.writing_shared_output(output_dir):
    earlier = sweep.earlier_runs(output_dir)
    records_dir = prepare_records(
        data.task, output_dir, data.records_dir, data.data_dir,
        data.sentencepiece_model, encoder.init_checkpoint, data.seq_length,
        data.languages, data.splits, progress, data.data_source,
        data.tfds_data_dir, data.allow_unlabelled_dev,
        holds_runs=bool(earlier) and not overwrite)
    if overwrite and earlier:  # records of the same inputs are the same
      _remove_runs(output_dir, progress)
    meta = checked_metadata(
        data.task, records_dir, encoder.init_checkpoint, data.splits,
        num_rates, data.allow_unlabelled_dev,
        data.allow_sentencepiece_mismatch, progress)
    check_records_intact(meta, records_dir, data.splits)
    with process_settings.training_settings(
        runtime.mixed_precision_dtype, deterministic=config.trainer.deterministic,
        checkpointed_dropout_generators=True), \
        preemption.sigterm_stop_flag() as stop:
      strategy_obj = distribution_strategy or strategies.make_strategy(
          choices.strategy_name(runtime.distribution_strategy)
          or choices.DEFAULT_STRATEGY, runtime.tpu)
      trainer = _with_jit_compile(config.trainer, strategy_obj, progress)
      model_cfg, restore_encoder, source = encoder_source(
          encoder.init_checkpoint, encoder.model_config, meta, records_dir)
      progress(f"[finetune] {data.task}: encoder from {source}")
      context = sweep.SweepContext(  # its fields in order
          meta, records_dir, model_cfg, restore_encoder, strategy_obj,
          data.splits, encoder.init_checkpoint, progress, stop,
          runtime.mixed_precision_dtype)
      runs = sweep.run_sweep(context, output_dir, trainer,
                             finetuning_experiment.run_overrides(config))
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


def check_records_intact(meta: Dict, records_dir, splits: Sequence[str]) -> None:
  """Raises, naming the file and the fix, if a records file a run reads holds
  fewer records than metadata.json counts (a cut-short copy)."""
  needed = [("train", "en")] + [(split, lang) for split in splits
                                for lang in sorted(meta["splits"].get(split, {}))]
  for split, lang in needed:
    info = meta["splits"].get(split, {}).get(lang)
    if not info:
      continue
    path = fileio.join(records_dir, info.get("file", f"{split}-{lang}.tfrecord"))
    try:  # counted in TensorFlow's reader: a second for 10^5 records
      count = int(tf.data.TFRecordDataset(path).reduce(
          tf.constant(0, tf.int64), lambda n, _: n + 1))
      found = f"it holds {count} records"
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
      count, found = None, " ".join(errors.one_line(e).split(";")[0].split())
    if count == info["num_features"]:
      continue
    raise finetuning_data.TaskDataError(
        f"{path}: cut short or damaged ({found}; {finetuning_data.METADATA_FILE} counts "
        f"{info['num_features']}); recreate the records: "
        "rembert-create-finetuning-data --overwrite for a --records_dir, or "
        f"remove {records_dir} and rerun to rebuild it from --data_dir.")

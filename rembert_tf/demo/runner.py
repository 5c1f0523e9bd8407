r"""The main job end to end on the embedded demo (`bash run.sh demo`).

raw text -> SentencePiece -> TFRecords -> pre-train -> export -> fine-tune on
English -> evaluate every language, through the library entry points the
commands wrap, one function per step. A step whose output exists is skipped,
so an interrupted run resumes.

Example:
<!-- snippet: not run: runs the whole demo (minutes on a CPU); tests/demo runs it on tiny settings -->
```python
from rembert_tf.demo import runner
results = runner.run_demo("/tmp/demo_run", runner.DemoSettings(seed=1))
results["mlm_accuracy"], results["zero_shot"]["pretrained"]["es"]
```
"""
import dataclasses
import time
from typing import Any, Dict, Optional

from rembert_tf.common import fileio
from rembert_tf.demo import corpus as corpus_lib
from rembert_tf.demo import lexicon
from rembert_tf.demo import nli

DEMO_EXPERIMENT = "pretrain_tiny_demo"  # configs/experiments/pretrain_tiny_demo.yaml
# The pre-trained model must reach this multiple of the most-frequent-token
# baseline's held-out MLM accuracy for the demo to count as a success.
REQUIRED_MLM_RATIO = 2.0
# How the demo fine-tunes on English pairs, the same for both encoders.
FINETUNING = {"data.task": "xnli", "trainer.learning_rate": 5e-4,
              "trainer.num_train_epochs": 2.0, "trainer.train_batch_size": 32,
              "data.seq_length": 64, "data.splits": ["dev"]}


@dataclasses.dataclass(frozen=True)
class DemoSettings:
  """What a demo run does; the defaults are `bash run.sh demo`'s.

  Attributes:
    seed: seeds every step.
    train_steps: pre-training steps (None: the experiment's).
    corpus_megabytes, heldout_megabytes: sizes of the two corpora.
    num_workers: processes making the records.
    finetune: run the zero-shot step.
    random_init_baseline: also fine-tune a random encoder.
    xnli_train_pairs, xnli_dev_pairs: English training pairs, dev pairs per
      language.
    deterministic: the trainers' own determinism (same figures for a seed).
    params_override: fields of the pre-training experiment (a dict or
      rembert-train's --params_override text), before this run's.
  """
  seed: int = 0
  train_steps: Optional[int] = None
  corpus_megabytes: float = 3.0
  heldout_megabytes: float = 0.3
  num_workers: int = 2
  finetune: bool = True
  random_init_baseline: bool = True
  xnli_train_pairs: int = 4000
  xnli_dev_pairs: int = 300
  deterministic: bool = False
  params_override: Any = None


def _banner(text: str) -> None:
  print(f"\n=== {text} ===", flush=True)


def load_experiment(run_dir, settings: DemoSettings):
  """The demo experiment with this run's data paths, steps and seed."""
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  config = experiments.load_experiment_config([DEMO_EXPERIMENT],
                                              settings.params_override)
  steps = settings.train_steps or config.trainer.train_steps
  warmup = config.trainer.optimizer_config.warmup.linear.warmup_steps
  warmup_share = warmup / max(1, config.trainer.train_steps)
  config.override({
      "task": {"train_data": {
                   "input_path": fileio.join(run_dir, "records/train/*.tfrecord"),
                   "seed": config.task.train_data.seed + settings.seed},
               "validation_data": {
                   "input_path": fileio.join(run_dir, "records/eval/*.tfrecord")}},
      "trainer": {"train_steps": steps, "validation_interval": steps,
                  "checkpoint_interval": max(1, steps // 2),
                  "optimizer_config": {
                      "learning_rate": {"polynomial": {"decay_steps": steps}},
                      "warmup": {"linear": {
                          "warmup_steps": max(1, int(steps * warmup_share))}}}},
  }, is_strict=True)
  return config


def make_corpora(run_dir, settings: DemoSettings) -> Dict[str, str]:
  """Step 1: the training corpus and a held-out corpus (another seed)."""
  paths = {"train": fileio.join(run_dir, "corpus"),
           "heldout": fileio.join(run_dir, "corpus_heldout")}
  if not fileio.exists(paths["train"]):
    corpus_lib.generate_corpus(paths["train"],
                               target_megabytes=settings.corpus_megabytes,
                               seed=settings.seed, verbose=True)
  if not fileio.exists(paths["heldout"]):
    corpus_lib.generate_corpus(paths["heldout"],
                               target_megabytes=settings.heldout_megabytes,
                               seed=settings.seed + 10_000,
                               files_per_language=1, verbose=True)
  return paths


def train_vocabulary(run_dir, corpus_dir: str, vocab_size: int,
                     seed: int) -> str:
  """Step 2: a SentencePiece model of the model's vocabulary size."""
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  sp_dir = fileio.join(run_dir, "sentencepiece")
  sp_model = fileio.join(sp_dir, "sentencepiece.model")
  if not fileio.exists(sp_model):
    sentencepiece_training.train_sentencepiece(
        [fileio.join(corpus_dir, "{lang}", "*.txt")], sp_dir,
        vocab_size=vocab_size, sample_size=200_000, seed=seed)
  return sp_model


def make_records(run_dir, corpora: Dict[str, str], sp_model: str, experiment,
                 settings: DemoSettings) -> None:
  """Step 3: training records (unmasked for dynamic masking) and held-out records masked once."""
  from rembert_tf.data import pretraining_record_creation  # pylint: disable=g-import-not-at-top
  data = experiment.task.train_data
  for split, source, shards, unmasked in (
      ("train", corpora["train"], 8, data.use_dynamic_masking),
      ("eval", corpora["heldout"], 1, False)):
    out = fileio.join(run_dir, "records", split)
    if not fileio.exists(fileio.join(out, "metadata.json")):
      pretraining_record_creation.create_pretraining_data(
          [fileio.join(source, "{lang}", "*.txt")], out, sp_model,
          seq_length=data.seq_length,
          max_predictions_per_seq=data.max_predictions_per_seq,
          unmasked=unmasked, num_output_shards=shards,
          num_workers=settings.num_workers, seed=12345 + settings.seed,
          overwrite=True)


def pretrain(run_dir, experiment, settings: DemoSettings) -> Dict[str, Any]:
  """Step 4: pre-trains; returns held-out MLM accuracy and the baseline's."""
  from rembert_tf.evaluation import mlm_baseline  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import runner as pretraining_runner  # pylint: disable=g-import-not-at-top
  model_dir = fileio.join(run_dir, "pretrain")
  metrics = pretraining_runner.run(
      experiment, model_dir, mode="train_and_eval", strategy="one_device",
      deterministic=settings.deterministic,
      seed=settings.seed if settings.deterministic else None)
  if "eval_masked_lm_accuracy" not in metrics:
    # A run resumed after its last step trains nothing and evaluates nothing.
    metrics.update(pretraining_runner.run(experiment, model_dir, mode="eval",
                                          strategy="one_device"))
  baseline = mlm_baseline.most_frequent_token_baseline(
      experiment.task.validation_data, experiment.task.model.vocab_size,
      train_data_config=experiment.task.train_data)
  return {"model_dir": model_dir, "steps": int(metrics["global_step"]),
          "mlm_accuracy": float(metrics["eval_masked_lm_accuracy"]),
          "eval_loss": float(metrics["eval_loss"]),
          "baseline_accuracy": float(baseline["accuracy"]),
          "baseline_token_id": int(baseline["token_id"])}


def export(run_dir, model_dir: str, sp_model: str, experiment) -> Dict[str, str]:
  """Step 5: the encoder-only SavedModel and the preprocessing SavedModel."""
  from rembert_tf.export import encoder_export  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import preprocessor_export  # pylint: disable=g-import-not-at-top
  paths = {"encoder": fileio.join(run_dir, "export", "encoder"),
           "preprocessor": fileio.join(run_dir, "export", "preprocessor")}
  encoder_export.export_encoder(model_dir, paths["encoder"], sp_model=sp_model,
                                overwrite=True)
  preprocessor_export.export_preprocessor(
      sp_model, paths["preprocessor"],
      seq_length=experiment.task.train_data.seq_length,
      max_seq_length=experiment.task.model.max_position_embeddings,
      overwrite=True)
  return paths


def zero_shot(run_dir, model_dir: str, settings: DemoSettings
              ) -> Dict[str, Dict[str, float]]:
  """Step 6: English fine-tuning, dev accuracy (percent) in every language,
  beside the same fine-tuning from a randomly initialised encoder."""
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_experiment  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  work_dir = fileio.join(run_dir, "xnli")
  download = nli.write_xnli_files(
      fileio.join(work_dir, "download"), num_train=settings.xnli_train_pairs,
      num_dev=settings.xnli_dev_pairs, seed=settings.seed)

  def finetune(name: str, encoder: Dict[str, Any]) -> Dict[str, Any]:
    config = finetuning_experiment.load_finetuning_config(params_override={
        **FINETUNING, **encoder, "trainer.seed": settings.seed,
        "trainer.deterministic": settings.deterministic})
    results = finetuning_runner.run_finetuning(config, fileio.join(work_dir, name))
    table[name] = {lang: float(value)
                   for lang, value in results["scores"]["accuracy"].items()}
    return results

  table = {}
  pretrained = finetune("pretrained", {
      "encoder.init_checkpoint": fileio.as_str(model_dir),
      "data.data_dir": download})
  if settings.random_init_baseline:
    finetune("random_init", {
        "encoder.model_config": fileio.join(
            model_dir, checkpoint_layout.MODEL_CONFIG_FILE),
        "data.records_dir": pretrained["records_dir"]})
  return table


def zero_shot_table(table: Dict[str, Dict[str, float]]) -> str:
  """Markdown: accuracy per language, pre-trained vs random init vs chance."""
  chance = 100.0 / len(nli.NLI_LABELS)
  random_init = table.get("random_init", {})
  lines = ["| language | pre-trained | random init | chance |",
           "| --- | ---: | ---: | ---: |"]
  def row(name, pretrained, baseline):
    shown = f"{baseline:.1f}" if baseline is not None else "-"
    lines.append(f"| {name} | {pretrained:.1f} | {shown} | {chance:.1f} |")
  for lang in lexicon.LANGUAGES:
    if lang in table["pretrained"]:
      row(lang, table["pretrained"][lang], random_init.get(lang))
  others = [lang for lang in table["pretrained"] if lang != "en"]
  if others:
    mean = sum(table["pretrained"][lang] for lang in others) / len(others)
    baseline = (sum(random_init[lang] for lang in others) / len(others)
                if random_init else None)
    row("non-English mean", mean, baseline)
  return "\n".join(lines)


def summary(results: Dict[str, Any]) -> str:
  """The closing note: what was built where, the figures, what to try next."""
  run_dir = results["run_dir"]
  ratio = results["mlm_accuracy"] / max(results["baseline_accuracy"], 1e-9)
  lines = [
      f"run directory {run_dir} ({results['minutes']:.1f} minutes):",
      "  corpus/ corpus_heldout/   the demo corpus, 7 languages in 6 scripts",
      "  sentencepiece/            the vocabulary",
      "  records/train records/eval  pre-training records",
      f"  pretrain/                 the tiny decoupled model, {results['steps']} "
      "steps (a checkpoint directory)",
      "  export/encoder export/preprocessor  SavedModels (encoder only, text in)",
  ]
  if "zero_shot" in results:
    lines.append("  xnli/                     XNLI-like data, fine-tuning runs")
  lines += ["", f"held-out MLM accuracy {results['mlm_accuracy']:.3f} against "
            f"{results['baseline_accuracy']:.3f} for always predicting the most "
            f"frequent token ({ratio:.1f}x)"]
  if "zero_shot" in results:
    lines += ["", "XNLI-like dev accuracy (%), fine-tuned on English only:",
              zero_shot_table(results["zero_shot"])]
  # Only commands whose inputs this run wrote: without the zero-shot step
  # there is no xnli/download to fine-tune on.
  lines += ["", "next:", f"  tensorboard --logdir {run_dir}/pretrain"]
  if "zero_shot" in results:
    lines.append(f"  rembert-finetune --task xnli --data_dir "
                 f"{run_dir}/xnli/download --init_checkpoint {run_dir}/pretrain "
                 f"--output_dir {run_dir}/xnli/again --learning_rates 3e-4,5e-4 "
                 "--num_seeds 3")
  else:
    lines.append("  the same rembert-demo command without --nofinetune    "
                 "(skips the steps done, adds the zero-shot step)")
  lines.append("  rembert-demo --seed 1    (another corpus and model)")
  return "\n".join(lines)


def run_demo(run_dir, settings: DemoSettings = DemoSettings()) -> Dict[str, Any]:
  """Runs every step into `run_dir`; prints the summary; returns the figures."""
  started = time.time()
  fileio.makedirs(run_dir)
  results: Dict[str, Any] = {"run_dir": fileio.as_str(run_dir),
                             "seed": settings.seed}
  experiment = load_experiment(run_dir, settings)
  _banner("1/6 demo corpus")
  corpora = make_corpora(run_dir, settings)
  _banner("2/6 SentencePiece vocabulary")
  sp_model = train_vocabulary(run_dir, corpora["train"],
                              experiment.task.model.vocab_size, settings.seed)
  _banner("3/6 pre-training records")
  make_records(run_dir, corpora, sp_model, experiment, settings)
  _banner(f"4/6 pre-training the tiny decoupled model "
          f"({experiment.trainer.train_steps} steps)")
  results.update(pretrain(run_dir, experiment, settings))
  _banner("5/6 export: encoder-only SavedModel + preprocessor")
  results["export"] = export(run_dir, results["model_dir"], sp_model, experiment)
  if settings.finetune:
    _banner("6/6 fine-tune on English XNLI-like pairs, zero-shot on the rest")
    results["zero_shot"] = zero_shot(run_dir, results["model_dir"], settings)
  results["minutes"] = (time.time() - started) / 60
  _banner("summary")
  print(summary(results), flush=True)
  fileio.write_json(fileio.join(run_dir, "demo_results.json"), results)
  return results

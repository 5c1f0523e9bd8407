r"""The main job end to end on the embedded demo (`bash run.sh demo`).

raw text -> SentencePiece -> TFRecords -> pre-train -> export -> fine-tune ->
evaluate, through the library entry points the commands wrap, one function
per step: `make_corpora`, `train_vocabulary`, `make_records`, `pretrain`
(and the most-frequent-token baseline it must beat), `export`, `zero_shot`,
then `summary`. A step whose output exists is skipped, so an interrupted run
resumes.

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
from rembert_tf.demo import zero_shot as zero_shot_lib

DEMO_EXPERIMENT = "pretrain_tiny_demo"  # configs/experiments/pretrain_tiny_demo.yaml
# The pre-trained model must reach this multiple of the most-frequent-token
# baseline's held-out MLM accuracy for the demo to count as a success.
REQUIRED_MLM_RATIO = 2.0


@dataclasses.dataclass(frozen=True)
class DemoSettings:
  """What a demo run does; the defaults are `bash run.sh demo`'s.

  Attributes:
    seed: seeds every step.
    train_steps: pre-training steps (None: the experiment's).
    corpus_megabytes, heldout_megabytes: sizes of the two corpora.
    parallel_fraction, code_switched_fraction, switch_probability: the
      corpus mix.
    num_workers: processes making the records.
    finetune: run the zero-shot step.
    random_init_baseline: also fine-tune a random encoder.
    recipe: the fine-tuning recipe.
    experiment: the pre-training experiment (a name or a YAML path).
    deterministic: the trainers' own determinism (same figures for a seed).
  """
  seed: int = 0
  train_steps: Optional[int] = None
  corpus_megabytes: float = 3.0
  heldout_megabytes: float = 0.3
  parallel_fraction: float = corpus_lib.PARALLEL_FRACTION
  code_switched_fraction: float = corpus_lib.CODE_SWITCHED_FRACTION
  switch_probability: float = corpus_lib.SWITCH_PROBABILITY
  num_workers: int = 2
  finetune: bool = True
  random_init_baseline: bool = True
  recipe: zero_shot_lib.FinetuneRecipe = zero_shot_lib.FinetuneRecipe()
  experiment: str = DEMO_EXPERIMENT
  deterministic: bool = False


def _banner(text: str) -> None:
  print(f"\n=== {text} ===", flush=True)


def load_experiment(run_dir, settings: DemoSettings):
  """The demo experiment with this run's data paths, steps and seed."""
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  base = experiments.load_experiment_config([settings.experiment])
  steps = settings.train_steps or base.trainer.train_steps
  warmup = base.trainer.optimizer_config.warmup.linear.warmup_steps
  warmup_share = warmup / max(1, base.trainer.train_steps)
  override = {
      "task": {"train_data": {
                   "input_path": fileio.join(run_dir, "records/train/*.tfrecord"),
                   "seed": base.task.train_data.seed + settings.seed},
               "validation_data": {
                   "input_path": fileio.join(run_dir, "records/eval/*.tfrecord")}},
      "trainer": {"train_steps": steps, "validation_interval": steps,
                  "checkpoint_interval": max(1, steps // 2),
                  "optimizer_config": {
                      "learning_rate": {"polynomial": {"decay_steps": steps}},
                      "warmup": {"linear": {
                          "warmup_steps": max(1, int(steps * warmup_share))}}}},
  }
  return experiments.load_experiment_config([settings.experiment], override)


def make_corpora(run_dir, settings: DemoSettings) -> Dict[str, str]:
  """Step 1: the training corpus and a held-out corpus (another seed)."""
  paths = {"train": fileio.join(run_dir, "corpus"),
           "heldout": fileio.join(run_dir, "corpus_heldout")}
  mix = dict(parallel_fraction=settings.parallel_fraction,
             code_switched_fraction=settings.code_switched_fraction,
             switch_probability=settings.switch_probability, verbose=True)
  if not fileio.exists(paths["train"]):
    corpus_lib.generate_corpus(paths["train"],
                               target_megabytes=settings.corpus_megabytes,
                               seed=settings.seed, **mix)
  if not fileio.exists(paths["heldout"]):
    corpus_lib.generate_corpus(paths["heldout"],
                               target_megabytes=settings.heldout_megabytes,
                               seed=settings.seed + 10_000,
                               files_per_language=1, **mix)
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


def pretrain(run_dir, experiment, settings: DemoSettings = DemoSettings()
             ) -> Dict[str, Any]:
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
  """Step 6: English fine-tuning, dev accuracy in every demo language."""
  return zero_shot_lib.zero_shot_accuracy(
      model_dir, fileio.join(run_dir, "xnli"), recipe=settings.recipe,
      random_init_baseline=settings.random_init_baseline, seed=settings.seed,
      deterministic=settings.deterministic)


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

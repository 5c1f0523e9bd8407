"""Fine-tunes a RemBERT encoder on an XTREME task and evaluates every language.

Builds on Model Garden:
* training: `official.core.train_lib.run_experiment` (orbit Controller +
  `base_trainer.Trainer`) on the `finetuning_task.FinetuningTask`: `steps_per_loop`
  steps per host round trip, TensorBoard summaries (`<run>/train`), a
  checkpoint every `checkpoint_interval` steps and resume from the newest;
* optimiser: `official.modeling.optimization` (AdamW with weight decay, linear
  warmup, linear decay to 0);
* strategies: `official.common.distribute_utils.get_distribution_strategy`;
* QA postprocessing: `official.nlp.data.squad_lib_sp.postprocess_output`.

What differs per task type (head, loss, metrics, record spec, prediction
writer) comes from `task_types.TASK_TYPES`. Zero-shot: train on English,
predict every language.

A sweep (learning rates x seeds) can be killed at any point and rerun with the
same command: a finished run (its `run.json` exists) is skipped, an
interrupted one resumes from its newest checkpoint, and with `deterministic`
(op determinism, fixed seeds, checkpointed dropout generators, replayed input
stream) the final results equal an uninterrupted sweep's. SIGTERM saves a
checkpoint at the end of the current loop and raises `FinetuningPreempted`.

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

Example (the stable entry point; the demo calls it):
```python
from rembert_tf.finetuning import finetuning_runner
results = finetuning_runner.run_finetuning(
    task="xnli", records_dir="records/xnli", init_checkpoint="pretrain_dir",
    output_dir="ft/xnli", learning_rates=[1e-5, 2e-5], num_seeds=3)
print(results["markdown"])
```
"""
import collections
import contextlib
import dataclasses
import json
import math
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras
from official.common import distribute_utils
from official.core import config_definitions as cfg
from official.core import train_lib
from official.core import train_utils
from official.modeling import hyperparams
from official.modeling import optimization

from rembert_tf.common import console
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import finetuning_task
from rembert_tf.finetuning import task_types
from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config

RUN_RESULT_FILE = "run.json"
RUN_CONFIG_FILE = "run_config.json"
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu",
              "default")
# Fields of a run's configuration that change its result.
_RESULT_FIELDS = ("learning_rate", "seed", "num_train_steps",
                  "warmup_proportion", "train_batch_size", "weight_decay_rate",
                  "deterministic")


class FinetuningError(errors.RemBertError, ValueError):
  """A fine-tuning run cannot start; the message names the cause and the fix."""


class FinetuningPreempted(errors.RemBertError):
  """SIGTERM arrived: a checkpoint was saved and the sweep stopped."""


@dataclasses.dataclass
class FinetuningConfig(hyperparams.Config):
  """Hyper-parameters of one fine-tuning run (paper: batch 32, swept rate)."""
  learning_rate: float = 2e-5
  num_train_epochs: float = 3.0
  num_train_steps: Optional[int] = None  # overrides epochs when set
  warmup_proportion: float = 0.1
  train_batch_size: int = 32
  eval_batch_size: int = 32
  weight_decay_rate: float = 0.01
  seed: int = 0
  steps_per_loop: int = 100
  checkpoint_interval: int = 1000
  jit_compile: bool = True
  deterministic: bool = False
  keep_checkpoints: bool = False
  freeze_input_embeddings: bool = False
  n_best_size: int = 20
  max_answer_length: int = 30


def make_strategy(name: str = "one_device", tpu: Optional[str] = None):
  """A tf.distribute strategy by flag name ("default": TF's default strategy)."""
  if name not in STRATEGIES:
    raise FinetuningError(f"--strategy {name!r}: expected one of "
                          f"{', '.join(STRATEGIES)}.")
  return distribute_utils.get_distribution_strategy(
      distribution_strategy="off" if name == "default" else name,
      num_gpus=len(tf.config.list_physical_devices("GPU")), tpu_address=tpu)


def set_mixed_precision(policy: Optional[str]):
  if policy in (None, "", "float32"):
    tf_keras.mixed_precision.set_global_policy("float32")
  elif policy == "mixed_bfloat16":
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  else:
    raise FinetuningError(f"--mixed_precision {policy!r}: use float32 or "
                          "mixed_bfloat16.")


# --- One run: configuration ---------------------------------------------------------


def num_train_steps(meta: Dict, config: FinetuningConfig) -> int:
  if config.num_train_steps:
    return config.num_train_steps
  num_features = meta["splits"]["train"]["en"]["num_features"]
  return max(1, math.ceil(num_features * config.num_train_epochs /
                          config.train_batch_size))


def _optimizer_config(config: FinetuningConfig, num_steps: int):
  return optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": config.weight_decay_rate, "epsilon": 1e-6,
          "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"]}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": config.learning_rate,
          "decay_steps": num_steps, "end_learning_rate": 0.0, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {
          "warmup_steps": int(config.warmup_proportion * num_steps)}}})


def experiment_config(meta: Dict, records_dir: str, model_config,
                      config: FinetuningConfig) -> cfg.ExperimentConfig:
  """The Model Garden experiment of one run (train mode only)."""
  steps = num_train_steps(meta, config)
  steps_per_loop = max(1, min(config.steps_per_loop, steps))
  train_file = meta["splits"]["train"]["en"]["file"]
  task = finetuning_task.FinetuningTaskConfig(
      model=model_config, task_type=meta["task_type"],
      num_labels=max(len(meta["labels"]), 1), jit_compile=config.jit_compile,
      freeze_input_embeddings=config.freeze_input_embeddings,
      train_data=finetuning_task.FinetuningDataConfig(
          input_path=fileio.join(records_dir, train_file),
          global_batch_size=config.train_batch_size,
          seq_length=meta["seq_length"], seed=config.seed, is_training=True))
  trainer = cfg.TrainerConfig(
      train_steps=steps, steps_per_loop=steps_per_loop,
      summary_interval=steps_per_loop,
      checkpoint_interval=max(1, config.checkpoint_interval), max_to_keep=2,
      optimizer_config=_optimizer_config(config, steps))
  return cfg.ExperimentConfig(task=task, trainer=trainer)


def _run_fingerprint(config: FinetuningConfig, steps: int, records_dir,
                     init_checkpoint) -> Dict[str, Any]:
  values = {k: getattr(config, k) for k in _RESULT_FIELDS}
  values["num_train_steps"] = steps
  values["records_dir"] = fileio.as_str(records_dir)
  # The records themselves (sequence length, tokenizer, files): their metadata.
  values["records_metadata_sha256"] = fileio.sha256(
      fileio.join(records_dir, finetuning_data.METADATA_FILE))
  values["init_checkpoint"] = fileio.as_str(init_checkpoint or "")
  return values


def _check_run_config(run_dir: str, fingerprint: Dict[str, Any]) -> None:
  """Refuses to resume or skip a run directory started with other settings."""
  path = fileio.join(run_dir, RUN_CONFIG_FILE)
  if not fileio.exists(path):
    fileio.write_text(path, json.dumps(fingerprint, indent=1) + "\n")
    return
  saved = fileio.read_json(path)
  diffs = [f"{k} is {saved.get(k)!r} there, {v!r} now"
           for k, v in fingerprint.items() if saved.get(k) != v]
  if diffs:
    raise FinetuningError(
        f"{path}: this run directory was started with other settings ("
        + "; ".join(diffs) + "). Use another --output_dir, or remove "
        f"{run_dir} to start that run again.")


# --- One run: training ------------------------------------------------------------


class LoopPrinter:
  """Train action: one console line per loop of `steps_per_loop` steps."""

  def __init__(self, label: str, global_step, total_steps: int,
               batch_size: int, print_fn: Callable[[str], None]):
    self._label = label
    self._global_step = global_step
    self._total_steps = total_steps
    self._batch_size = batch_size
    self._print = print_fn
    self._last = None

  def __call__(self, output):
    step = int(self._global_step.numpy())
    now = time.time()
    logs = {k: float(np.asarray(v)) for k, v in output.items()}
    speed = eta = None
    if self._last is not None and step > self._last[1]:
      seconds_per_step = (now - self._last[0]) / (step - self._last[1])
      speed = self._batch_size / seconds_per_step
      eta = max(self._total_steps - step, 0) * seconds_per_step
    self._last = (now, step)
    line = f"[finetune] {self._label}: " + console.loop_line(
        step, self._total_steps, loss=logs.get("training_loss"),
        accuracy=logs.get("accuracy"), examples_per_second=speed,
        learning_rate=logs.get("learning_rate"), eta_seconds=eta)
    self._print(line)
    logging.info(line)


class SaveOnSigterm:
  """Train action: once SIGTERM has arrived, saves at the end of the loop and stops.

  (Preemptible TPUs and batch schedulers send SIGTERM before killing a job.)
  """

  def __init__(self, stop: threading.Event, global_step, manager_fn):
    self._stop, self._global_step, self._manager_fn = stop, global_step, manager_fn

  def __call__(self, output):
    del output
    if not self._stop.is_set():
      return
    step = int(self._global_step.numpy())
    path = self._manager_fn().save(checkpoint_number=step, check_interval=False)
    raise FinetuningPreempted(
        f"SIGTERM received: saved {path} at step {step} and stopped; run the "
        "same command again to resume.")


@contextlib.contextmanager
def sigterm_flag():
  """An Event set by SIGTERM while the block runs (main thread only)."""
  stop = threading.Event()
  if threading.current_thread() is not threading.main_thread():
    yield stop
    return
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
  try:
    yield stop
  finally:
    signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def _checkpoint_step(path: str) -> int:
  return int(path.rsplit("-", 1)[1])


def train_run(meta, records_dir, run_dir, model_config, restore_encoder,
              config: FinetuningConfig, strategy, label: str, progress,
              stop: Optional[threading.Event] = None):
  """Trains (or resumes) one run in `run_dir`; returns (task, model)."""
  params = experiment_config(meta, records_dir, model_config, config)
  tf_keras.utils.set_random_seed(config.seed)
  task = finetuning_task.FinetuningTask(params.task, logging_dir=run_dir,
                                restore_encoder=restore_encoder)
  latest = tf.train.latest_checkpoint(run_dir)
  if latest is not None:
    task.initial_train_step = _checkpoint_step(latest)
    progress(f"[finetune] {label}: resuming from {latest} at step "
             f"{task.initial_train_step}/{params.trainer.train_steps}")
  with strategy.scope():
    trainer = train_utils.create_trainer(
        params, task, train=True, evaluate=False)
  printer = LoopPrinter(label, trainer.global_step, params.trainer.train_steps,
                        config.train_batch_size, progress)
  # OrbitExperimentRunner is what train_lib.run_experiment drives; called
  # directly, the run skips run_experiment's FLOP count (a graph profile).
  actions = [printer]
  runner_box = []
  if stop is not None:
    actions.append(SaveOnSigterm(stop, trainer.global_step,
                                 lambda: runner_box[0].checkpoint_manager))
  with console.orbit_logs_to_file():
    runner = train_lib.OrbitExperimentRunner(
        distribution_strategy=strategy, task=task, mode="train", params=params,
        model_dir=run_dir, trainer=trainer, train_actions=actions)
    runner_box.append(runner)
    with strategy.scope():
      runner.controller.train(steps=params.trainer.train_steps)
  return task, trainer.model


def remove_training_checkpoints(run_dir: str) -> None:
  """Drops a finished run's checkpoints (model + optimizer state)."""
  for path in fileio.glob(fileio.join(run_dir, "ckpt-*")):
    fileio.remove(path)
  index = fileio.join(run_dir, "checkpoint")
  if fileio.exists(index):
    fileio.remove(index)


# --- One run: predictions in the benchmark layout -----------------------------


class Predictor:
  """Model outputs per record, in record order (one traced step per run)."""

  def __init__(self, task: finetuning_task.FinetuningTask, model, strategy,
               eval_batch_size: int):
    self._task, self._strategy = task, strategy
    replicas = strategy.num_replicas_in_sync
    self._batch_size = max(eval_batch_size - eval_batch_size % replicas,
                           replicas)

    @tf.function
    def step(inputs):
      return strategy.run(task.predict_step, args=(inputs, model))
    self._step = step

  def predict(self, records_file: str, num_records: int,
              seq_length: int) -> Dict[str, np.ndarray]:
    data = finetuning_task.FinetuningDataConfig(
        input_path=records_file, global_batch_size=self._batch_size,
        seq_length=seq_length, is_training=False, num_records=num_records)
    dataset = self._strategy.distribute_datasets_from_function(
        lambda context: self._task.build_inputs(data, context))
    collected = collections.defaultdict(list)
    for inputs in dataset:
      for key, value in self._step(inputs).items():
        for local in self._strategy.experimental_local_results(value):
          collected[key].append(local.numpy())
    result = {k: np.concatenate(v) for k, v in collected.items()}
    keep = result["feature_index"] >= 0
    order = np.argsort(result["feature_index"][keep], kind="stable")
    return {k: v[keep][order] for k, v in result.items()}


def write_predictions(predictor: Predictor, meta: Dict, records_dir: str,
                      split: str, lang: str, pred_dir: str,
                      config: FinetuningConfig) -> str:
  """Predicts one split of one language; writes it in the benchmark layout."""
  task = meta["task"]
  info = meta["splits"][split][lang]
  name = f"{split}-{lang}"
  outputs = {}
  if info["num_features"]:
    outputs = predictor.predict(fileio.join(records_dir, info["file"]),
                                info["num_features"], meta["seq_length"])
  context = task_types.PredictionContext(
      records_dir=records_dir, name=name, info=info, labels=meta["labels"],
      n_best_size=config.n_best_size,
      max_answer_length=config.max_answer_length)
  text = (task_types.get(meta["task_type"]).prediction_text(context, outputs)
          if outputs else "")
  path = fileio.join(pred_dir, task,
                     f"{name}.{xtreme_scorer.file_extension(task)}")
  fileio.write_text(path, text)
  return path


def _english_dev_metric(meta: Dict, scores_by_split: Dict) -> Optional[float]:
  for split in ("dev", meta["score_split"]):
    if scores_by_split.get(split):
      score = xtreme_scorer.headline_score(meta["task"],
                                           scores_by_split[split], "en")
      if score is not None:
        return score
  return None


def predict_and_score(predictor, meta, records_dir, run_dir, config, splits
                      ) -> Dict:
  """Writes every split's predictions; scores the labelled ones."""
  pred_dir = fileio.join(run_dir, "predictions")
  scores_by_split = {}
  for split in splits:
    languages = meta["splits"].get(split, {})
    for lang in languages:
      write_predictions(predictor, meta, records_dir, split, lang, pred_dir,
                        config)
    labelled = [l for l, info in languages.items() if info.get("has_labels")]
    if labelled:
      scores_by_split[split] = xtreme_scorer.score_task(
          meta["task"], pred_dir, fileio.join(records_dir, "labels"),
          split=split, languages=labelled)
  xtreme_scorer.write_json(scores_by_split, fileio.join(run_dir, "scores.json"))
  return scores_by_split


# --- One run, and the sweep --------------------------------------------------------


def run_label(meta: Dict, config: FinetuningConfig) -> str:
  return f"{meta['task']} lr={config.learning_rate:g} seed={config.seed}"


def run_once(meta, records_dir, run_dir, model_config, restore_encoder,
             config: FinetuningConfig, strategy, splits=("dev", "test"),
             init_checkpoint=None, progress=print, stop=None) -> Dict:
  """Trains once (or resumes), writes every split's predictions, scores.

  A finished run (its run.json exists, same settings) is returned as it was.
  """
  records_dir, run_dir = fileio.as_str(records_dir), fileio.as_str(run_dir)
  label = run_label(meta, config)
  steps = num_train_steps(meta, config)
  fileio.makedirs(run_dir)
  _check_run_config(run_dir, _run_fingerprint(config, steps, records_dir,
                                               init_checkpoint))
  result_file = fileio.join(run_dir, RUN_RESULT_FILE)
  if fileio.exists(result_file):
    progress(f"[finetune] {label}: finished earlier, skipped ({result_file})")
    return fileio.read_json(result_file)
  task, model = train_run(meta, records_dir, run_dir, model_config,
                          restore_encoder, config, strategy, label, progress,
                          stop=stop)
  predictor = Predictor(task, model, strategy, config.eval_batch_size)
  scores_by_split = predict_and_score(predictor, meta, records_dir, run_dir,
                                      config, splits)
  result = {"learning_rate": config.learning_rate, "seed": config.seed,
            "num_train_steps": steps, "scores": scores_by_split,
            "english_dev_metric": _english_dev_metric(meta, scores_by_split),
            "run_dir": run_dir}
  xtreme_scorer.write_json(result, result_file)
  if not config.keep_checkpoints:
    remove_training_checkpoints(run_dir)
  return result


def _mean_and_std(task: str, runs: List[Dict], split: str):
  per_language = collections.defaultdict(lambda: collections.defaultdict(list))
  for run in runs:
    scores = run["scores"].get(split)
    if not scores:
      return None, None
    for metric, values in scores.items():
      if isinstance(values, dict):
        for lang, value in values.items():
          per_language[lang][metric].append(value)
  mean = xtreme_scorer.add_averages(task, {
      lang: {m: float(np.mean(v)) for m, v in metrics.items()}
      for lang, metrics in per_language.items()})
  std = {}
  for lang, metrics in per_language.items():
    for metric, values in metrics.items():
      std.setdefault(metric, {})[lang] = (
          float(np.std(values, ddof=1)) if len(values) > 1 else 0.0)
  # std of the per-run language averages
  for key in [k for k in mean if k.startswith("avg_")]:
    values = [run["scores"][split][key] for run in runs]
    std[key] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
  return mean, std


def summarize_runs(task: str, runs: List[Dict], score_split: str) -> Dict:
  """Picks the rate with the best mean English dev score; mean / std over seeds.

  `runs`: dicts with learning_rate, english_dev_metric and scores
  ({split: official-shape scores}). Standard deviations are over seeds
  (sample std, ddof=1; 0 for a single seed).
  """
  by_rate = collections.defaultdict(list)
  for run in runs:
    by_rate[run["learning_rate"]].append(run)
  english_dev = {}
  for rate, rate_runs in by_rate.items():
    values = [r["english_dev_metric"] for r in rate_runs
              if r["english_dev_metric"] is not None]
    english_dev[rate] = float(np.mean(values)) if values else None
  selected = max(by_rate, key=lambda r: (english_dev[r] is not None,
                                         english_dev[r] or 0.0))
  mean, std = _mean_and_std(task, by_rate[selected], score_split)
  return {"selected_learning_rate": selected,
          "english_dev_by_rate": {f"{k:g}": v for k, v in english_dev.items()},
          "scores": mean, "std": std}


def run_sweep(meta, records_dir, output_dir, model_config, restore_encoder,
              learning_rates: Sequence[float], num_seeds: int,
              base_config: FinetuningConfig, strategy, splits,
              init_checkpoint=None, progress=print, stop=None) -> List[Dict]:
  """Every (rate, seed) run in order; finished ones are skipped."""
  runs = []
  total = len(learning_rates) * num_seeds
  for learning_rate in learning_rates:
    for seed_index in range(num_seeds):
      config = base_config.replace(learning_rate=learning_rate,
                                   seed=base_config.seed + seed_index)
      run_dir = fileio.join(output_dir, "runs",
                            f"lr-{learning_rate:g}_seed-{config.seed}")
      progress(f"[finetune] run {len(runs) + 1}/{total}: "
               f"{run_label(meta, config)} in {run_dir}")
      runs.append(run_once(meta, records_dir, run_dir, model_config,
                           restore_encoder, config, strategy, splits=splits,
                           init_checkpoint=init_checkpoint, progress=progress,
                           stop=stop))
  return runs


# --- The whole fine-tuning command -----------------------------------------------


def prepare_records(task, output_dir, records_dir, data_dir, sp_model,
                    init_checkpoint, seq_length, languages, splits,
                    progress) -> str:
  """The records directory: given, or written from the XTREME download."""
  if records_dir is not None:
    return fileio.as_str(records_dir)
  if data_dir is None:
    raise FinetuningError("Give records_dir / --records_dir "
                          "(tools/create_finetuning_data.py output) or "
                          "data_dir / --data_dir (XTREME download/).")
  if sp_model is None:
    sp_model = checkpoint_sentencepiece(init_checkpoint)
    if sp_model is None:
      raise FinetuningError(
          f"Give --sp_model: the init checkpoint {init_checkpoint} has no "
          f"{checkpoints.SENTENCEPIECE_FILE}.")
  records_root = fileio.join(output_dir, "records")
  existing = fileio.join(records_root, task)
  if fileio.exists(fileio.join(existing, finetuning_data.METADATA_FILE)):
    # A rerun (e.g. after a kill) reuses the records it wrote before.
    meta = finetuning_data.read_metadata(existing)
    if (meta.get("sp_model_sha256") == fileio.sha256(sp_model)
        and meta.get("data_dir") == fileio.as_str(data_dir)
        and seq_length in (None, meta.get("seq_length"))):
      progress(f"[finetune] records of an earlier run reused: {existing}")
      return existing
  finetuning_data.create_finetuning_data(
      task, data_dir, sp_model, records_root, seq_length=seq_length,
      languages=languages, splits=splits, overwrite=True, progress=progress)
  return existing


def checkpoint_sentencepiece(init_checkpoint) -> Optional[str]:
  """The SentencePiece model stored with a checkpoint, if any."""
  if not init_checkpoint:
    return None
  return checkpoints.find_sentencepiece(init_checkpoint)


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
      f"with --sp_model {checkpoint_model}")
  if not allow_mismatch:
    raise FinetuningError(message + ", or pass --allow_sp_model_mismatch to "
                          "fine-tune anyway.")
  logging.warning("%s", message)
  progress(f"[finetune] WARNING: {message} (--allow_sp_model_mismatch given; "
           "going on).")


def encoder_source(init_checkpoint, model_config, meta, records_dir):
  """(model config, restore_encoder(encoder) or None, description).

  Reads only the config now; the weights are read into each run's encoder
  by `modeling.checkpoints.restore_encoder` when the run starts fresh.
  """
  if not init_checkpoint:
    if model_config is None:
      raise FinetuningError("Give --init_checkpoint, or --model_config to "
                            "fine-tune from random weights.")
    model_cfg = (model_config
                 if isinstance(model_config, rembert_config.RemBertConfig)
                 else rembert_config.load_model_config(model_config))
    restore, source = None, "random initialisation (no --init_checkpoint)"
  else:
    model_cfg = checkpoints.model_config_of(init_checkpoint, model_config)
    restore = lambda encoder: checkpoints.restore_encoder(  # pylint: disable=g-long-lambda
        encoder, init_checkpoint)
    source = checkpoints.resolve(init_checkpoint).encoder_checkpoint
  if meta["seq_length"] > model_cfg.max_position_embeddings:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: "
        f"seq_length {meta['seq_length']} > the model's "
        f"max_position_embeddings {model_cfg.max_position_embeddings}; "
        "recreate the records with a smaller --seq_length.")
  return model_cfg, restore, source


def write_results(task, meta, runs, output_dir, num_seeds, records_dir,
                  compare_paper, progress) -> Dict:
  """results.json and results.md: the selected rate, mean / std over seeds."""
  score_split = meta["score_split"]
  summary = summarize_runs(task, runs, score_split)
  selected, mean, std = (summary["selected_learning_rate"], summary["scores"],
                         summary["std"])
  results = dict(summary, task=task, score_split=score_split,
                 num_seeds=num_seeds, runs=runs, records_dir=records_dir)
  if mean is not None:
    markdown = (f"## {task}: zero-shot {score_split} scores, learning rate "
                f"{selected:g}, mean over {num_seeds} seed(s)\n\n" +
                xtreme_scorer.format_markdown(
                    {task: mean}, compare_paper=compare_paper,
                    std={task: std} if num_seeds > 1 else None))
  else:
    markdown = (f"## {task}: no labelled {score_split} files; predictions are "
                f"under {fileio.join(output_dir, 'runs')}\n")
  results["markdown"] = markdown
  xtreme_scorer.write_json(results, fileio.join(output_dir, "results.json"))
  fileio.write_text(fileio.join(output_dir, "results.md"), markdown)
  progress(markdown)
  return results


@contextlib.contextmanager
def _process_settings(mixed_precision: Optional[str], deterministic: bool):
  """Precision policy and determinism for the sweep; restored afterwards."""
  from tensorflow.python.framework import config as tf_config  # pylint: disable=g-import-not-at-top
  previous_policy = tf_keras.mixed_precision.global_policy()
  previous_generator = (
      tf_keras.backend.experimental.is_tf_random_generator_enabled())
  previous_determinism = tf_config.is_op_determinism_enabled()
  set_mixed_precision(mixed_precision)
  if deterministic:
    tf.config.experimental.enable_op_determinism()
    # Dropout draws from checkpointed tf.random.Generators (see finetuning_task).
    tf_keras.backend.experimental.enable_tf_random_generator()
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous_policy)
    if not previous_generator:
      tf_keras.backend.experimental.disable_tf_random_generator()
    if not previous_determinism:
      tf_config.disable_op_determinism()


def run_finetuning(task: str,
                   output_dir,
                   init_checkpoint: Optional[str] = None,
                   records_dir=None,
                   data_dir=None,
                   sp_model=None,
                   model_config=None,
                   learning_rates: Sequence[float] = (2e-5,),
                   num_seeds: int = 1,
                   seed: int = 0,
                   num_train_epochs: float = 3.0,
                   num_train_steps: Optional[int] = None,
                   warmup_proportion: float = 0.1,
                   train_batch_size: int = 32,
                   eval_batch_size: int = 32,
                   seq_length: Optional[int] = None,
                   languages: Optional[Sequence[str]] = None,
                   splits: Sequence[str] = ("dev", "test"),
                   strategy: str = "one_device",
                   tpu: Optional[str] = None,
                   mixed_precision: Optional[str] = None,
                   distribution_strategy=None,
                   compare_paper: bool = False,
                   steps_per_loop: int = 100,
                   checkpoint_interval: int = 1000,
                   jit_compile: bool = True,
                   deterministic: bool = False,
                   keep_checkpoints: bool = False,
                   freeze_input_embeddings: bool = False,
                   allow_sp_model_mismatch: bool = False,
                   progress=print) -> Dict:
  """Fine-tunes on English, predicts every language, scores; returns results.

  Either `records_dir` (made by tools/create_finetuning_data.py, i.e. O/<task>)
  or `data_dir` (XTREME download/; records are then written to
  output_dir/records with `sp_model`, default init_checkpoint's
  sentencepiece.model). With several learning rates and/or seeds, the rate
  with the best mean English dev score is selected, and the mean and standard
  deviation over seeds are reported per language. Rerunning the same call
  after a kill skips finished runs and resumes the interrupted one.

  Returns a dict: task, selected_learning_rate, english_dev_by_rate,
  score_split, scores (official shape, mean over seeds), std, runs, markdown.
  """
  output_dir = fileio.as_str(output_dir)
  fileio.check_output_location(output_dir)
  records_dir = prepare_records(task, output_dir, records_dir, data_dir,
                                sp_model, init_checkpoint, seq_length,
                                languages, splits, progress)
  meta = finetuning_data.read_metadata(records_dir)
  if meta["task"] != task:
    raise FinetuningError(
        f"{fileio.join(records_dir, finetuning_data.METADATA_FILE)}: field "
        f"task is {meta['task']!r}, not {task!r}; give the records of {task}.")
  check_tokenizer(meta, records_dir, init_checkpoint, allow_sp_model_mismatch,
                  progress)
  base_config = FinetuningConfig(
      num_train_epochs=num_train_epochs, num_train_steps=num_train_steps,
      warmup_proportion=warmup_proportion, train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size, seed=seed,
      steps_per_loop=steps_per_loop, checkpoint_interval=checkpoint_interval,
      jit_compile=jit_compile, deterministic=deterministic,
      keep_checkpoints=keep_checkpoints,
      freeze_input_embeddings=freeze_input_embeddings)
  with _process_settings(mixed_precision, deterministic), sigterm_flag() as stop:
    strategy_obj = distribution_strategy or make_strategy(strategy, tpu)
    model_cfg, restore_encoder, source = encoder_source(
        init_checkpoint, model_config, meta, records_dir)
    progress(f"[finetune] {task}: encoder from {source}")
    runs = run_sweep(meta, records_dir, output_dir, model_cfg, restore_encoder,
                     learning_rates, num_seeds, base_config, strategy_obj,
                     splits, init_checkpoint=init_checkpoint,
                     progress=progress, stop=stop)
  return write_results(task, meta, runs, output_dir, num_seeds, records_dir,
                       compare_paper, progress)

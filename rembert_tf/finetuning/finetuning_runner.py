"""Fine-tunes a RemBERT encoder on an XTREME task and evaluates every language.

Builds on Model Garden:
* heads: `official.nlp.modeling.models.BertClassifier` (pooled output),
  `BertTokenClassifier` and `BertSpanLabeler`, on the RemBertEncoder (it
  returns the BertEncoderV2 output dict);
* optimiser: `official.modeling.optimization` (AdamW with weight decay, linear
  warmup, linear decay to 0);
* strategies: `official.common.distribute_utils.get_distribution_strategy`;
* QA postprocessing: `official.nlp.data.squad_lib_sp.postprocess_output`.

The gradient computation is jit-compiled (XLA) and every device-side shape is
static (drop_remainder batches; evaluation sets are padded with dummy records
to a batch multiple). Zero-shot: train on English, predict every language.

Output of `run_finetuning(...)` under `output_dir`:
```
runs/lr-<lr>_seed-<s>/predictions/<task>/{dev,test}-<lang>.{tsv,json}
runs/lr-<lr>_seed-<s>/scores.json      the official scorer's shape
results.json                           selected rate, mean / std over seeds
results.md                             markdown table (optionally vs the paper)
```

Example:
```python
from rembert_tf import finetuning
results = finetuning.run_finetuning(
    task="xnli", records_dir="records/xnli", init_checkpoint="pretrain_dir",
    output_dir="ft/xnli", learning_rates=[1e-5, 2e-5], num_seeds=3)
print(results["markdown"])
```
"""
import collections
import dataclasses
import json
import math
import pathlib
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras
from official.common import distribute_utils
from official.modeling import hyperparams
from official.modeling import optimization
from official.nlp.data import squad_lib_sp
from official.nlp.modeling import models

from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import init_checkpoint as init_checkpoint_lib
from rembert_tf.finetuning import tasks
from rembert_tf.modeling import checkpoints


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
  n_best_size: int = 20
  max_answer_length: int = 30


def get_strategy(strategy: str = "default", tpu: Optional[str] = None):
  """'default' (one device), 'mirrored', 'one_device' or 'tpu' (needs `tpu`)."""
  if strategy in (None, "", "default"):
    return tf.distribute.get_strategy()
  return distribute_utils.get_distribution_strategy(
      distribution_strategy=strategy, tpu_address=tpu,
      num_gpus=len(tf.config.list_physical_devices("GPU")))


def set_mixed_precision(policy: Optional[str]):
  if policy in (None, "", "float32"):
    tf_keras.mixed_precision.set_global_policy("float32")
  elif policy == "mixed_bfloat16":
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  else:
    raise ValueError(f"--mixed_precision {policy!r}: use float32 or "
                     "mixed_bfloat16 (TPU).")


# --- Model -------------------------------------------------------------------------


def build_task_model(task_type: str, encoder, num_labels: int,
                     dropout_rate: float, initializer_range: float):
  initializer = tf_keras.initializers.TruncatedNormal(stddev=initializer_range)
  if task_type == tasks.CLASSIFICATION:
    return models.BertClassifier(network=encoder, num_classes=num_labels,
                                 initializer=initializer,
                                 dropout_rate=dropout_rate)
  if task_type == tasks.TAGGING:
    return models.BertTokenClassifier(network=encoder, num_classes=num_labels,
                                      initializer=initializer,
                                      dropout_rate=dropout_rate)
  return models.BertSpanLabeler(network=encoder, initializer=initializer)


def _logits(task_type, outputs):
  if task_type == tasks.TAGGING:
    return tf.cast(outputs["logits"], tf.float32)
  if task_type == tasks.SPAN:
    start, end = outputs
    return tf.cast(start, tf.float32), tf.cast(end, tf.float32)
  return tf.cast(outputs, tf.float32)


def _loss(task_type, outputs, features, global_batch_size, num_replicas):
  logits = _logits(task_type, outputs)
  ce = tf_keras.losses.sparse_categorical_crossentropy
  if task_type == tasks.CLASSIFICATION:
    per_example = ce(features["label_id"][:, 0], logits, from_logits=True)
    return tf.reduce_sum(per_example) / global_batch_size
  if task_type == tasks.TAGGING:
    labels = features["label_ids"]
    weights = tf.cast(labels >= 0, tf.float32)
    per_token = ce(tf.maximum(labels, 0), logits, from_logits=True)
    return (tf.reduce_sum(per_token * weights) /
            tf.maximum(tf.reduce_sum(weights), 1.0) / num_replicas)
  start_logits, end_logits = logits
  loss = (ce(features["start_position"][:, 0], start_logits, from_logits=True) +
          ce(features["end_position"][:, 0], end_logits, from_logits=True)) / 2
  return tf.reduce_sum(loss) / global_batch_size


# --- Data --------------------------------------------------------------------------


def _parse_fn(task_type, seq_length):
  spec = finetuning_data.feature_spec(task_type, seq_length)

  def parse(record):
    parsed = tf.io.parse_single_example(record, spec)
    return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
  return parse


def _model_inputs(features):
  return {k: features[k] for k in ("input_word_ids", "input_mask",
                                   "input_type_ids")}


def train_dataset(path, task_type, seq_length, batch_size, seed):
  ds = tf.data.TFRecordDataset(str(path))
  ds = ds.map(_parse_fn(task_type, seq_length),
              num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.cache().shuffle(10000, seed=seed, reshuffle_each_iteration=True)
  ds = ds.repeat().batch(batch_size, drop_remainder=True)
  return ds.prefetch(tf.data.AUTOTUNE)


def eval_dataset(path, task_type, seq_length, batch_size, num_records):
  """Records padded with dummies (feature_index -1) to a batch multiple."""
  ds = tf.data.TFRecordDataset(str(path)).map(_parse_fn(task_type, seq_length))
  num_padding = (-num_records) % batch_size
  if num_padding:
    dummy = {k: tf.zeros(v.shape, tf.int32) for k, v in
             finetuning_data.feature_spec(task_type, seq_length).items()}
    dummy["feature_index"] = tf.constant([-1], tf.int32)
    ds = ds.concatenate(tf.data.Dataset.from_tensors(dummy).repeat(num_padding))
  return ds.batch(batch_size, drop_remainder=True)


# --- Training and prediction ----------------------------------------------------


def _build_optimizer(config: FinetuningConfig, num_steps: int):
  warmup_steps = int(config.warmup_proportion * num_steps)
  opt_config = optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": config.weight_decay_rate, "epsilon": 1e-6,
          "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"]}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": config.learning_rate,
          "decay_steps": num_steps, "end_learning_rate": 0.0, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {"warmup_steps": warmup_steps}}})
  factory = optimization.OptimizerFactory(opt_config)
  return factory.build_optimizer(factory.build_learning_rate())


class TaskRunner:
  """One model, trained once, then used to predict every split / language."""

  def __init__(self, meta: Dict, records_dir, init_checkpoint, config,
               strategy, model_config=None, progress=print):
    self.meta = meta
    self.records_dir = pathlib.Path(records_dir)
    self.task_type = meta["task_type"]
    self.seq_length = meta["seq_length"]
    self.config = config
    self.strategy = strategy
    self.progress = progress
    tf_keras.utils.set_random_seed(config.seed)
    with strategy.scope():
      cfg, encoder, source = init_checkpoint_lib.load_encoder(
          init_checkpoint, model_config)
      if self.seq_length > cfg.max_position_embeddings:
        raise ValueError(
            f"{self.records_dir}/metadata.json: seq_length {self.seq_length} > "
            f"the model's max_position_embeddings {cfg.max_position_embeddings}"
            "; recreate the records with a smaller --seq_length.")
      self.model = build_task_model(
          self.task_type, encoder, max(len(meta["labels"]), 1),
          cfg.hidden_dropout_prob, cfg.initializer_range)
    self.model_config = cfg
    progress(f"[finetune] {meta['task']}: encoder from {source}")

  def train(self):
    config, strategy = self.config, self.strategy
    train_info = self.meta["splits"]["train"]["en"]
    num_steps = config.num_train_steps or max(1, math.ceil(
        train_info["num_features"] * config.num_train_epochs /
        config.train_batch_size))
    with strategy.scope():
      optimizer = _build_optimizer(config, num_steps)
    dataset = train_dataset(self.records_dir / train_info["file"],
                            self.task_type, self.seq_length,
                            config.train_batch_size, config.seed)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    model, task_type = self.model, self.task_type
    global_batch = config.train_batch_size
    num_replicas = strategy.num_replicas_in_sync

    @tf.function(jit_compile=True)
    def compute_gradients(features):
      with tf.GradientTape() as tape:
        outputs = model(_model_inputs(features), training=True)
        loss = _loss(task_type, outputs, features, global_batch, num_replicas)
      return loss, tape.gradient(loss, model.trainable_variables)

    def replica_step(features):
      loss, grads = compute_gradients(features)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss

    @tf.function
    def train_loop(iterator, steps):
      loss = tf.constant(0.0)
      for _ in tf.range(steps):
        per_replica = strategy.run(replica_step, args=(next(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, None)
      return loss

    done, start = 0, time.time()
    while done < num_steps:
      steps = min(config.steps_per_loop, num_steps - done)
      loss = train_loop(iterator, tf.constant(steps))
      done += steps
      self.progress(f"[finetune] {self.meta['task']} lr={config.learning_rate:g}"
                    f" seed={config.seed}: step {done}/{num_steps} loss "
                    f"{float(loss):.4f} ({time.time() - start:.0f}s)")
    return num_steps

  def _predict_function(self):
    """The distributed prediction step, built (and traced) once per model."""
    if getattr(self, "_predict_fn", None) is not None:
      return self._predict_fn
    strategy, model, task_type = self.strategy, self.model, self.task_type
    # XLA on several local (CPU/GPU) replicas shares one compiled cluster
    # across replicas and trips over per-replica variables; TPU replicas
    # compile the whole step anyway. Shapes are static either way.
    jit = (strategy.num_replicas_in_sync == 1 or
           isinstance(strategy, tf.distribute.TPUStrategy))

    @tf.function(jit_compile=jit)
    def predict(features):
      logits = _logits(task_type, model(_model_inputs(features), training=False))
      if task_type == tasks.SPAN:
        return dict(start_logits=logits[0], end_logits=logits[1],
                    feature_index=features["feature_index"][:, 0])
      return dict(logits=logits, feature_index=features["feature_index"][:, 0])

    @tf.function
    def distributed_predict(features):
      return strategy.run(predict, args=(features,))

    self._predict_fn = distributed_predict
    return distributed_predict

  def predict_records(self, name: str, num_records: int) -> Dict[str, np.ndarray]:
    """Model outputs per record, in record order."""
    strategy = self.strategy
    if num_records == 0:
      keys = (("start_logits", "end_logits") if self.task_type == tasks.SPAN
              else ("logits",))
      return {k: np.zeros([0, self.seq_length]) for k in keys} | {
          "feature_index": np.zeros([0], np.int32)}
    replicas = strategy.num_replicas_in_sync
    batch = max(self.config.eval_batch_size - self.config.eval_batch_size %
                replicas, replicas)
    dataset = eval_dataset(self.records_dir / f"{name}.tfrecord",
                           self.task_type, self.seq_length, batch, num_records)
    distributed_predict = self._predict_function()
    collected = collections.defaultdict(list)
    for features in strategy.experimental_distribute_dataset(dataset):
      outputs = distributed_predict(features)
      for key, value in outputs.items():
        for local in strategy.experimental_local_results(value):
          collected[key].append(local.numpy())
    result = {k: np.concatenate(v) for k, v in collected.items()}
    keep = result["feature_index"] >= 0
    order = np.argsort(result["feature_index"][keep], kind="stable")
    return {k: v[keep][order] for k, v in result.items()}


# --- Writing predictions in the benchmark layout ----------------------------------


def write_predictions(runner: TaskRunner, split: str, lang: str, pred_dir) -> pathlib.Path:
  meta, records_dir = runner.meta, runner.records_dir
  task = meta["task"]
  info = meta["splits"][split][lang]
  name = f"{split}-{lang}"
  outputs = runner.predict_records(name, info["num_features"])
  out_dir = pathlib.Path(pred_dir) / task
  out_dir.mkdir(parents=True, exist_ok=True)
  ext = xtreme_scorer.file_extension(task)
  path = out_dir / f"{name}.{ext}"
  labels = meta["labels"]
  if meta["task_type"] == tasks.CLASSIFICATION:
    predicted = np.argmax(outputs["logits"], axis=-1)
    text = "".join(labels[i] + "\n" for i in predicted)
  elif meta["task_type"] == tasks.TAGGING:
    side = finetuning_data.read_side_file(records_dir, name)
    sentences = [["O"] * n for n in info["num_words"]]
    predicted = np.argmax(outputs["logits"], axis=-1)
    for row, record_tags in zip(side, predicted):
      for offset, position in enumerate(row["positions"]):
        sentences[row["sentence"]][row["word_start"] + offset] = labels[
            record_tags[position]]
    text = "".join("".join(t + "\n" for t in tags) + "\n" for tags in sentences)
  else:
    text = json.dumps(_span_answers(runner, records_dir, name, outputs),
                      ensure_ascii=False, indent=1) + "\n"
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_text(text, encoding="utf-8")
  tmp.replace(path)
  return path


def _span_answers(runner, records_dir, name, outputs) -> Dict[str, str]:
  side = finetuning_data.read_side_file(records_dir, name)
  example_rows = finetuning_data.read_side_file(records_dir, name, "examples")
  examples = [squad_lib_sp.SquadExample(qas_id=row["qas_id"], question_text="",
                                        paragraph_text=row["context"])
              for row in example_rows]
  features, results = [], []
  raw_result = collections.namedtuple("RawResult",
                                      ["unique_id", "start_logits", "end_logits"])
  for unique_id, row in enumerate(side):
    doc_offset = row["doc_offset"]
    features.append(squad_lib_sp.InputFeatures(
        unique_id=unique_id, example_index=row["example_index"],
        doc_span_index=None,
        tok_start_to_orig_index=row["tok_start_to_orig_index"],
        tok_end_to_orig_index=row["tok_end_to_orig_index"],
        token_is_max_context={doc_offset + i: v for i, v in
                              enumerate(row["token_is_max_context"])},
        # postprocess_output finds the context start after the first [SEP].
        tokens=["[CLS]"] + [""] * (doc_offset - 2) + ["[SEP]"],
        input_ids=None, input_mask=None, segment_ids=None, paragraph_len=None))
    results.append(raw_result(unique_id,
                              outputs["start_logits"][unique_id].tolist(),
                              outputs["end_logits"][unique_id].tolist()))
  predictions, _, _ = squad_lib_sp.postprocess_output(
      examples, features, results, n_best_size=runner.config.n_best_size,
      max_answer_length=runner.config.max_answer_length, do_lower_case=False)
  return dict(predictions)


# --- One run, and the sweep --------------------------------------------------------


def _english_dev_metric(meta: Dict, scores_by_split: Dict) -> Optional[float]:
  for split in ("dev", meta["score_split"]):
    scores = scores_by_split.get(split)
    if scores and "en" in next(iter(v for k, v in scores.items()
                                    if not k.startswith("avg"))):
      task = meta["task"]
      if task in xtreme_scorer.QA_TASKS:
        return (scores["exact_match"]["en"] + scores["f1"]["en"]) / 2
      if "f1" in scores:
        return scores["f1"]["en"]
      return scores["accuracy"]["en"]
  return None


def run_once(meta, records_dir, init_checkpoint, run_dir, config, strategy,
             model_config=None, splits=("dev", "test"), progress=print) -> Dict:
  """Trains once, writes every split's predictions, scores the labelled ones."""
  runner = TaskRunner(meta, records_dir, init_checkpoint, config, strategy,
                      model_config, progress)
  num_steps = runner.train()
  pred_dir = pathlib.Path(run_dir) / "predictions"
  task = meta["task"]
  scores_by_split = {}
  for split in splits:
    languages = meta["splits"].get(split, {})
    for lang in languages:
      write_predictions(runner, split, lang, pred_dir)
    labelled = [l for l, info in languages.items() if info.get("has_labels")]
    if labelled:
      scores_by_split[split] = xtreme_scorer.score_task(
          task, pred_dir, pathlib.Path(records_dir) / "labels", split=split,
          languages=labelled)
  xtreme_scorer.write_json(scores_by_split, pathlib.Path(run_dir) / "scores.json")
  return {"learning_rate": config.learning_rate, "seed": config.seed,
          "num_train_steps": num_steps, "scores": scores_by_split,
          "english_dev_metric": _english_dev_metric(meta, scores_by_split),
          "run_dir": str(run_dir)}


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
                   strategy: str = "default",
                   tpu: Optional[str] = None,
                   mixed_precision: Optional[str] = None,
                   distribution_strategy=None,
                   compare_paper: bool = False,
                   progress=print) -> Dict:
  """Fine-tunes on English, predicts every language, scores; returns results.

  Either `records_dir` (made by tools/create_finetuning_data.py, i.e. O/<task>)
  or `data_dir` (XTREME download/; records are then written to
  output_dir/records with `sp_model`, default init_checkpoint's
  sentencepiece.model). With several learning rates and/or seeds, the rate
  with the best mean English dev score is selected, and the mean and standard
  deviation over seeds are reported per language.

  Returns a dict: task, selected_learning_rate, english_dev_by_rate,
  score_split, scores (official shape, mean over seeds), std, runs, markdown.
  """
  output_dir = pathlib.Path(output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  if records_dir is None:
    if data_dir is None:
      raise ValueError("Give records_dir (tools/create_finetuning_data.py "
                       "output) or data_dir (XTREME download/).")
    if sp_model is None:
      if init_checkpoint and (pathlib.Path(init_checkpoint) /
                              checkpoints.SENTENCEPIECE_FILE).is_file():
        sp_model = pathlib.Path(init_checkpoint) / checkpoints.SENTENCEPIECE_FILE
      else:
        raise ValueError("Give sp_model / --sp_model: the init checkpoint has "
                         f"no {checkpoints.SENTENCEPIECE_FILE}.")
    finetuning_data.create_finetuning_data(
        task, data_dir, sp_model, output_dir / "records", seq_length=seq_length,
        languages=languages, splits=splits, overwrite=True, progress=progress)
    records_dir = output_dir / "records" / task
  records_dir = pathlib.Path(records_dir)
  meta = finetuning_data.read_metadata(records_dir)
  if meta["task"] != task:
    raise ValueError(f"{records_dir}/metadata.json is for task {meta['task']!r},"
                     f" not {task!r}.")
  previous_policy = tf_keras.mixed_precision.global_policy()
  set_mixed_precision(mixed_precision)
  try:
    strategy_obj = distribution_strategy or get_strategy(strategy, tpu)
    runs = []
    for learning_rate in learning_rates:
      for seed_index in range(num_seeds):
        config = FinetuningConfig(
            learning_rate=learning_rate, num_train_epochs=num_train_epochs,
            num_train_steps=num_train_steps,
            warmup_proportion=warmup_proportion,
            train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
            seed=seed + seed_index)
        run_dir = (output_dir / "runs" /
                   f"lr-{learning_rate:g}_seed-{config.seed}")
        runs.append(run_once(meta, records_dir, init_checkpoint, run_dir,
                             config, strategy_obj, model_config, splits=splits,
                             progress=progress))
  finally:
    tf_keras.mixed_precision.set_global_policy(previous_policy)
  summary = summarize_runs(task, runs, meta["score_split"])
  selected, mean, std = (summary["selected_learning_rate"], summary["scores"],
                         summary["std"])
  score_split = meta["score_split"]
  results = dict(summary, task=task, score_split=score_split,
                 num_seeds=num_seeds, runs=runs, records_dir=str(records_dir))
  if mean is not None:
    markdown = (f"## {task}: zero-shot {score_split} scores, learning rate "
                f"{selected:g}, mean over {num_seeds} seed(s)\n\n" +
                xtreme_scorer.format_markdown({task: mean},
                                              compare_paper=compare_paper,
                                              std={task: std} if num_seeds > 1 else None))
  else:
    markdown = (f"## {task}: no labelled {score_split} files; predictions are "
                f"under {output_dir / 'runs'}\n")
  results["markdown"] = markdown
  xtreme_scorer.write_json({k: v for k, v in results.items()},
                           output_dir / "results.json")
  tmp = output_dir / ".results.md.tmp"
  tmp.write_text(markdown, encoding="utf-8")
  tmp.replace(output_dir / "results.md")
  progress(markdown)
  return results

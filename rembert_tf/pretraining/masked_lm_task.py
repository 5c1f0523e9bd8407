"""The decoupled masked-LM pre-training Task (Model Garden `official.core`).

Like Model Garden's `official.nlp.tasks.masked_lm.MaskedLMTask` (its feature
and metric names), with what pre-training RemBERT under `tf.distribute`
needs: the loss averages over the *global* batch's real predictions (each
replica divides by the all-reduced weight total), softmax in float32;
forward and backward run in one `tf.function(jit_compile=True)`, then the
all-reduce, global-norm clipping of the all-reduced gradient and the update.
Model Garden's task cannot be the base: its metrics read the
`[batch, predictions, vocab]` logits, which the compiled step keeps on the
device. `input_path: synthetic` gives deterministic batches of the records'
shapes with a learnable signal (benchmarks and smoke tests without records).

Example:
```python
from official.core import task_factory
from rembert_tf.pretraining import experiments
config = experiments.load_experiment_config(
    ["pretrain_tiny_demo"],
    "task.train_data.input_path=synthetic")
task = task_factory.get_task(config.task)
model = task.build_model()                 # RemBertPretrainer, variables built
dataset = task.build_inputs(config.task.train_data)
```
"""
import dataclasses
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
import tf_keras
from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory

from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.modeling import losses
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_pretrainer

PretrainDataConfig = pretraining_input_pipeline.RemBertPretrainDataConfig

# Feature names the model consumes; the rest are labels.
MODEL_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids",
                    "masked_lm_positions")
SYNTHETIC_INPUT_PATH = "synthetic"
_MASK_ID = 4  # ids 0..4 are <pad> <unk> [CLS] [SEP] [MASK]


@dataclasses.dataclass
class RemBertPretrainTaskConfig(cfg.TaskConfig):
  """Decoupled MLM pre-training.

  Attributes:
    model: The RemBertConfig, read over `model_preset` (a preset of
      configs/models/ or a model YAML path) when one is named.
    jit_compile: Compile forward + backward with XLA.
    replay_data_on_resume: On resume, skip the batches already consumed (a
      deterministic pipeline then sees what an uninterrupted run sees); False
      (the TPU setting: replaying costs input time) reshuffles the stream
      with a seed of the step instead (`resumed_stream_seed`).
    init_checkpoint: A new run starts from a checkpoint directory's
      `pretrainer/ckpt-N` (encoder and output side) or `encoder/ckpt-N`, or
      a prefix of either; optimizer and step start fresh.
  """
  model: rembert_config.RemBertConfig = dataclasses.field(
      default_factory=rembert_config.RemBertConfig)
  model_preset: str = ""
  train_data: PretrainDataConfig = dataclasses.field(
      default_factory=lambda: PretrainDataConfig(is_training=True))
  validation_data: PretrainDataConfig = dataclasses.field(
      default_factory=lambda: PretrainDataConfig(is_training=False))
  jit_compile: bool = True
  replay_data_on_resume: bool = True


def resumed_stream_seed(base_seed: Optional[int], global_step: int) -> int:
  """The shuffle seed after a resume without replay: alike on every host,
  another for each resume."""
  base = 0 if base_seed is None else int(base_seed)
  return (base * 1_000_003 + int(global_step)) % (2**31 - 1)


def restore_init_checkpoint(pretrainer, source: str) -> str:
  """Reads `task.init_checkpoint` into a new run's pretrainer: encoder and
  output side when the source holds both (key `model`), else the encoder
  alone (key `encoder`). Returns the checkpoint prefix read."""
  source = str(source).rstrip("/")
  try:
    prefix, items = _init_checkpoint_items(pretrainer, source)
    try:
      tf.train.Checkpoint(**items).read(
          prefix).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      missing = re.findall(r"<tf\.Variable '([^']+)'", str(e))
      raise checkpoint_integrity.CheckpointError(
          f"{prefix}: its `{next(iter(items))}` does not match the model "
          "config (" + (f"not in the checkpoint: {', '.join(missing)}"
                        if missing else errors.one_line(e)[:300]) +
          "). Use the model config the checkpoint was written with.") from None
  except checkpoint_integrity.CheckpointError as e:
    raise checkpoint_integrity.CheckpointError(
        f"task.init_checkpoint: {e}") from None
  return prefix


def _init_checkpoint_items(pretrainer, source: str):
  """(prefix, {checkpoint key: object}) to read, from the newest checkpoint
  of pretrainer/, the source itself or encoder/."""
  if tf.io.gfile.exists(source + ".index"):
    why = checkpoint_integrity.problem(source)
    if why:
      raise checkpoint_integrity.CheckpointError(
          f"{source}: the checkpoint is not intact ({why}); copy it again "
          "from where it was written.")
    prefixes = [source]
  elif tf.io.gfile.isdir(source):
    say = lambda line: print(line, file=sys.stderr, flush=True)
    prefixes = (checkpoint_integrity.latest_checkpoint(
        os.path.join(source, folder), say) for folder in (
            checkpoint_integrity.PRETRAINER_SUBDIR, "",
            checkpoint_integrity.ENCODER_SUBDIR))
  else:
    raise checkpoint_integrity.CheckpointError(
        f"checkpoint {source} does not exist (neither a directory nor a "
        "checkpoint prefix with a .index file).")
  for prefix in filter(None, prefixes):
    try:
      roots = {"/".join(key.split("/")[:2]) for key in
               tf.compat.v1.train.NewCheckpointReader(
                   prefix).get_variable_to_shape_map()}
    except (ValueError, tf.errors.OpError) as e:
      raise checkpoint_integrity.CheckpointError(
          f"{prefix}: not a readable checkpoint ({errors.one_line(e)[:200]})."
      ) from None
    if "model/masked_lm" in roots:
      return prefix, dict(model=pretrainer)
    if any(root.startswith("encoder/") for root in roots):
      return prefix, dict(encoder=pretrainer.encoder)
  raise checkpoint_integrity.CheckpointError(
      f"{source}: holds neither a pretrainer (key `model`, with its MLM "
      "head) nor an encoder (key `encoder`). Start from a pre-training "
      "model_dir or a converted checkpoint directory.")


def records_sentencepiece(data_config
                          ) -> Tuple[Optional[str], Optional[str], Optional[str]]:
  """(sha256, metadata.json path, model path) of the SentencePiece model the
  records' metadata.json names, or Nones; the model path is an existing file
  of the recorded sha256 (if one is recorded)."""
  if data_config.input_path in ("", SYNTHETIC_INPUT_PATH):
    return None, None, None
  files = pretraining_input_pipeline.input_files(data_config.input_path)
  meta_path = files and fileio.join(fileio.dirname(files[0]), "metadata.json")
  if not meta_path or not fileio.exists(meta_path):
    return None, None, None
  meta = fileio.read_json(meta_path)
  tok = meta.get("tokenizer") if isinstance(meta.get("tokenizer"), dict) else {}
  recorded = meta.get("sentencepiece_sha256") or tok.get("sha256") or None
  # The data tool names the model under `tokenizer`; top level: other tools.
  for named in (meta.get("sentencepiece_model"),
                tok.get("sentencepiece_model")):
    if not isinstance(named, str):
      continue
    # Relative to where the data tool ran, or else to the records' folder.
    paths = [named]
    if not fileio.is_remote(named) and not os.path.isabs(named):
      paths.append(fileio.join(fileio.dirname(meta_path), named))
    for path in paths:
      if fileio.exists(path) and (recorded is None
                                  or fileio.sha256(path) == recorded):
        return recorded or fileio.sha256(path), meta_path, path
  return recorded, meta_path, None


def synthetic_example(index, seq_length: int, max_predictions: int,
                      vocab_size: int, seed: int):
  """One example: [CLS] w... [SEP] <pad>..., P masked positions; tokens of a
  small per-sequence "topic" vocabulary make the task learnable."""
  key = tf.stack([tf.constant(seed, tf.int32), tf.cast(index, tf.int32)])
  length = tf.random.stateless_uniform(
      [], key, minval=max(max_predictions + 3, seq_length // 2),
      maxval=seq_length + 1, dtype=tf.int32)
  topic = _MASK_ID + 1 + tf.cast(tf.floor(
      (vocab_size - _MASK_ID - 1) * tf.random.stateless_uniform([8], key + 1)
      ** 4), tf.int32)
  words = tf.gather(topic, tf.random.stateless_uniform(
      [seq_length], key + 2, minval=0, maxval=8, dtype=tf.int32))
  position = tf.range(seq_length)
  words = tf.where(position == 0, 2, words)               # [CLS]
  words = tf.where(position == length - 1, 3, words)      # [SEP]
  words = tf.where(position >= length, 0, words)          # <pad>
  # P distinct positions among 1 .. length-2; a random number of them real.
  scores = tf.where((position >= 1) & (position <= length - 2),
                    tf.random.stateless_uniform([seq_length], key + 3), -1.0)
  num_real = tf.random.stateless_uniform(
      [], key + 4, minval=1, maxval=max_predictions + 1, dtype=tf.int32)
  weights = tf.cast(tf.range(max_predictions) < num_real, tf.float32)
  positions = tf.where(weights > 0,
                       tf.math.top_k(scores, k=max_predictions).indices, 0)
  targets = tf.where(weights > 0, tf.gather(words, positions), 0)
  masked = tf.tensor_scatter_nd_update(
      words, positions[:, None],
      tf.where(weights > 0, _MASK_ID, tf.gather(words, positions)))
  return dict(input_word_ids=masked,
              input_mask=tf.cast(position < length, tf.int32),
              input_type_ids=tf.zeros([seq_length], tf.int32),
              masked_lm_positions=positions, masked_lm_ids=targets,
              masked_lm_weights=weights)


def synthetic_dataset(params, vocab_size: int, input_context=None,
                      num_examples: int = 4096) -> tf.data.Dataset:
  """Per-replica batches of synthetic examples (training data repeats)."""
  batch_size = params.global_batch_size
  indices = tf.data.Dataset.range(num_examples)
  if input_context:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
    indices = indices.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
  if params.is_training:
    indices = indices.repeat()
  seed = params.seed if params.seed is not None else 1234
  return indices.map(
      lambda i: synthetic_example(i, params.seq_length,
                                  params.max_predictions_per_seq, vocab_size,
                                  seed),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).batch(
          batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _sum_over_replicas(values):
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return values
  return ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)


def mlm_statistics(labels: Dict[str, tf.Tensor], mlm_logits: tf.Tensor
                   ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Per-prediction float32 cross-entropy, correctness and weights, [b, P]."""
  logits = tf.cast(mlm_logits, tf.float32)  # softmax in float32 (bf16 runs)
  ids = tf.cast(labels["masked_lm_ids"], tf.int32)
  weights = tf.cast(labels["masked_lm_weights"], tf.float32)
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=ids, logits=logits)
  correct = tf.cast(
      tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), ids),
      tf.float32)
  return cross_entropy, correct, weights


@task_factory.register_task_cls(RemBertPretrainTaskConfig)
class RemBertPretrainTask(base_task.Task):
  """Masked-LM pre-training of a RemBertPretrainer (decoupled or coupled)."""

  def __init__(self, params: RemBertPretrainTaskConfig, logging_dir=None,
               name=None):
    super().__init__(params, logging_dir=logging_dir, name=name)
    # Batches to skip at the start of the training stream (set on resume).
    self.initial_train_step = 0
    self._forward_backward_fn = tf.function(
        self._forward_backward, jit_compile=params.jit_compile,
        reduce_retracing=False)
    self._forward_fn = tf.function(
        self._forward, jit_compile=params.jit_compile)

  def build_model(self) -> rembert_pretrainer.RemBertPretrainer:
    self.task_config.model.validate()
    return rembert_pretrainer.build_pretrainer(self.task_config.model)

  def initialize(self, model):
    """Loads `task.init_checkpoint` (called only when model_dir has none)."""
    if self.task_config.init_checkpoint:
      restore_init_checkpoint(model, self.task_config.init_checkpoint)

  def build_inputs(self, params, input_context=None) -> tf.data.Dataset:
    """Per-replica batches, after a resume from the step reached (see
    `replay_data_on_resume`)."""
    field = ("task.validation_data" if params == self.task_config.validation_data
             else "task.train_data")
    resumed = params.is_training and self.initial_train_step > 0
    if resumed and not self.task_config.replay_data_on_resume:
      params = params.replace(
          seed=resumed_stream_seed(params.seed, self.initial_train_step))
    if params.input_path == SYNTHETIC_INPUT_PATH:
      dataset = synthetic_dataset(
          params, self.task_config.model.vocab_size, input_context)
    else:
      dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(
          params, model_config=self.task_config.model,
          field=field).load(input_context)
    if resumed and self.task_config.replay_data_on_resume:
      # Each step takes one per-replica batch per replica; a host's pipeline
      # feeds num_replicas / num_input_pipelines replicas.
      batches_per_step = 1
      if input_context is not None:
        batches_per_step = (input_context.num_replicas_in_sync //
                            max(input_context.num_input_pipelines, 1))
      dataset = dataset.skip(self.initial_train_step * batches_per_step)
    return dataset

  @classmethod
  def create_optimizer(cls, optimizer_config, runtime_config=None,
                       dp_config=None):
    """Model Garden's optimizer without its clipping, whose norm is
    `optimizer.rembert_clip_norm`: the optimizer would clip each replica's
    partial gradient, `train_step` clips the all-reduced one."""
    if dp_config is not None:
      raise ValueError("differential privacy is not supported by the RemBERT "
                       "pre-training task; remove task.differential_privacy_config.")
    optimizer_config = optimizer_config.replace()  # a copy
    opt_type = optimizer_config.optimizer.type
    opt_cfg = optimizer_config.optimizer.get()
    if getattr(opt_cfg, "clipnorm", None) or getattr(opt_cfg, "clipvalue", None):
      raise ValueError(
          f"trainer.optimizer_config.optimizer.{opt_type}: per-variable "
          "`clipnorm` / `clipvalue` are not supported; use `global_clipnorm` "
          "(or adamw's `gradient_clip_norm`).")
    clip_norm = 0.0
    for name, off in (("global_clipnorm", None), ("gradient_clip_norm", 0.0)):
      if getattr(opt_cfg, name, None):
        clip_norm = clip_norm or float(getattr(opt_cfg, name))
        setattr(opt_cfg, name, off)
    optimizer = super().create_optimizer(optimizer_config)
    optimizer.rembert_clip_norm = clip_norm
    return optimizer

  def build_metrics(self, training=None) -> List[tf_keras.metrics.Metric]:
    # Weighted means over every real prediction of the (global) batch.
    metrics = [tf_keras.metrics.Mean(name="masked_lm_accuracy"),
               tf_keras.metrics.Mean(name="lm_example_loss")]
    if training:
      metrics.append(tf_keras.metrics.Mean(name="gradient_norm"))
    return metrics

  def _update_metrics(self, metrics, cross_entropy, correct, weights,
                      gradient_norm=None):
    values = {"masked_lm_accuracy": (correct, weights),
              "lm_example_loss": (cross_entropy, weights),
              "gradient_norm": (gradient_norm, None)}
    for metric in metrics or []:
      value, weight = values.get(metric.name, (None, None))
      if value is not None:
        metric.update_state(value, sample_weight=weight)

  def build_losses(self, labels, model_outputs, aux_losses=None,
                   global_weight=None) -> tf.Tensor:
    """This replica's share of the global-batch mean MLM loss (float32)."""
    cross_entropy, _, weights = mlm_statistics(
        labels, model_outputs["mlm_logits"])
    return losses.global_batch_mean(cross_entropy, weights, global_weight,
                                    aux_losses)

  def _forward(self, model, inputs, global_weight, training=False):
    """(this replica's share of the loss, per-prediction statistics)."""
    outputs = model({k: inputs[k] for k in MODEL_INPUT_KEYS},
                    training=training)
    statistics = mlm_statistics(inputs, outputs["mlm_logits"])
    cross_entropy, _, weights = statistics
    return losses.global_batch_mean(
        cross_entropy, weights, global_weight,
        model.losses if training else None), statistics

  def _forward_backward(self, model, inputs, global_weight):
    """Forward + backward of one replica (compiled with XLA)."""
    with tf.GradientTape() as tape:
      loss, statistics = self._forward(model, inputs, global_weight,
                                       training=True)
    # None for variables the MLM loss does not reach (the encoder's pooler):
    # they get no update, in particular no weight decay.
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
             for g in grads]
    return grads, loss, statistics

  def compute_gradients(self, inputs, model):
    """(all-reduced gradients, None where the loss does not reach a variable;
    the loss; per-prediction statistics), in a replica context."""
    global_weight = _sum_over_replicas(tf.reduce_sum(
        tf.cast(inputs["masked_lm_weights"], tf.float32)))
    grads, loss, statistics = self._forward_backward_fn(model, inputs,
                                                         global_weight)
    grads = list(grads)
    connected = [i for i, g in enumerate(grads) if g is not None]
    summed, loss = _sum_over_replicas(([grads[i] for i in connected], loss))
    for i, g in zip(connected, summed):
      grads[i] = g
    return grads, loss, statistics

  def train_step(self, inputs, model: tf_keras.Model,
                 optimizer: tf_keras.optimizers.Optimizer, metrics=None):
    grads, loss, statistics = self.compute_gradients(inputs, model)
    grad_norm = tf.linalg.global_norm(grads)
    clip_norm = getattr(optimizer, "rembert_clip_norm", 0.0)
    if clip_norm and clip_norm > 0:
      grads, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=grad_norm)
    grads_and_vars = [(g, v) for g, v in zip(grads, model.trainable_variables)
                      if g is not None]
    # The gradients are already summed over replicas.
    if isinstance(optimizer, tf_keras.optimizers.legacy.Optimizer):
      optimizer.apply_gradients(grads_and_vars,
                                experimental_aggregate_gradients=False)
    else:
      optimizer.apply_gradients(grads_and_vars,
                                skip_gradients_aggregation=True)
    self._update_metrics(metrics, *statistics, gradient_norm=grad_norm)
    return {self.loss: loss}

  def validation_step(self, inputs, model: tf_keras.Model, metrics=None):
    global_weight = _sum_over_replicas(tf.reduce_sum(
        tf.cast(inputs["masked_lm_weights"], tf.float32)))
    loss, statistics = self._forward_fn(model, inputs, global_weight)
    self._update_metrics(metrics, *statistics)
    return {self.loss: _sum_over_replicas(loss)}

"""Fine-tuning's Model Garden Task (every task type), run by `train_lib`/orbit.

Builds on `official.core.base_task.Task`; the heads are Model Garden's
(`official.nlp.modeling.models`), and what differs per task type comes from
`task_types.TASK_TYPES`. Model Garden's `official.nlp.tasks` are not used:
they build encoders from `encoders.EncoderConfig`, which has no decoupled
RemBERT encoder. The loss is the mean over the *global* batch's real items
(each replica divides by the all-reduced weight), so the summed replica
gradients are the single-device gradient; a resumed run skips the batches
already consumed.

Example:
```python
from official.core import task_factory
from rembert_tf.finetuning import finetuning_task
from rembert_tf.modeling import rembert_config
config = finetuning_task.FinetuningTaskConfig(
    model=rembert_config.load_model_config("tiny"), task_type="tagging",
    num_labels=7, train_data=finetuning_task.FinetuningDataConfig(
        input_path="records/panx/train-en.tfrecord", seq_length=128))
task = task_factory.get_task(config)
model = task.build_model()
```
"""
import dataclasses
from typing import Callable, Dict, List, Optional

import tensorflow as tf
import tf_keras
from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory

from rembert_tf.data import xtreme_records
from rembert_tf.finetuning import task_types
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder


@dataclasses.dataclass
class FinetuningDataConfig(cfg.DataConfig):
  """One records file of a task (`<split>-<lang>.tfrecord`)."""
  input_path: str = ""
  global_batch_size: int = 32
  is_training: bool = True
  seq_length: int = 128
  shuffle_buffer_size: int = 10000
  seed: int = 0
  # Evaluation: the number of real records (the set is padded to a multiple
  # of the global batch with dummies, feature_index -1).
  num_records: int = 0


@dataclasses.dataclass
class FinetuningTaskConfig(cfg.TaskConfig):
  """Fine-tuning a RemBERT encoder (`model`) with a head of `task_type`."""
  model: rembert_config.RemBertConfig = dataclasses.field(
      default_factory=rembert_config.RemBertConfig)
  task_type: str = "classification"
  num_labels: int = 2  # classes (classification) or tags (tagging)
  train_data: FinetuningDataConfig = dataclasses.field(
      default_factory=FinetuningDataConfig)
  jit_compile: bool = True
  # Keep the input embeddings (word, position, type, their LayerNorm and
  # projection) pre-trained: zero-shot transfer from English.
  freeze_input_embeddings: bool = False


def _sum_over_replicas(values):
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return values
  return ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)


def init_random_generators(model: tf_keras.Model) -> None:
  """Creates the dropout layers' `tf.random.Generator` states now, as model
  variables, so checkpoints hold them and a resumed run draws the same masks."""
  for layer in model.submodules:
    generator = getattr(layer, "_random_generator", None)
    if generator is not None and hasattr(generator, "_maybe_init"):
      generator._maybe_init()  # pylint: disable=protected-access


@task_factory.register_task_cls(FinetuningTaskConfig)
class FinetuningTask(base_task.Task):
  """Fine-tunes an encoder plus a task head on one XTREME task."""

  def __init__(self, params: FinetuningTaskConfig, logging_dir=None, name=None,
               restore_encoder: Optional[Callable] = None):
    super().__init__(params, logging_dir=logging_dir, name=name)
    self.kind = task_types.get(params.task_type)
    # Training steps already done (set on resume): batches to skip.
    self.initial_train_step = 0
    # restore_encoder(encoder) loads the pre-trained weights; Model Garden
    # calls `initialize` only when the run directory has no checkpoint.
    self._restore_encoder = restore_encoder
    self._forward_backward_fn = tf.function(
        self._forward_backward, jit_compile=params.jit_compile,
        reduce_retracing=False)
    self._predict_fn = tf.function(
        lambda model, inputs: self.kind.logits(model(
            {k: inputs[k] for k in xtreme_records.MODEL_INPUT_KEYS},
            training=False)),
        jit_compile=params.jit_compile)

  def build_model(self) -> tf_keras.Model:
    """The task type's head over a RemBertEncoder (the last block computes
    only the positions the head reads; without XLA, padding is skipped)."""
    model_config = self.task_config.model
    encoder = rembert_encoder.build_encoder(
        model_config, output_range=self.kind.encoder_output_range,
        remove_padding=not self.task_config.jit_compile)
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=model_config.initializer_range)
    model = self.kind.build_head(encoder, max(self.task_config.num_labels, 1),
                                 model_config.hidden_dropout_prob, initializer)
    model.rembert_encoder = encoder
    if self.task_config.freeze_input_embeddings:
      for layer in encoder.input_embedding_layers():
        layer.trainable = False
    if tf_keras.backend.experimental.is_tf_random_generator_enabled():
      init_random_generators(model)
    return model

  def initialize(self, model: tf_keras.Model):
    """Loads the pre-trained encoder (only when the run has no checkpoint)."""
    if self._restore_encoder is not None:
      self._restore_encoder(model.rembert_encoder)

  def build_inputs(self, params: FinetuningDataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    """Per-replica batches of one records file (evaluation sets padded to whole steps)."""
    batch_size = params.global_batch_size
    num_pipelines, pipeline_id, replicas_per_pipeline = 1, 0, 1
    if input_context is not None:
      batch_size = input_context.get_per_replica_batch_size(batch_size)
      num_pipelines = input_context.num_input_pipelines
      pipeline_id = input_context.input_pipeline_id
      replicas_per_pipeline = max(
          input_context.num_replicas_in_sync // num_pipelines, 1)
    spec = xtreme_records.feature_spec(self.task_config.task_type,
                                       params.seq_length)
    dataset = tf.data.TFRecordDataset(params.input_path).shard(
        num_pipelines, pipeline_id).map(
            lambda record: {k: tf.cast(v, tf.int32) for k, v in
                            tf.io.parse_single_example(record, spec).items()},
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if params.is_training:
      dataset = dataset.cache().shuffle(
          params.shuffle_buffer_size, seed=params.seed,
          reshuffle_each_iteration=True).repeat()
      # Each step takes one batch per replica this pipeline feeds.
      return dataset.batch(batch_size, drop_remainder=True).skip(
          self.initial_train_step * replicas_per_pipeline).prefetch(
              tf.data.AUTOTUNE)
    # Every pipeline pads its share to whole steps of its replicas' batches.
    share = len(range(pipeline_id, params.num_records, num_pipelines))
    dummy = {k: tf.zeros(v.shape, tf.int32) for k, v in spec.items()}
    dummy["feature_index"] = tf.constant([-1], tf.int32)
    padding = tf.data.Dataset.from_tensors(dummy).repeat(
        (-share) % (batch_size * replicas_per_pipeline))
    return dataset.concatenate(padding).batch(batch_size, drop_remainder=True)

  def build_metrics(self, training=None) -> List[tf_keras.metrics.Metric]:
    # Weighted over every real item of the (global) batch.
    return [tf_keras.metrics.Mean(name="accuracy")]

  def _forward_backward(self, model, inputs, global_weight):
    """Forward + backward of one replica (compiled with XLA when jit_compile)."""
    features = {k: inputs[k] for k in xtreme_records.MODEL_INPUT_KEYS}
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      cross_entropy, correct, weights = self.kind.statistics(
          inputs, self.kind.logits(outputs))
      loss = tf.math.divide_no_nan(tf.reduce_sum(cross_entropy * weights),
                                   global_weight)
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
             for g in grads]
    return grads, loss, correct, weights

  def compute_gradients(self, inputs, model):
    """(grads, global-batch loss, correct, weights) in a replica context;
    summed over replicas (as the optimizer does), `grads` is the gradient of
    the global-batch mean loss."""
    global_weight = _sum_over_replicas(
        tf.reduce_sum(self.kind.item_weights(inputs)))
    grads, loss, correct, weights = self._forward_backward_fn(
        model, inputs, global_weight)
    return grads, _sum_over_replicas(loss), correct, weights

  def train_step(self, inputs, model: tf_keras.Model,
                 optimizer: tf_keras.optimizers.Optimizer, metrics=None):
    grads, loss, correct, weights = self.compute_gradients(inputs, model)
    # The optimizer sums the replicas' shares (its default all-reduce).
    optimizer.apply_gradients([
        (g, v) for g, v in zip(grads, model.trainable_variables)
        if g is not None])
    for metric in metrics or []:
      metric.update_state(correct, sample_weight=weights)
    return {self.loss: loss}

  def predict_step(self, inputs, model: tf_keras.Model) -> Dict[str, tf.Tensor]:
    """float32 logits of the type and each record's feature_index."""
    outputs = dict(self._predict_fn(model, inputs))
    outputs["feature_index"] = inputs["feature_index"][:, 0]
    return outputs

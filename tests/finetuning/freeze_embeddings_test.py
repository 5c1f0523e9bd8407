"""Fine-tuning with frozen input embeddings trains everything but them."""
import numpy as np
import tensorflow as tf

from rembert_tf.finetuning import finetuning_task

EMBEDDING_NAMES = ("word_embeddings", "position_embedding", "type_embeddings",
                   "embeddings/layer_norm", "embedding_projection")


def _is_embedding(variable):
  return any(name in variable.name for name in EMBEDDING_NAMES)


def _model(tiny_cfg, freeze):
  task = finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
      model=tiny_cfg, task_type="classification", num_labels=3,
      jit_compile=False, freeze_input_embeddings=freeze))
  model = task.build_model()
  batch = {"input_word_ids": tf.constant(np.arange(5, 21).reshape(2, 8), tf.int32),
           "input_mask": tf.ones([2, 8], tf.int32),
           "input_type_ids": tf.zeros([2, 8], tf.int32),
           "label_id": tf.constant([[0], [2]], tf.int32),
           "feature_index": tf.constant([[0], [1]], tf.int32)}
  model(batch, training=False)
  return task, model, batch


def test_frozen_input_embeddings_get_no_update(tiny_cfg):
  task, model, batch = _model(tiny_cfg, freeze=True)
  frozen = [v for v in model.variables if _is_embedding(v)]
  assert len(frozen) == 7  # word, position, type, LayerNorm (2), projection (2)
  assert not any(_is_embedding(v) for v in model.trainable_variables)
  before = [v.numpy() for v in model.variables]
  optimizer = tf.keras.optimizers.SGD(1.0)
  task.train_step(batch, model, optimizer, metrics=[])
  changed = {v.name: not np.array_equal(b, v.numpy())
             for b, v in zip(before, model.variables)}
  assert not any(changed[v.name] for v in frozen)
  assert changed[model.trainable_variables[-1].name]  # the classifier moved
  assert sum(changed.values()) == len(model.trainable_variables)


def test_input_embeddings_train_by_default(tiny_cfg):
  _, model, _ = _model(tiny_cfg, freeze=False)
  assert sum(_is_embedding(v) for v in model.trainable_variables) == 7

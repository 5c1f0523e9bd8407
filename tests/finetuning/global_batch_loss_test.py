"""Global-batch losses on 2 replicas equal the single-device gradient, and the
padded last prediction batch loses no record."""
import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.data import finetuning_data
from rembert_tf.finetuning import finetuning_task
from rembert_tf.finetuning import predictions
from rembert_tf.finetuning import task_types

SEQ = 8
BATCH = 4


def _task(tiny_cfg, task_type, num_labels=3):
  model_cfg = tiny_cfg.replace(hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0)
  return finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
      model=model_cfg, task_type=task_type, num_labels=num_labels,
      jit_compile=False))


def _batch(task_type):
  """4 examples; for tagging, replica 0 (rows 0-1) has 9 labelled tokens and
  replica 1 (rows 2-3) has 2, so per-replica means would weight them wrongly."""
  rng = np.random.RandomState(0)
  batch = {"input_word_ids": rng.randint(5, 200, [BATCH, SEQ]),
           "input_mask": np.ones([BATCH, SEQ]),
           "input_type_ids": np.zeros([BATCH, SEQ]),
           "feature_index": np.arange(BATCH)[:, None]}
  if task_type == "tagging":
    labels = np.full([BATCH, SEQ], -1)
    labels[0, 1:6] = [0, 1, 2, 0, 1]
    labels[1, 1:5] = [2, 2, 0, 1]
    labels[2, 3] = 1
    labels[3, 2] = 2
    batch["label_ids"] = labels
  else:
    batch["start_position"] = np.array([[1], [3], [0], [5]])
    batch["end_position"] = np.array([[2], [6], [0], [5]])
  return {k: tf.constant(v, tf.int32) for k, v in batch.items()}


@pytest.mark.parametrize("task_type", ["tagging", "span"])
def test_two_replica_gradient_equals_single_device(tiny_cfg, two_cpu_strategy,
                                                   task_type):
  task = _task(tiny_cfg, task_type)
  batch = _batch(task_type)
  single_model = task.build_model()
  single_model(batch, training=False)
  single_grads, single_loss, _, _ = task.compute_gradients(batch, single_model)

  with two_cpu_strategy.scope():
    model = task.build_model()
    model(batch, training=False)
  model.set_weights(single_model.get_weights())
  halves = [{k: v[:2] for k, v in batch.items()},
            {k: v[2:] for k, v in batch.items()}]
  per_replica = two_cpu_strategy.experimental_distribute_values_from_function(
      lambda ctx: halves[ctx.replica_id_in_sync_group])

  @tf.function
  def step(inputs):
    grads, loss, _, _ = task.compute_gradients(inputs, model)
    return [g for g in grads if g is not None], loss

  grads, loss = two_cpu_strategy.run(step, args=(per_replica,))
  summed = [sum(two_cpu_strategy.experimental_local_results(g)) for g in grads]
  local_losses = two_cpu_strategy.experimental_local_results(loss)
  np.testing.assert_allclose(local_losses[0], single_loss, rtol=1e-5)
  single = [g for g in single_grads if g is not None]
  assert len(single) == len(summed) > 10
  for a, b in zip(summed, single):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)
  if task_type == "tagging":  # the two halves really are weighted unequally
    weights = task_types.get("tagging").item_weights(batch).numpy()
    assert weights[:2].sum() == 9 and weights[2:].sum() == 2


def test_padded_prediction_keeps_every_record_in_order(
    tiny_cfg, two_cpu_strategy, xnli_records):
  """3 dev records (ar), global batch 4 on 2 replicas: 1 dummy pads the step."""
  meta = finetuning_data.read_metadata(xnli_records)
  info = meta["splits"]["dev"]["ar"]
  assert info["num_features"] % 4 != 0
  task = _task(tiny_cfg, "classification")
  with two_cpu_strategy.scope():
    model = task.build_model()
  predictor = predictions.Predictor(task, model, two_cpu_strategy,
                                    eval_batch_size=4)
  outputs = predictor.predict(str(xnli_records / info["file"]),
                              info["num_features"], meta["seq_length"])
  np.testing.assert_array_equal(outputs["feature_index"],
                                np.arange(info["num_features"]))
  assert outputs["logits"].shape == (info["num_features"], 3)

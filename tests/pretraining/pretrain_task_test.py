"""Tests of the pre-training Task, its step and the experiment configs."""
import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.core import task_factory

from rembert_tf.pretraining import experiments
from rembert_tf.runtime import experiment_files
from rembert_tf.pretraining import masked_lm_task

SEQ, PREDS = 16, 4
SMALL_MODEL = dict(num_hidden_layers=1, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0, vocab_size=300,
                   max_position_embeddings=32)


def make_config(batch_size=4, **task_overrides):
  override = {"task": {"model_preset": "tiny", "model": dict(SMALL_MODEL),
                       "train_data": {"input_path": "synthetic",
                                      "global_batch_size": batch_size,
                                      "seq_length": SEQ,
                                      "max_predictions_per_seq": PREDS}}}
  override["task"].update(task_overrides)
  override["trainer"] = {"optimizer_config": {
      "learning_rate": {"polynomial": {"initial_learning_rate": 1e-3,
                                       "decay_steps": 100}},
      "warmup": {"linear": {"warmup_steps": 4}}}}
  return experiments.load_experiment_config([], override)


def fixed_batch(batch_size=4, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, 300, size=(batch_size, SEQ)).astype(np.int32)
  positions = np.stack([rng.choice(np.arange(1, SEQ - 1), PREDS, replace=False)
                        for _ in range(batch_size)]).astype(np.int32)
  targets = np.take_along_axis(ids, positions, axis=1).astype(np.int32)
  # Unequal numbers of real predictions per example (and so per replica).
  weights = np.zeros([batch_size, PREDS], np.float32)
  real = [1, 4, 2, 1]
  for i in range(batch_size):
    weights[i, :real[i % len(real)]] = 1.0
  return dict(input_word_ids=ids, input_mask=np.ones_like(ids),
              input_type_ids=np.zeros_like(ids), masked_lm_positions=positions,
              masked_lm_ids=targets, masked_lm_weights=weights)


@pytest.fixture(scope="module")
def task_and_model():
  config = make_config()
  task = task_factory.get_task(config.task)
  return config, task, task.build_model()


def test_forward_backward_really_compiles_with_xla(task_and_model):
  config, task, model = task_and_model
  assert config.task.jit_compile
  batch = {k: tf.constant(v) for k, v in fixed_batch().items()}
  weight = tf.reduce_sum(batch["masked_lm_weights"])
  hlo = task._forward_backward_fn.experimental_get_compiler_ir(
      model, batch, weight)(stage="hlo")
  assert "ENTRY" in hlo and "dot(" in hlo
  # And the compiled step runs and trains.
  optimizer = task.create_optimizer(config.trainer.optimizer_config)
  step = tf.function(lambda b: task.train_step(b, model, optimizer)["loss"])
  before = [v.numpy().copy() for v in model.trainable_variables]
  loss = float(step(batch))   # warmup: the learning rate is 0 at step 0
  loss = float(step(batch))
  assert int(optimizer.iterations) == 2
  assert np.isfinite(loss) and loss > 0
  unchanged = [v.name for b, v in zip(before, model.trainable_variables)
               if np.array_equal(b, v.numpy())]
  # Only the pooler is untouched: MLM does not reach it (no decay either).
  assert unchanged and all("pooler" in n for n in unchanged), unchanged


def test_loss_is_mean_over_weighted_predictions(task_and_model):
  _, task, model = task_and_model
  batch = {k: tf.constant(v) for k, v in fixed_batch().items()}
  logits = model(batch, training=False)["mlm_logits"]
  loss = task.build_losses(batch, {"mlm_logits": logits})
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=batch["masked_lm_ids"], logits=logits).numpy()
  w = batch["masked_lm_weights"].numpy()
  np.testing.assert_allclose(float(loss), (ce * w).sum() / w.sum(), rtol=1e-5)


def test_mirrored_two_cpus_matches_single_device(two_cpu_strategy):
  config = make_config(batch_size=4)
  batch = fixed_batch(batch_size=4)
  tensors = {k: tf.constant(v) for k, v in batch.items()}

  task = task_factory.get_task(config.task)
  single = task.build_model()
  grads_1, loss_1, _ = task.compute_gradients(tensors, single)

  with two_cpu_strategy.scope():
    mirrored = task.build_model()
  for target, source in zip(mirrored.variables, single.variables):
    target.assign(source)
  dataset = tf.data.Dataset.from_tensor_slices(batch).batch(4)
  dist = two_cpu_strategy.experimental_distribute_dataset(dataset)
  per_replica = next(iter(dist))
  # The replicas see different numbers of real predictions.
  local_w = [float(tf.reduce_sum(x)) for x in
             two_cpu_strategy.experimental_local_results(
                 per_replica["masked_lm_weights"])]
  assert len(local_w) == 2 and local_w[0] != local_w[1]

  @tf.function
  def replica_grads(inputs):
    grads, loss, _ = task.compute_gradients(inputs, mirrored)
    return [g for g in grads if g is not None], loss

  grads_2, loss_2 = two_cpu_strategy.run(replica_grads, args=(per_replica,))
  for replica in range(2):
    loss = two_cpu_strategy.experimental_local_results(loss_2)[replica]
    np.testing.assert_allclose(float(loss), float(loss_1), rtol=1e-5)
    got = [two_cpu_strategy.experimental_local_results(g)[replica]
           for g in grads_2]
    want = [g for g in grads_1 if g is not None]
    assert len(got) == len(want)
    for g2, g1 in zip(got, want):
      np.testing.assert_allclose(g2.numpy(), g1.numpy(), rtol=2e-4, atol=1e-6)


def test_mixed_bfloat16_keeps_variables_loss_and_softmax_float32():
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    config = make_config()
    task = task_factory.get_task(config.task)
    model = task.build_model()
    assert all(v.dtype == tf.float32 for v in model.variables)
    batch = {k: tf.constant(v) for k, v in fixed_batch().items()}
    logits = model(batch, training=False)["mlm_logits"]
    assert logits.dtype == tf.bfloat16       # matmuls in bf16
    assert model.masked_lm.layer_norm.dtype == "float32"
    ce, _, _ = masked_lm_task.mlm_statistics(batch, logits)
    assert ce.dtype == tf.float32            # softmax cross-entropy in f32
    grads, loss, _ = task.compute_gradients(batch, model)
    assert loss.dtype == tf.float32
    assert all(g.dtype == tf.float32 for g in grads if g is not None)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def test_optimizer_adamw_decay_exclusions_and_clipping_after_allreduce():
  config = make_config()
  opt_cfg = config.trainer.optimizer_config
  assert opt_cfg.optimizer.type == "adamw"
  assert opt_cfg.optimizer.adamw.gradient_clip_norm == 1.0
  optimizer = masked_lm_task.RemBertPretrainTask.create_optimizer(opt_cfg)
  # The optimizer would clip each replica's partial gradient; the task does it.
  assert optimizer.gradient_clip_norm == 0.0
  assert optimizer.rembert_clip_norm == 1.0
  assert opt_cfg.optimizer.adamw.gradient_clip_norm == 1.0  # config untouched
  assert optimizer._do_use_weight_decay("encoder/transformer/layer_0/intermediate/kernel:0")
  assert optimizer._do_use_weight_decay("rembert_pretrainer/cls/predictions/output_embedding:0")
  for name in ("encoder/embeddings/layer_norm/gamma:0",
               "rembert_pretrainer/cls/predictions/transform/LayerNorm/beta:0",
               "encoder/transformer/layer_0/output/bias:0",
               "rembert_pretrainer/cls/predictions/output_bias:0"):
    assert not optimizer._do_use_weight_decay(name), name
  # Linear warmup, then linear decay.
  lr = optimizer.learning_rate
  warm = opt_cfg.warmup.linear.warmup_steps
  peak = opt_cfg.learning_rate.polynomial.initial_learning_rate
  assert float(lr(0)) == pytest.approx(0.0, abs=1e-9)
  assert float(lr(warm // 2)) < float(lr(warm)) <= peak * 1.0001
  assert float(lr(opt_cfg.learning_rate.polynomial.decay_steps)) == pytest.approx(0.0, abs=1e-9)


def test_lamb_config_builds_and_moves_clipping():
  config = make_config()
  config.trainer.optimizer_config.optimizer.type = "lamb"
  config.trainer.optimizer_config.optimizer.lamb.global_clipnorm = 2.0
  optimizer = masked_lm_task.RemBertPretrainTask.create_optimizer(
      config.trainer.optimizer_config)
  assert optimizer.rembert_clip_norm == 2.0
  assert not getattr(optimizer, "global_clipnorm", None)


EXPERIMENT_DIR = pathlib.Path(__file__).resolve().parents[2] / "configs" / "experiments"


# xtreme_*.yaml are fine-tuning's (tests/finetuning/experiment_config_test.py).
@pytest.mark.parametrize("path", sorted(
    p for p in EXPERIMENT_DIR.glob("*.yaml") if not p.stem.startswith("xtreme_")),
                         ids=lambda p: p.stem)
def test_every_experiment_yaml_loads(path):
  config = experiments.load_experiment_config([path])
  config.task.model.validate()
  assert config.trainer.train_steps > 0
  assert config.trainer.optimizer_config.optimizer.type in ("adamw", "lamb")


def test_preset_yaml_model_fields_and_override_precedence():
  config = experiments.load_experiment_config(
      ["pretrain_tiny_demo"],
      "task.model.num_hidden_layers=3,trainer.train_steps=7")
  assert config.task.model.hidden_size == 128        # from configs/models/tiny.yaml
  assert config.task.model.hidden_dropout_prob == 0.0  # from the experiment YAML
  assert config.task.model.num_hidden_layers == 3    # from the override
  assert config.trainer.train_steps == 7
  other = experiments.load_experiment_config(
      ["pretrain_tiny_demo"], "task.model_preset=coupled_768")
  assert other.task.model.coupled and other.task.model.hidden_size == 768


def test_unknown_keys_are_named():
  with pytest.raises(ValueError, match="hiden_size"):
    experiments.load_experiment_config(["pretrain_tiny_demo"],
                                       "task.model.hiden_size=3")
  with pytest.raises(experiment_files.ExperimentConfigError, match="train_stepz"):
    experiments.load_experiment_config(["pretrain_tiny_demo"],
                                       "trainer.train_stepz=3")
  with pytest.raises(experiment_files.ExperimentConfigError, match="no such file"):
    experiments.load_experiment_config(["no_such_experiment"])

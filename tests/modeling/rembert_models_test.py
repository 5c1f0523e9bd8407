"""Tests of the encoder, the MLM heads and the pretrainer."""
import numpy as np
import pytest
import tensorflow as tf
import testlib
import tf_keras

from rembert_tf.modeling import activations
from rembert_tf.modeling import decoupled_masked_lm
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

BATCH, SEQ, PRED = 3, 16, 5


def make_inputs(cfg, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, cfg.vocab_size, size=(BATCH, SEQ)).astype(np.int32)
  mask = np.ones((BATCH, SEQ), np.int32)
  mask[1, 10:] = 0
  types = np.zeros((BATCH, SEQ), np.int32)
  types[:, 8:] = 1
  positions = rng.integers(0, SEQ, size=(BATCH, PRED)).astype(np.int32)
  return dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
              input_type_ids=tf.constant(types),
              masked_lm_positions=tf.constant(positions))


def test_encoder_output_shapes_and_dtypes():
  cfg = testlib.tiny_config()
  encoder = rembert_encoder.build_encoder(cfg)
  inputs = make_inputs(cfg)
  inputs.pop("masked_lm_positions")
  out = encoder(inputs)
  assert out["sequence_output"].shape == (BATCH, SEQ, 32)
  assert out["pooled_output"].shape == (BATCH, 32)
  assert len(out["encoder_outputs"]) == 2
  for layer_output in out["encoder_outputs"]:
    assert layer_output.shape == (BATCH, SEQ, 32)
    assert layer_output.dtype == tf.float32
  np.testing.assert_array_equal(out["encoder_outputs"][-1].numpy(),
                                out["sequence_output"].numpy())
  # Pooled output is tanh(dense(first token)).
  pooler = encoder.pooler_layer
  expected = np.tanh(out["sequence_output"].numpy()[:, 0] @ pooler.kernel.numpy()
                     + pooler.bias.numpy())
  np.testing.assert_allclose(out["pooled_output"].numpy(), expected, atol=1e-5)


def test_projection_present_only_when_widths_differ():
  factorised = rembert_encoder.build_encoder(testlib.tiny_config())
  assert factorised._embedding_projection.kernel.shape == (16, 32)
  assert factorised._embedding_projection.bias.shape == (32,)
  same = rembert_encoder.build_encoder(testlib.tiny_config(input_embedding_size=32))
  assert same._embedding_projection is None
  assert not any("embedding_projection" in v.name for v in same.variables)


def test_embedding_layer_norm_and_widths_follow_config():
  cfg = testlib.tiny_config(layer_norm_eps=1e-5)
  encoder = rembert_encoder.build_encoder(cfg)
  assert encoder.get_embedding_table().shape == (97, 16)
  assert encoder._position_embedding_layer.weights[0].shape == (32, 16)
  assert encoder._embedding_norm_layer.epsilon == 1e-5
  for block in encoder.transformer_layers:
    assert block._norm_epsilon == 1e-5


def test_pretrainer_logits_only_at_masked_positions():
  cfg = testlib.tiny_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  inputs = make_inputs(cfg)
  out = model(inputs)
  assert out["mlm_logits"].shape == (BATCH, PRED, cfg.vocab_size)
  # Recompute the head by hand from the sequence output at those positions.
  head = model.masked_lm
  seq = out["sequence_output"].numpy()
  gathered = np.take_along_axis(
      seq, inputs["masked_lm_positions"].numpy()[..., None], axis=1)
  h = gathered @ head.dense.kernel.numpy() + head.dense.bias.numpy()
  h = activations.gelu_exact(tf.constant(h)).numpy()
  mean = h.mean(-1, keepdims=True)
  var = h.var(-1, keepdims=True)
  h = (h - mean) / np.sqrt(var + cfg.layer_norm_eps)
  h = h * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
  expected = h @ head.output_embedding.numpy().T + head.bias.numpy()
  np.testing.assert_allclose(out["mlm_logits"].numpy(), expected, atol=1e-4)


def test_decoupled_has_separate_output_embedding_outside_encoder():
  cfg = testlib.tiny_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  out_table = model.masked_lm.output_embedding
  assert out_table.shape == (cfg.vocab_size, cfg.output_embedding_size)
  assert out_table is not model.encoder.get_embedding_table()
  encoder_ids = {id(v) for v in model.encoder.variables}
  output_side = model.output_side_variables()
  assert id(out_table) in {id(v) for v in output_side}
  assert not encoder_ids & {id(v) for v in output_side}
  for v in model.encoder.variables:
    assert "cls/predictions" not in v.name and "output_transformer" not in v.name


def test_coupled_shares_exactly_one_embedding_variable():
  cfg = testlib.tiny_config(coupled=True, output_embedding_size=16)
  model = rembert_pretrainer.build_pretrainer(cfg)
  table = model.encoder.get_embedding_table()
  assert model.masked_lm.output_embedding is table
  vocab_tables = {id(v) for v in model.trainable_variables
                  if tuple(v.shape) == (cfg.vocab_size, 16)}
  assert vocab_tables == {id(table)}
  # The only output-side weights are the head's transform and bias.
  names = sorted(v.name.split("/")[-1] for v in model.output_side_variables())
  assert names == ["beta:0", "bias:0", "gamma:0", "kernel:0", "output_bias:0"]
  # A gradient step on the MLM loss moves the shared table.
  inputs = make_inputs(cfg)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(model(inputs)["mlm_logits"] ** 2)
  grad = tape.gradient(loss, table)
  assert grad is not None


def test_extra_output_layers_sit_between_encoder_and_head():
  cfg = testlib.tiny_config(num_output_layers=2)
  model = rembert_pretrainer.build_pretrainer(cfg)
  assert len(model.output_layers) == 2
  inputs = make_inputs(cfg)
  before = model(inputs)["mlm_logits"].numpy()
  # Changing an output layer changes the logits but not the encoder outputs.
  enc_before = model.encoder(
      {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
  )["sequence_output"].numpy()
  kernel = model.output_layers[0]._intermediate_dense.kernel
  kernel.assign(kernel * 2.0)
  after = model(inputs)
  assert np.abs(after["mlm_logits"].numpy() - before).max() > 1e-4
  np.testing.assert_allclose(after["sequence_output"].numpy(), enc_before, atol=1e-6)
  encoder_ids = {id(v) for v in model.encoder.variables}
  for layer in model.output_layers:
    assert not encoder_ids & {id(v) for v in layer.variables}


def test_activation_is_selectable():
  """Same weights, same inputs: the configured activation changes the output."""
  x = tf.constant([-2.0, -0.5, 0.3, 1.7])
  assert np.abs((activations.gelu_exact(x) - activations.gelu_approx(x)).numpy()).max() > 1e-5
  inputs = make_inputs(testlib.tiny_config())
  inputs.pop("masked_lm_positions")
  outputs = {}
  weights = None
  for act in ("gelu", "gelu_approx", "relu"):
    encoder = rembert_encoder.build_encoder(testlib.tiny_config(hidden_act=act))
    encoder(inputs)
    if weights is None:
      weights = encoder.get_weights()
    encoder.set_weights(weights)
    outputs[act] = encoder(inputs)["sequence_output"].numpy()
  gap = lambda a, b: np.abs(outputs[a] - outputs[b]).max()  # noqa: E731
  assert gap("gelu", "gelu_approx") > 1e-7
  # The tanh approximation stays close to the exact GELU; ReLU does not.
  assert gap("gelu", "gelu_approx") < gap("gelu", "relu")


def test_train_step_compiles_with_xla():
  cfg = testlib.tiny_config(num_output_layers=1)
  model = rembert_pretrainer.build_pretrainer(cfg)
  optimizer = tf_keras.optimizers.SGD(0.1)
  inputs = make_inputs(cfg)
  labels = tf.constant(np.random.default_rng(1).integers(
      0, cfg.vocab_size, size=(BATCH, PRED)).astype(np.int32))

  @tf.function(jit_compile=True)
  def step(inputs, labels):
    with tf.GradientTape() as tape:
      logits = model(inputs, training=True)["mlm_logits"]
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          labels, logits, from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  first = float(step(inputs, labels))
  for _ in range(5):
    last = float(step(inputs, labels))
  assert np.isfinite(first) and last < first
  # The XLA compilation really happened (the function has a compiled graph).
  assert step.experimental_get_compiler_ir(inputs, labels)(stage="hlo")


def test_step_runs_under_mirrored_strategy_on_two_cpus(two_cpu_strategy):
  cfg = testlib.tiny_config()
  with two_cpu_strategy.scope():
    model = rembert_pretrainer.build_pretrainer(cfg)
    optimizer = tf_keras.optimizers.SGD(0.1)
  inputs = make_inputs(cfg)
  dataset = tf.data.Dataset.from_tensors(inputs).unbatch().batch(
      2, drop_remainder=True).repeat()
  dist = iter(two_cpu_strategy.experimental_distribute_dataset(dataset))

  @tf.function
  def step(batch):
    def replica_fn(batch):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(batch, training=True)["mlm_logits"] ** 2)
        scaled = loss / two_cpu_strategy.num_replicas_in_sync
      grads = tape.gradient(scaled, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    per_replica = two_cpu_strategy.run(replica_fn, args=(batch,))
    return two_cpu_strategy.reduce("MEAN", per_replica, axis=None)

  assert two_cpu_strategy.num_replicas_in_sync == 2
  loss = step(next(dist))
  assert np.isfinite(float(loss))
  assert model.masked_lm.output_embedding.device.endswith("CPU:0")


def test_mixed_bfloat16_keeps_float32_variables_and_logits_dtype():
  cfg = testlib.tiny_config()
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = rembert_pretrainer.build_pretrainer(cfg)
    out = model(make_inputs(cfg))
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert all(v.dtype == tf.float32 for v in model.variables)
  assert out["mlm_logits"].dtype == tf.bfloat16
  assert np.isfinite(tf.cast(out["mlm_logits"], tf.float32).numpy()).all()


def test_get_config_round_trip_for_every_custom_layer():
  cfg = testlib.tiny_config()
  encoder = rembert_encoder.build_encoder(cfg)
  clone = rembert_encoder.RemBertEncoder.from_config(encoder.get_config())
  assert clone.get_config() == encoder.get_config()
  inputs = make_inputs(cfg)
  inputs.pop("masked_lm_positions")
  clone(inputs)
  clone.set_weights(encoder.get_weights())
  np.testing.assert_allclose(clone(inputs)["pooled_output"].numpy(),
                             encoder(inputs)["pooled_output"].numpy(), atol=1e-6)
  # Serialised through Keras' registry too (the activation is registered).
  rebuilt = tf_keras.layers.deserialize(tf_keras.layers.serialize(encoder))
  assert isinstance(rebuilt, rembert_encoder.RemBertEncoder)

  head = decoupled_masked_lm.DecoupledMaskedLM(
      vocab_size=11, output_embedding_size=6, hidden_act="gelu_approx",
      layer_norm_eps=1e-6, name="head")
  head_clone = decoupled_masked_lm.DecoupledMaskedLM.from_config(head.get_config())
  assert head_clone.get_config() == head.get_config()
  seq = tf.random.normal([2, 4, 8])
  pos = tf.constant([[0, 3], [1, 2]])
  head(seq, masked_positions=pos)
  head_clone(seq, masked_positions=pos)
  head_clone.set_weights(head.get_weights())
  np.testing.assert_allclose(head_clone(seq, masked_positions=pos).numpy(),
                             head(seq, masked_positions=pos).numpy(), atol=1e-6)
  assert tf_keras.activations.deserialize(
      tf_keras.activations.serialize(activations.gelu_exact)) is activations.gelu_exact


def test_coupled_head_refuses_a_table_of_the_wrong_shape():
  table = tf.Variable(tf.zeros([11, 4]))
  with pytest.raises(ValueError, match=r"\(11, 4\).*\(11, 6\)"):
    decoupled_masked_lm.DecoupledMaskedLM(
        vocab_size=11, output_embedding_size=6, embedding_table=table)

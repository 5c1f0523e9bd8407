"""output_range and padding removal compute what the full padded encoder does.

`output_range` (the last block at the first positions only) and
`remove_padding` (row-wise work on the real tokens, CPU without XLA) change
how the encoder computes, never its variables: outputs at real tokens and
gradients of every variable must equal the plain encoder's with the same
weights, on the inference and training paths, without and with XLA (where
padding removal steps aside).
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from rembert_tf.finetuning import finetuning_task
from rembert_tf.modeling import fused_kernels
from rembert_tf.modeling import padding_removal
from rembert_tf.modeling import projection_dense
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import transformer_block

import transformer_block_test as block_testlib

LENGTHS = (16, 9, 5, 12)
SEQ = 16


def tiny_config():
  return rembert_config.load_model_config("tiny").replace(
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def encoder_inputs(cfg, lengths=LENGTHS, seq=SEQ, seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.asarray(lengths)
  positions = np.arange(seq)[None, :]
  mask = (positions < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, cfg.vocab_size, mask.shape).astype(np.int32) * mask
  types = ((positions >= lengths[:, None] // 2) * mask).astype(np.int32)
  return dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
              input_type_ids=tf.constant(types))


def twin_encoders(cfg, **settings):
  """(plain encoder, encoder with `settings`) with the same weights."""
  plain = rembert_encoder.build_encoder(cfg)
  rng = np.random.default_rng(3)  # non-zero biases and LayerNorm parameters
  for v in plain.variables:
    v.assign(v + rng.normal(scale=0.05, size=v.shape).astype(np.float32))
  other = rembert_encoder.build_encoder(cfg, **settings)
  other.set_weights(plain.get_weights())
  return plain, other


def run_encoder(encoder, inputs, training, jit_compile):
  """Outputs and the gradients of every variable of a loss that reads the
  pooled output and the last sequence output at position 0."""

  @tf.function(jit_compile=jit_compile)
  def run():
    with tf.GradientTape() as tape:
      outputs = encoder(inputs, training=training)
      pooled = tf.cast(outputs["pooled_output"], tf.float32)
      first = tf.cast(outputs["sequence_output"][:, 0], tf.float32)
      loss = tf.reduce_sum(tf.sin(pooled)) + tf.reduce_sum(first ** 2)
    return outputs, tape.gradient(loss, encoder.trainable_variables)

  outputs, grads = run()
  return outputs, [np.asarray(tf.convert_to_tensor(g)) for g in grads]


def assert_same_gradients(expected, actual, atol=2e-5):
  """Equal up to float32 summation order: an element's error scales with the
  largest gradient of its tensor (XLA fuses and splits sums differently)."""
  assert len(expected) == len(actual)
  for e, a in zip(expected, actual):
    scale = float(np.abs(e).max()) if np.size(e) else 0.0
    np.testing.assert_allclose(a, e, atol=max(atol, 2e-6 * scale), rtol=1e-4)


# === TokenLayout ===


def test_layout_packs_real_tokens_in_order_and_unpacks_with_zeros():
  mask = tf.constant([[1, 1, 0, 0], [1, 1, 1, 0]])
  values = tf.reshape(tf.range(2 * 4 * 3, dtype=tf.float32), [2, 4, 3])
  exact = padding_removal.TokenLayout.from_mask(mask, bucketed=False)
  rows = exact.pack(values)
  np.testing.assert_array_equal(rows, tf.reshape(values, [8, 3]).numpy()[
      [0, 1, 4, 5, 6]])
  unpacked = exact.unpack(rows, real_only=True).numpy()
  np.testing.assert_array_equal(unpacked, values.numpy() * mask.numpy()[..., None])
  # Bucketed: 8 positions in buckets of 1 -> exactly the 5 real rows; a
  # bigger batch rounds up with padding positions after the real ones.
  assert int(padding_removal.TokenLayout.from_mask(mask).num_rows) == 5
  big = tf.constant(np.arange(256)[None, :] < np.array([[3], [40]]), tf.int32)
  layout = padding_removal.TokenLayout.from_mask(big)
  assert int(layout.num_rows) == 48          # 43 real, buckets of 512 / 64
  np.testing.assert_array_equal(layout.rows[:43],
                                list(range(3)) + list(range(256, 296)))
  assert set(layout.rows.numpy()[43:]) <= set(range(3, 256)) | set(range(296, 512))


def test_layout_gradients_equal_autodiff_of_gathers():
  mask = tf.constant([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
  layout = padding_removal.TokenLayout.from_mask(mask, bucketed=False)
  x = tf.random.normal([3, 5, 4], seed=1)
  weights = tf.random.normal([3, 5, 4], seed=2) * tf.cast(mask, tf.float32)[..., None]
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours = tf.reduce_sum(layout.unpack(tf.sin(layout.pack(x)), real_only=True)
                         * weights)
    flat = tf.reshape(x, [-1, 4])
    reference = tf.reduce_sum(
        tf.reshape(tf.sin(flat), [3, 5, 4]) * weights)
  np.testing.assert_allclose(ours, reference, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x),
                             atol=1e-6)


@pytest.mark.parametrize("bucketed", [False, True])
def test_layout_head_gathers_equal_unpack_split_merge_and_pack(bucketed):
  # 2 examples x 8 positions -> 6 real rows (bucketed: 8, with 2 filler
  # rows at padding positions); 3 parts x 2 heads x head size 3.
  mask = tf.constant([[1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]])
  layout = padding_removal.TokenLayout.from_mask(mask, bucketed=bucketed)
  rows = tf.random.normal([int(layout.num_rows), 3 * 2 * 3], seed=1)
  weights = tf.random.normal([2, 2, 8, 3], seed=2)
  query_real = tf.reshape(tf.cast(mask, tf.float32), [2, 1, 8, 1])

  def ours(rows):
    query, key, value = layout.unpack_heads(rows, 3, 2)
    # Attention-like use: queries only count at real positions, keys and
    # values are summed over the real positions.
    mixed = (query * query_real * tf.reduce_sum(key * value * query_real, 2,
                                                keepdims=True))
    return layout.pack_heads(tf.sin(mixed) * weights)

  def reference(rows):
    padded = tf.reshape(layout.unpack(rows), [2, 8, 3, 2, 3])
    query, key, value = tf.unstack(tf.transpose(padded, [2, 0, 3, 1, 4]))
    mixed = (query * query_real * tf.reduce_sum(key * value * query_real, 2,
                                                keepdims=True))
    merged = tf.transpose(tf.sin(mixed) * weights, [0, 2, 1, 3])
    return layout.pack(tf.reshape(merged, [2, 8, 6]))

  results = []
  for fn in (ours, reference):
    with tf.GradientTape() as tape:
      tape.watch(rows)
      out = fn(rows)
      loss = tf.reduce_sum(out * tf.sin(tf.range(6, dtype=tf.float32)))
    results.append((out.numpy(), tape.gradient(loss, rows).numpy()))
  assert results[0][0].shape == (int(layout.num_rows), 6)
  np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
  np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-6)
  assert np.abs(results[0][1]).max() > 0.1


# === output_range in the block ===


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_block_output_range_matches_model_garden(tmp_path, training,
                                                 jit_compile):
  reference, ours = block_testlib.twin_blocks(tmp_path)
  x, mask = block_testlib.inputs()

  def run(block):
    @tf.function(jit_compile=jit_compile)
    def step(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        if block is ours:
          y = block([x, mask], output_range=2, training=training)
        else:
          y = block([x, mask], output_range=2)
        loss = tf.reduce_sum(y * tf.sin(tf.range(y.shape[-1], dtype=tf.float32)))
      return y, tape.gradient(loss, [x] + block.trainable_variables)
    return step(x)

  expected_y, expected_grads = run(reference)
  y, grads = run(ours)
  assert y.shape == (block_testlib.BATCH, 2, block_testlib.HIDDEN)
  np.testing.assert_allclose(y, expected_y, atol=1e-5)
  full = ours([x, mask], training=False)
  if not training:
    np.testing.assert_allclose(y, full[:, :2], atol=1e-5)
  for e, a in zip(expected_grads, grads):
    np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(e),
                               atol=1e-5)


def test_block_output_range_in_constructor_and_config():
  block = transformer_block.RemBertTransformerBlock(
      **block_testlib.block_kwargs(output_range=1))
  x, mask = block_testlib.inputs()
  assert block([x, mask]).shape == (block_testlib.BATCH, 1, block_testlib.HIDDEN)
  assert block.get_config()["output_range"] == 1


# === The encoder ===


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_encoder_remove_padding_and_output_range_match_plain(training,
                                                             jit_compile):
  cfg = tiny_config()
  inputs = encoder_inputs(cfg)
  mask = inputs["input_mask"].numpy()[..., None]
  plain, packed = twin_encoders(cfg, remove_padding=True)
  ranged = rembert_encoder.build_encoder(cfg, output_range=1,
                                        remove_padding=True)
  ranged.set_weights(plain.get_weights())
  expected, expected_grads = run_encoder(plain, inputs, training, jit_compile)
  results = {}  # One traced (and compiled) run per encoder.
  for name, encoder in (("packed", packed), ("ranged", ranged)):
    outputs, grads = run_encoder(encoder, inputs, training, jit_compile)
    np.testing.assert_allclose(outputs["pooled_output"],
                               expected["pooled_output"], atol=2e-6)
    assert_same_gradients(expected_grads, grads)
    results[name] = outputs
  # remove_padding: real tokens as the plain encoder, zeros at padding
  # (under XLA it steps aside: everything as the plain encoder).
  outputs = results["packed"]
  for e, a in zip(expected["encoder_outputs"], outputs["encoder_outputs"]):
    np.testing.assert_allclose(np.asarray(a) * mask, np.asarray(e) * mask,
                               atol=2e-6)
  padded = np.asarray(outputs["sequence_output"]) * (1 - mask)
  if jit_compile:
    np.testing.assert_allclose(outputs["sequence_output"],
                               expected["sequence_output"], atol=2e-6)
  else:
    assert np.all(padded == 0)
  # output_range: the last outputs at position 0 only.
  outputs = results["ranged"]
  assert outputs["sequence_output"].shape == (len(LENGTHS), 1, cfg.hidden_size)
  np.testing.assert_allclose(outputs["sequence_output"],
                             expected["sequence_output"][:, :1], atol=2e-6)


def test_remove_padding_with_dropout_and_call_override():
  cfg = rembert_config.load_model_config("tiny")   # dropout 0.1
  inputs = encoder_inputs(cfg, lengths=(7, 16, 3, 1))
  encoder = rembert_encoder.build_encoder(cfg, remove_padding=True)
  outputs, grads = run_encoder(encoder, inputs, True, False)
  assert all(np.all(np.isfinite(g)) for g in grads)
  mask = inputs["input_mask"].numpy()[..., None]
  assert np.all(np.asarray(outputs["sequence_output"]) * (1 - mask) == 0)
  # remove_padding=False at call time: the padded computation.
  plain = encoder(inputs, training=False, remove_padding=False)
  packed = encoder(inputs, training=False)
  assert np.any(np.asarray(plain["sequence_output"]) * (1 - mask) != 0)
  np.testing.assert_allclose(np.asarray(packed["sequence_output"]) * mask,
                             np.asarray(plain["sequence_output"]) * mask,
                             atol=2e-6)


def test_settings_keep_variables_and_round_trip_config():
  cfg = tiny_config()
  plain, other = twin_encoders(cfg, output_range=1, remove_padding=True)
  assert ([(v.name, v.shape) for v in other.variables]
          == [(v.name, v.shape) for v in plain.variables])
  config = other.get_config()
  assert config["output_range"] == 1 and config["remove_padding"] is True
  rebuilt = rembert_encoder.RemBertEncoder.from_config(config)
  assert rebuilt._output_range == 1
  with pytest.raises(ValueError, match="output_range"):
    rembert_encoder.build_encoder(cfg, output_range=0)


def test_mixed_bfloat16_remove_padding_runs_in_bfloat16():
  cfg = tiny_config()
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    plain, packed = twin_encoders(cfg, remove_padding=True, output_range=1)
    inputs = encoder_inputs(cfg)
    expected, _ = run_encoder(plain, inputs, True, False)
    outputs, grads = run_encoder(packed, inputs, True, False)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert all(np.all(np.isfinite(g)) for g in grads)
  np.testing.assert_allclose(np.asarray(outputs["pooled_output"], np.float32),
                             np.asarray(expected["pooled_output"], np.float32),
                             atol=0.05)


# === The fine-tuning models the task builds ===


@pytest.mark.parametrize("jit_compile", [False, True])
def test_classification_model_is_built_at_cls_with_equal_logits_and_gradients(
    jit_compile):
  cfg = tiny_config()
  task = finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
      model=cfg, task_type="classification", num_labels=3,
      jit_compile=jit_compile))
  model = task.build_model()
  encoder = model.rembert_encoder
  assert encoder._output_range == 1
  assert encoder._remove_padding is (not jit_compile)
  # The same classifier over a plain full-range encoder, same weights.
  reference_task = finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
      model=cfg, task_type="span", num_labels=1, jit_compile=jit_compile))
  assert reference_task.build_model().rembert_encoder._output_range is None
  plain = rembert_encoder.build_encoder(cfg)
  plain.set_weights(encoder.get_weights())
  reference = task.kind.build_head(plain, 3, cfg.hidden_dropout_prob,
                                   "glorot_uniform")
  reference.set_weights(model.get_weights())
  inputs = encoder_inputs(cfg)

  def logits_and_grads(m):
    @tf.function(jit_compile=jit_compile)
    def run():
      with tf.GradientTape() as tape:
        logits = m(inputs, training=True)
        loss = tf.reduce_sum(tf.nn.log_softmax(logits)[:, 1])
      return logits, tape.gradient(loss, m.trainable_variables)
    logits, grads = run()
    return logits, [np.asarray(tf.convert_to_tensor(g)) for g in grads]

  expected, expected_grads = logits_and_grads(reference)
  logits, grads = logits_and_grads(model)
  np.testing.assert_allclose(logits, expected, atol=2e-6)
  assert_same_gradients(expected_grads, grads)


def test_wide_in_projection_gradient_equals_matmul_autodiff():
  rows = tf.random.normal([6, 12], seed=4)
  kernel = tf.random.normal([12, 5], seed=5)   # in > out: the custom gradient
  weights = tf.random.normal([6, 5], seed=6)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([rows, kernel])
    ours = tf.reduce_sum(projection_dense.matmul(rows, kernel) * weights)
    reference = tf.reduce_sum(tf.matmul(rows, kernel) * weights)
  np.testing.assert_allclose(ours, reference, rtol=1e-6)
  for ours_grad, reference_grad in zip(tape.gradient(ours, [rows, kernel]),
                                       tape.gradient(reference, [rows, kernel])):
    np.testing.assert_allclose(ours_grad, reference_grad, atol=1e-5)


def test_remove_padding_on_a_batch_without_real_tokens():
  """Evaluation pads its last batch with all-zero dummy records."""
  cfg = tiny_config()
  encoder = rembert_encoder.build_encoder(cfg, remove_padding=True)
  inputs = encoder_inputs(cfg, lengths=(0, 0, 0))
  for training in (False, True):
    outputs = encoder(inputs, training=training)
    assert np.all(np.asarray(outputs["sequence_output"]) == 0)
    assert outputs["pooled_output"].shape == (3, cfg.hidden_size)


@pytest.mark.parametrize("remove_padding", [False, True])
def test_training_path_matches_inference_path_without_dropout(remove_padding):
  # Without dropout the training path (fused kernels, MatMul embedding
  # projection, fused attention) computes what the plain layers compute:
  # outputs and the gradient of every variable (the inference path's
  # gradients are plain autodiff).
  cfg = tiny_config()
  inputs = encoder_inputs(cfg)
  _, encoder = twin_encoders(cfg, remove_padding=remove_padding)
  expected, expected_grads = run_encoder(encoder, inputs, False, False)
  outputs, grads = run_encoder(encoder, inputs, True, False)
  np.testing.assert_allclose(outputs["sequence_output"],
                             expected["sequence_output"], atol=2e-5)
  assert_same_gradients(expected_grads, grads)


def test_fused_dropout_uses_the_seed_mask_both_ways():
  x = tf.random.normal([6, 10], seed=1)
  weights = tf.random.normal([6, 10], seed=2)
  seed = fused_kernels.dropout_seed()
  keep = fused_kernels.dropout_keep_mask([6, 10], seed, 0.4)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours = fused_kernels.dropout(x, seed, 0.4)
    reference = tf.where(keep, x / 0.6, 0.0)
    loss, reference_loss = (tf.reduce_sum(y * weights)
                            for y in (ours, reference))
  np.testing.assert_allclose(ours, reference, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(loss, x),
                             tape.gradient(reference_loss, x), rtol=1e-6)
  assert 0 < np.mean(ours.numpy() == 0) < 1

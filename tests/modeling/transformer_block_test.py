"""RemBertTransformerBlock against Model Garden's TransformerEncoderBlock.

Same weights (restored from the Model Garden block's checkpoint), same
inputs: outputs and gradients agree to float32 rounding, on the inference
path (plain ops) and the training path (fused kernels), without and with XLA.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers

from rembert_tf.modeling import activations
from rembert_tf.modeling import fused_kernels
from rembert_tf.modeling import projection_dense
from rembert_tf.modeling import transformer_block

BATCH, SEQ, HIDDEN, HEADS, INNER = 3, 8, 16, 4, 32


def block_kwargs(**overrides):
  kwargs = dict(num_attention_heads=HEADS, inner_dim=INNER,
                inner_activation=activations.gelu_exact, norm_first=False,
                norm_epsilon=1e-12, output_dropout=0.0, attention_dropout=0.0,
                kernel_initializer=tf_keras.initializers.TruncatedNormal(
                    stddev=0.2))
  kwargs.update(overrides)
  return kwargs


def inputs(seed=0):
  rng = np.random.default_rng(seed)
  x = tf.constant(rng.normal(size=(BATCH, SEQ, HIDDEN)), tf.float32)
  mask = np.ones((BATCH, SEQ, SEQ), np.float32)
  mask[1, :, 5:] = 0   # second example: 5 real tokens
  mask[2, :, 2:] = 0
  return x, tf.constant(mask)


def twin_blocks(tmp_path, **overrides):
  """(Model Garden block, ours) with identical weights via a checkpoint."""
  x, mask = inputs()
  reference = layers.TransformerEncoderBlock(**block_kwargs(**overrides),
                                             name="layer_0")
  reference([x, mask])
  # Non-zero biases and LayerNorm parameters, so every variable matters.
  rng = np.random.default_rng(1)
  for v in reference.variables:
    v.assign(v + rng.normal(scale=0.1, size=v.shape).astype(np.float32))
  path = tf.train.Checkpoint(block=reference).write(str(tmp_path / "ckpt"))
  ours = transformer_block.RemBertTransformerBlock(**block_kwargs(**overrides),
                                                   name="layer_0")
  ours([x, mask])
  tf.train.Checkpoint(block=ours).read(path).assert_consumed()
  return reference, ours


def outputs_and_gradients(block, x, mask, training, jit_compile=False):
  @tf.function(jit_compile=jit_compile)
  def run(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = block([x, mask], training=training)
      loss = tf.reduce_sum(y * tf.sin(tf.range(HIDDEN, dtype=tf.float32)))
    grads = tape.gradient(loss, [x] + block.trainable_variables)
    return y, grads
  y, grads = run(x)
  names = ["input"] + [v.name for v in block.trainable_variables]
  return y.numpy(), {n: g.numpy() for n, g in zip(names, grads)}


def test_same_variables_names_and_shapes_as_model_garden(tmp_path):
  reference, ours = twin_blocks(tmp_path)
  assert ([(v.name, v.shape) for v in ours.variables]
          == [(v.name, v.shape) for v in reference.variables])
  # The attributes the weight converters walk.
  attention = ours._attention_layer
  assert attention._query_dense.kernel.shape == (HIDDEN, HEADS, HIDDEN // HEADS)
  assert attention._query_dense.bias.shape == (HEADS, HIDDEN // HEADS)
  assert attention._output_dense.kernel.shape == (HEADS, HIDDEN // HEADS, HIDDEN)
  assert attention._output_dense.name == "attention_output"
  assert ours._intermediate_dense.kernel.shape == (HIDDEN, INNER)
  assert ours._output_dense.kernel.shape == (INNER, HIDDEN)
  assert ours._output_layer_norm.gamma.shape == (HIDDEN,)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_outputs_and_gradients_match_model_garden(tmp_path, training,
                                                  jit_compile):
  reference, ours = twin_blocks(tmp_path)
  x, mask = inputs()
  y_ref, g_ref = outputs_and_gradients(reference, x, mask, training,
                                       jit_compile)
  y, g = outputs_and_gradients(ours, x, mask, training, jit_compile)
  np.testing.assert_allclose(y, y_ref, atol=1e-5, rtol=1e-5)
  assert g.keys() == g_ref.keys()
  for name in g_ref:
    scale = max(1.0, float(np.abs(g_ref[name]).max()))
    np.testing.assert_allclose(g[name], g_ref[name], atol=2e-5 * scale,
                               err_msg=name)
  # Masked keys really are ignored: changing them leaves example 1's outputs.
  x2 = x.numpy()
  x2[2, 2:] += 3.0
  y2 = ours([tf.constant(x2), mask], training=training).numpy()
  np.testing.assert_allclose(y2[2, :2], y[2, :2], atol=1e-5)


def test_tanh_gelu_matches_model_garden(tmp_path):
  reference, ours = twin_blocks(
      tmp_path, inner_activation=activations.gelu_approx)
  x, mask = inputs()
  for training in (False, True):
    y_ref, g_ref = outputs_and_gradients(reference, x, mask, training)
    y, g = outputs_and_gradients(ours, x, mask, training)
    np.testing.assert_allclose(y, y_ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(g["input"], g_ref["input"], atol=1e-4)


def test_dropout_is_inverted_and_applied_only_in_training(tmp_path):
  rate = 0.5
  _, ours = twin_blocks(tmp_path, output_dropout=rate, attention_dropout=rate)
  x, mask = inputs()
  inference = ours([x, mask], training=False).numpy()
  np.testing.assert_array_equal(ours([x, mask], training=False).numpy(),
                                inference)
  tf.random.set_seed(3)
  first = ours([x, mask], training=True).numpy()
  second = ours([x, mask], training=True).numpy()
  assert np.abs(first - inference).max() > 1e-2     # dropout active
  assert np.abs(first - second).max() > 1e-2        # fresh masks each call
  # The fused dropout keeps ~1 - rate of the entries, scaled by 1 / (1 - rate):
  # with equal scores and the identity as values, the context is the
  # dropped-out probabilities.
  for width in (100, 99):
    query = tf.zeros([2, 1, 100, 4])
    key = tf.zeros([2, 1, width, 4])
    value = tf.eye(width, batch_shape=[2, 1])
    probs = fused_kernels.attention(query, key, value, None, 0.5,
                                    fused_kernels.dropout_seed(), rate).numpy()
    kept = probs > 0
    assert 0.47 < kept.mean() < 0.53
    np.testing.assert_allclose(probs[kept], 1 / width / (1 - rate), rtol=1e-6)
  # The same seed gives the same mask; otherwise it changes.
  shape = [2, 1, 100, 99]
  tf.random.set_seed(5)
  first = fused_kernels.dropout_keep_mask(
      shape, fused_kernels.dropout_seed(), rate).numpy()
  tf.random.set_seed(5)
  np.testing.assert_array_equal(fused_kernels.dropout_keep_mask(
      shape, fused_kernels.dropout_seed(), rate).numpy(), first)
  again = fused_kernels.dropout_keep_mask(
      shape, fused_kernels.dropout_seed(), rate).numpy()
  assert 0.4 < (again != first).mean() < 0.6   # independent: 2 x 0.5 x 0.5


def test_dropout_masks_are_uniform_and_uncorrelated():
  # 0.1 is the fine-tuning rate: kept with probability 0.9 to sampling error
  # (5 sigma), and no correlation between neighbours, rows or seeds.
  rate, shape = 0.1, [8, 4, 128, 128]
  first = fused_kernels.dropout_keep_mask(
      shape, fused_kernels.dropout_seed(), rate).numpy().astype(np.float64)
  second = fused_kernels.dropout_keep_mask(
      shape, fused_kernels.dropout_seed(), rate).numpy().astype(np.float64)
  n = first.size
  sigma = np.sqrt(rate * (1 - rate) / n)
  assert abs(first.mean() - (1 - rate)) < 5 * sigma
  centered = (first - first.mean()).reshape(-1) / first.std()
  other = (second - second.mean()).reshape(-1) / second.std()
  for lag in (1, 2, 127, 128, 129, 128 * 128):
    assert abs(np.mean(centered[:-lag] * centered[lag:])) < 5 / np.sqrt(n)
  assert abs(np.mean(centered * other)) < 5 / np.sqrt(n)


def test_fused_kernel_gradients_match_autodiff():
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=(6, 10)), tf.float32)
  r = tf.constant(rng.normal(size=(6, 10)), tf.float32)
  gamma = tf.constant(rng.normal(size=(10,)), tf.float32)
  beta = tf.constant(rng.normal(size=(10,)), tf.float32)
  # Attention: [batch 2, heads 3, 6 queries, 10 keys, head size 5].
  q = tf.constant(rng.normal(size=(2, 3, 6, 5)), tf.float32)
  k, v = (tf.constant(rng.normal(size=(2, 3, 10, 5)), tf.float32)
          for _ in range(2))
  bias = tf.constant(np.where(rng.random((2, 1, 1, 10)) < 0.3, -1e9, 0.0),
                     tf.float32)
  seed = fused_kernels.dropout_seed()

  def dropout(values, shape):   # the kernels' mask, applied with plain ops
    keep = fused_kernels.dropout_keep_mask(shape, seed, 0.3)
    return tf.where(keep, values / 0.7, 0.0)

  def plain_attention(a, rate):
    probs = tf.nn.softmax(tf.matmul(a[0], a[1], transpose_b=True) * 0.7 + bias)
    if rate:
      probs = dropout(probs, [2, 3, 6, 10])
    return tf.matmul(probs, a[2])

  def plain_norm(x, r, gamma, beta):
    total = x + r
    mean = tf.reduce_mean(total, -1, keepdims=True)
    var = tf.reduce_mean(tf.square(total - mean), -1, keepdims=True)
    return (total - mean) * tf.math.rsqrt(var + 1e-12) * gamma + beta

  cases = [
      (lambda a: fused_kernels.gelu(a[0]),
       lambda a: tf.nn.gelu(a[0], approximate=False), [x]),
      (lambda a: fused_kernels.gelu(a[0], approximate=True),
       lambda a: tf.nn.gelu(a[0], approximate=True), [x]),
      (lambda a: fused_kernels.add_layer_norm(a[0], a[1], a[2], a[3], 1e-12),
       lambda a: plain_norm(*a), [x, r, gamma, beta]),
      (lambda a: fused_kernels.add_layer_norm(a[0], a[1], a[2], a[3], 1e-12,
                                              seed, 0.3),
       lambda a: plain_norm(dropout(a[0], [6, 10]), *a[1:]),
       [x, r, gamma, beta]),
      (lambda a: fused_kernels.attention(*a, bias, 0.7),
       lambda a: plain_attention(a, None), [q, k, v]),
      (lambda a: fused_kernels.attention(*a, bias, 0.7, seed, 0.3),
       lambda a: plain_attention(a, 0.3), [q, k, v]),
  ]
  for fused, plain, args in cases:
    results = []
    for fn in (fused, plain):
      with tf.GradientTape() as tape:
        tape.watch(args)
        y = fn(args)
        weights = tf.sin(tf.reshape(tf.range(tf.size(y), dtype=tf.float32),
                                    tf.shape(y)))
        loss = tf.reduce_sum(y * weights)
      results.append((y.numpy(), [g.numpy() for g in tape.gradient(loss, args)]))
    np.testing.assert_allclose(results[0][0], results[1][0], atol=1e-5)
    for got, want in zip(results[0][1], results[1][1]):
      np.testing.assert_allclose(got, want, atol=1e-4)


def test_mixed_bfloat16_matches_model_garden_to_bfloat16_rounding(tmp_path):
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    reference, ours = twin_blocks(tmp_path)
    x, mask = inputs()
    for training in (False, True):
      y_ref = reference([x, mask], training=training)
      y = ours([x, mask], training=training)
      assert y.dtype == y_ref.dtype == tf.float32
      np.testing.assert_allclose(y.numpy(), y_ref.numpy(), atol=0.1)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert all(v.dtype == tf.float32 for v in ours.variables)


def test_get_config_round_trip_and_unsupported_arguments(tmp_path):
  _, ours = twin_blocks(tmp_path)
  clone = transformer_block.RemBertTransformerBlock.from_config(
      ours.get_config())
  x, mask = inputs()
  clone([x, mask])
  clone.set_weights(ours.get_weights())
  np.testing.assert_allclose(clone([x, mask]).numpy(), ours([x, mask]).numpy(),
                             atol=1e-6)
  dense = projection_dense.ProjectionDense(output_dims=[2, 3], name="query")
  dense(tf.ones([4, 5]))
  dense_clone = projection_dense.ProjectionDense.from_config(dense.get_config())
  assert dense_clone.get_config() == dense.get_config()
  with pytest.raises(ValueError, match="norm_first"):
    transformer_block.RemBertTransformerBlock(**block_kwargs(norm_first=True))
  with pytest.raises(ValueError, match="use_rms_norm"):
    transformer_block.RemBertTransformerBlock(**block_kwargs(use_rms_norm=True))


def test_encoder_checkpoint_with_model_garden_blocks_restores(tmp_path,
                                                             monkeypatch):
  """A checkpoint written when the encoder used Model Garden's block restores
  into the current encoder, object for object, with the same outputs."""
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_encoder  # pylint: disable=g-import-not-at-top
  cfg = rembert_config.load_model_config("tiny", overrides=dict(
      vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=32, input_embedding_size=8, max_position_embeddings=16,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))

  def model_garden_block(num_attention_heads, inner_dim, hidden_act,
                         output_dropout, attention_dropout, layer_norm_eps,
                         initializer_range, name):
    return layers.TransformerEncoderBlock(**block_kwargs(
        num_attention_heads=num_attention_heads, inner_dim=inner_dim,
        inner_activation=activations.get(hidden_act),
        output_dropout=output_dropout, attention_dropout=attention_dropout,
        norm_epsilon=layer_norm_eps), name=name)

  with monkeypatch.context() as patch:
    patch.setattr(rembert_encoder, "build_transformer_block", model_garden_block)
    old = rembert_encoder.build_encoder(cfg)
  assert isinstance(old.transformer_layers[0], layers.TransformerEncoderBlock)
  assert not isinstance(old.transformer_layers[0],
                        transformer_block.RemBertTransformerBlock)
  path = tf.train.Checkpoint(encoder=old).write(str(tmp_path / "ckpt"))
  new = rembert_encoder.build_encoder(cfg)
  assert isinstance(new.transformer_layers[0],
                    transformer_block.RemBertTransformerBlock)
  tf.train.Checkpoint(encoder=new).read(path).assert_consumed()
  assert [v.name for v in new.variables] == [v.name for v in old.variables]
  ids = tf.constant(np.arange(24).reshape(2, 12) % 50, tf.int32)
  features = dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                  input_type_ids=tf.zeros_like(ids))
  for training in (False, True):
    np.testing.assert_allclose(
        new(features, training=training)["sequence_output"].numpy(),
        old(features, training=training)["sequence_output"].numpy(), atol=1e-5)

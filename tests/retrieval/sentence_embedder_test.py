"""Sentence embeddings: the chosen layer's mean over real tokens, on any strategy."""
import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.retrieval import sentence_embedder as se

SENTENCES = ["The farmer reads a long letter in the village.", "Hola.",
             "这只狗在河里游泳。", "Mira will eat 4 apples quickly at the market "
             "tomorrow, and the old baker sings in the garden."]


@pytest.fixture(scope="module")
def one_device():
  return tf.distribute.OneDeviceStrategy("/cpu:0")


def test_default_layer_follows_xtreme():
  # mBERT: 8 of 12, XLM-R: 14 of 24 (XTREME's scripts); RemBERT: 18 of 32.
  assert [se.default_layer(n) for n in (1, 2, 4, 6, 12, 24, 32)] == [
      1, 2, 4, 5, 8, 14, 18]
  assert se.resolve_layer(-1, 12, "m") == 12
  assert se.resolve_layer(None, 12, "m") == 8
  with pytest.raises(errors.UsageError,
                     match=r"--layer 13: the encoder of m has 12 layers; "
                     r"choose 1..12"):
    se.resolve_layer(13, 12, "m")
  assert se.bucket_lengths(100) == [16, 24, 32, 48, 64, 96, 100]
  assert se.bucket_lengths(128) == [16, 24, 32, 48, 64, 96, 128]
  assert se.bucket_lengths(16) == [16]


def _reference(checkpoint_dir, token_ids, layer):
  """Mean over real tokens of the full encoder's block `layer`, normalised."""
  _, encoder = checkpoint_restore.load_encoder(checkpoint_dir)
  out = []
  for ids in token_ids:   # one sentence at a time: no padding at all
    ids = tf.constant([ids], tf.int32)
    hidden = encoder(dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                          input_type_ids=tf.zeros_like(ids)),
                     training=False)["encoder_outputs"][layer - 1]
    mean = hidden.numpy()[0].mean(axis=0)
    out.append(mean / np.linalg.norm(mean))
  return np.stack(out)


@pytest.mark.parametrize("layer,replicas,jit,seq_length", [
    (3, 1, False, 64),    # length buckets 16, 24, 32, 48, 64
    (1, 1, True, 32),     # XLA, as on a TPU
    (3, 2, False, 32)])   # two replicas
def test_embeddings_are_the_layers_mean_over_real_tokens(
    layer, replicas, jit, seq_length, checkpoint_dir, one_device,
    two_cpu_strategy):
  strategy = two_cpu_strategy if replicas == 2 else one_device
  embedder = se.SentenceEmbedder(
      checkpoint_dir, strategy, layer=layer, batch_size=2, jit_compile=jit,
      seq_length=seq_length)
  assert (embedder.layer, embedder.num_layers) == (layer, 4)
  got = embedder.embed(SENTENCES)
  assert got.shape == (4, 32) and got.dtype == np.float32
  expected = _reference(checkpoint_dir, embedder.tokenize(SENTENCES), layer)
  np.testing.assert_allclose(got, expected, atol=2e-5)


def test_only_the_blocks_up_to_the_layer_are_built(checkpoint_dir, one_device):
  embedder = se.SentenceEmbedder(checkpoint_dir, one_device, layer=2)
  assert embedder.encoder.get_config()["num_layers"] == 2
  with pytest.raises(errors.UsageError, match="--layer 5"):
    se.SentenceEmbedder(checkpoint_dir, one_device, layer=5)


def test_long_sentences_are_truncated_to_seq_length(checkpoint_dir, one_device):
  embedder = se.SentenceEmbedder(checkpoint_dir, one_device, seq_length=8)
  assert se.SentenceEmbedder(
      checkpoint_dir, one_device).seq_length == 64   # max_position_embeddings
  ids = embedder.tokenize([SENTENCES[3]])[0]
  assert len(ids) == 8 and ids[0] == 2 and ids[-1] == 3   # [CLS] ... [SEP]
  with pytest.raises(errors.UsageError, match="--seq_length 65: choose 3..64"):
    se.SentenceEmbedder(checkpoint_dir, one_device, seq_length=65)
  # 0 is a length out of range, not "unset".
  with pytest.raises(errors.UsageError, match="--seq_length 0: choose 3..64"):
    se.SentenceEmbedder(checkpoint_dir, one_device, seq_length=0)

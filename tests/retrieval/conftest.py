"""Fixtures for the retrieval tests: a tiny encoder checkpoint with the tests'
SentencePiece model, and demo retrieval sets in XTREME's download layout."""
import pytest

import testlib

NUM_LAYERS = 4


@pytest.fixture(scope="session")
def sp_model():
  return testlib.sentencepiece_model()


@pytest.fixture(scope="session")
def tiny_cfg():
  return testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE,
                             num_hidden_layers=NUM_LAYERS,
                             max_position_embeddings=64)


@pytest.fixture(scope="session")
def checkpoint_dir(tiny_cfg, sp_model, tmp_path_factory):
  """A checkpoint directory as conversion writes it (config, encoder, vocab)."""
  import tf_keras
  from rembert_tf.data import tokenizer
  from rembert_tf.checkpoints import checkpoint_layout
  from rembert_tf.checkpoints import checkpoint_writing
  from rembert_tf.modeling import rembert_encoder
  tf_keras.utils.set_random_seed(3)
  directory = tmp_path_factory.mktemp("ckpt") / "model"
  checkpoint_writing.write_checkpoint_dir(
      directory, tiny_cfg, rembert_encoder.build_encoder(tiny_cfg))
  tokenizer.copy_sentencepiece(
      sp_model, directory / checkpoint_layout.SENTENCEPIECE_FILE)
  return directory


@pytest.fixture(scope="session")
def demo_sets(tmp_path_factory):
  """ROOT/download/{tatoeba,bucc2018} (es, zh) and ROOT/labels/tatoeba."""
  from rembert_tf.demo import retrieval_sets
  root = tmp_path_factory.mktemp("retrieval_sets")
  retrieval_sets.write_retrieval_sets(root, languages=("es", "zh"),
                                      num_sentences=30, bucc_aligned=8,
                                      unaligned=1, seed=5)
  return root

"""Shared, cached fixtures of the data tests: a tiny demo corpus and SentencePiece model.

Built once per test session (lru_cache) in a temporary directory removed at
exit; each test module copies what it changes into its own tmp_path.
"""
import atexit
import functools
import pathlib
import shutil
import tempfile

from rembert_tf.data import demo_corpus
from rembert_tf.data import sentencepiece_training

TINY_VOCAB_SIZE = 1000


@functools.lru_cache(maxsize=None)
def shared_dir() -> pathlib.Path:
  path = tempfile.mkdtemp(prefix="rembert_data_tests-")
  atexit.register(shutil.rmtree, path, True)
  return pathlib.Path(path)


@functools.lru_cache(maxsize=None)
def corpus_dir() -> pathlib.Path:
  root = shared_dir() / "corpus"
  # Monolingual documents only: the tests check each language's own words.
  demo_corpus.generate_corpus(root, target_megabytes=0.3, files_per_language=2,
                              seed=7, parallel_fraction=0.0)
  return root


@functools.lru_cache(maxsize=None)
def sentencepiece_model() -> pathlib.Path:
  out = shared_dir() / "spm"
  sentencepiece_training.train_sentencepiece(
      [str(corpus_dir() / "{lang}" / "*.txt")], out, TINY_VOCAB_SIZE,
      verbose=False, num_threads=2)
  return out / "sentencepiece.model"

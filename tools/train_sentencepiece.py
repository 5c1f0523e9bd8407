"""Trains the multilingual SentencePiece unigram model (fixed special ids).

Thin wrapper of `rembert_tf.cli.train_sentencepiece` (same flags; see its docstring)."""
from rembert_tf.cli.train_sentencepiece import run

if __name__ == "__main__":
  run()

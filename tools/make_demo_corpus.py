"""Writes the embedded multilingual demo corpus (see rembert_tf/demo/corpus.py).

Thin wrapper of `rembert_tf.cli.make_demo_corpus` (same flags; see its docstring)."""
from rembert_tf.cli.make_demo_corpus import run

if __name__ == "__main__":
  run()

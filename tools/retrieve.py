"""Sentence retrieval without fine-tuning (BUCC 2018, Tatoeba): XTREME predictions and scores.

Thin wrapper of `rembert_tf.cli.retrieve` (same flags; see its docstring)."""
from rembert_tf.cli.retrieve import run

if __name__ == "__main__":
  run()

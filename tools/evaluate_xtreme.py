"""Scores XTREME predictions against labels with the benchmark's metric definitions.

Thin wrapper of `rembert_tf.cli.evaluate_xtreme` (same flags; see its docstring)."""
from rembert_tf.cli.evaluate_xtreme import run

if __name__ == "__main__":
  run()

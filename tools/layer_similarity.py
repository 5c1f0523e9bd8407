"""Linear CKA between every pair of layers of two checkpoints (table + heatmap).

Thin wrapper of `rembert_tf.cli.layer_similarity` (same flags; see its docstring)."""
from rembert_tf.cli.layer_similarity import run

if __name__ == "__main__":
  run()

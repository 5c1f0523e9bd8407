"""Exports a checkpoint's encoder (alone) as a TF-Hub-style SavedModel, and its preprocessor.

Thin wrapper of `rembert_tf.cli.export_savedmodel` (same flags; see its docstring)."""
from rembert_tf.cli.export_savedmodel import run

if __name__ == "__main__":
  run()

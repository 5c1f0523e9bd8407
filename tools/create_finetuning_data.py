"""Writes XTREME fine-tuning TFRecords from the benchmark's `download/` layout.

Thin wrapper of `rembert_tf.cli.create_finetuning_data` (same flags; see its docstring)."""
from rembert_tf.cli.create_finetuning_data import run

if __name__ == "__main__":
  run()

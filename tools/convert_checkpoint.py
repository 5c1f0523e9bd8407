"""Converts RemBERT checkpoints: released TF1 / Hugging Face safetensors / rembert_tf.

Thin wrapper of `rembert_tf.cli.convert_checkpoint` (same flags; see its docstring)."""
from rembert_tf.cli.convert_checkpoint import run

if __name__ == "__main__":
  run()

"""Makes sharded pre-training TFRecords (BERT layout, MLM only) from raw text.

Thin wrapper of `rembert_tf.cli.create_pretraining_data` (same flags; see its docstring)."""
from rembert_tf.cli.create_pretraining_data import run

if __name__ == "__main__":
  run()

"""The ablation suite: pre-train, fine-tune, compare layers, tabulate; resumable.

Thin wrapper of `rembert_tf.cli.run_ablation` (same flags; see its docstring)."""
from rembert_tf.cli.run_ablation import run

if __name__ == "__main__":
  run()

"""The ablation suite (thin wrapper of `rembert_tf.cli.run_ablation`; same flags).

  python tools/run_ablation.py --scale demo --output_dir runs/ablation_demo
"""
from rembert_tf.cli import run_ablation

if __name__ == "__main__":
  run_ablation.run()

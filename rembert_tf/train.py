"""`python -m rembert_tf.train`: the command of rembert_tf/cli/train.py."""
from rembert_tf.cli.train import run

if __name__ == "__main__":
  run()

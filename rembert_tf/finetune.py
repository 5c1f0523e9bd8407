"""`python -m rembert_tf.finetune`: the command of rembert_tf/cli/finetune.py."""
from rembert_tf.cli.finetune import run

if __name__ == "__main__":
  run()

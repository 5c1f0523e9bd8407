"""Prints #PT / #FT parameter counts of model configs, counted from the built models.

Thin wrapper of `rembert_tf.cli.param_table` (same flags; see its docstring)."""
from rembert_tf.cli.param_table import run

if __name__ == "__main__":
  run()

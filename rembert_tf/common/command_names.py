"""The console-script name of every command.

Standard library only: setup.py reads this file without importing the package,
and each command names itself by the script a user types (`console_script`),
also when it runs as `tools/NAME.py` or `python -m`. The flag names commands
deprecated are `rembert_tf.cli.deprecated_flags`'.
"""
from typing import Optional

# Console script -> the module of rembert_tf.cli whose `run()` it calls; each
# also runs as tools/MODULE.py in a checkout.
CLI_COMMANDS = {
    "rembert-train-sentencepiece": "train_sentencepiece",
    "rembert-create-pretraining-data": "create_pretraining_data",
    "rembert-create-finetuning-data": "create_finetuning_data",
    "rembert-export": "export_savedmodel",
    "rembert-convert": "convert_checkpoint",
    "rembert-evaluate-xtreme": "evaluate_xtreme",
    "rembert-param-table": "param_table",
    "rembert-make-demo-corpus": "make_demo_corpus",
    "rembert-run-ablation": "run_ablation",
    "rembert-layer-similarity": "layer_similarity",
    "rembert-retrieve": "retrieve",
}
CONSOLE_SCRIPTS = {
    "rembert-train": "rembert_tf.cli.train",
    "rembert-finetune": "rembert_tf.cli.finetune",
    "rembert-demo": "rembert_tf.demo.__main__",
    **{name: f"rembert_tf.cli.{module}" for name, module in CLI_COMMANDS.items()},
}


def console_script(module: str) -> Optional[str]:
  """The console script of a command's module (dotted name), or None."""
  return next((name for name, target in CONSOLE_SCRIPTS.items()
               if target == module), None)

"""The console-script name of every command and the flag names each command deprecated.

Standard library only: setup.py reads this file without importing the package,
and `rembert_tf.common.command` names each command by the script a user
types, also when it runs as `tools/NAME.py` or `python -m`.
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
# `python -m rembert_tf.train` / `.finetune` -> the command's module.
_ALIASES = {"rembert_tf.train": "rembert_tf.cli.train",
            "rembert_tf.finetune": "rembert_tf.cli.finetune"}

# Command module of rembert_tf.cli -> {deprecated flag: agreed flag}.
DEPRECATED_FLAGS = {
    "convert_checkpoint": {"input": "checkpoint", "output": "output_dir",
                           "sp_model": "sentencepiece_model"},
    "export_savedmodel": {"model_dir": "checkpoint",
                          "sp_model": "sentencepiece_model"},
    "layer_similarity": {"checkpoint_a": "checkpoint",
                         "sp_model": "sentencepiece_model"},
    "retrieve": {"sp_model": "sentencepiece_model"},
    "train": {"config": "config_file"},
    "finetune": {"sp_model": "sentencepiece_model",
                 "allow_sp_model_mismatch": "allow_sentencepiece_mismatch",
                 "config": "config_file"},
    "create_finetuning_data": {"sp_model": "sentencepiece_model"},
    "run_ablation": {"sp_model": "sentencepiece_model"},
}


def console_script(module: str) -> Optional[str]:
  """The console script of a command's module (dotted name), or None."""
  module = _ALIASES.get(module, module)
  return next((name for name, target in CONSOLE_SCRIPTS.items()
               if target == module), None)

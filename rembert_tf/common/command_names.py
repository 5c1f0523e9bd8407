"""The console-script name of every command and the one flag name of each shared concept.

Standard library only: setup.py reads this file without importing the package
(its console scripts are `CONSOLE_SCRIPTS`), and `rembert_tf.common.command`
names each command by the script a user types, also when it runs as
`tools/NAME.py` or `python -m`. tests/architecture_test.py refuses a command
flag that names a concept of `AGREED_FLAGS` otherwise; the old names of
`DEPRECATED_FLAGS` keep working as absl aliases that say so in one line.
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

# The agreed flag of each concept the commands share -> what it names.
AGREED_FLAGS = {
    "sentencepiece_model": "a SentencePiece model file a command reads",
    "allow_sentencepiece_mismatch": "go on although the records were made "
                                    "with another SentencePiece model",
    "checkpoint": "a checkpoint a command reads and does not train",
    "checkpoint_b": "the second checkpoint of a compared pair",
    "init_checkpoint": "the checkpoint a fine-tuning run starts from",
    "model_dir": "the directory a trainer writes and resumes from",
    "output_dir": "the directory a command writes its results in",
    "output_file": "the one file a command writes its result in",
    "config_file": "the experiment YAMLs a trainer layers (Model Garden's)",
}
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

"""The console-script name of every command, defined once.

setup.py makes its console scripts from `CONSOLE_SCRIPTS` (it reads this file
without importing the package), and every command names itself in its help,
log and error lines by the script a user types (`harness.program_name`):
`rembert-convert`, also when it runs as `tools/convert_checkpoint.py` or
`python -m ...`. Standard library only: setup.py and `--help` read it
without TensorFlow.

Example:
```python
from rembert_tf.cli import command_names
command_names.console_script("rembert_tf.cli.convert_checkpoint")  # 'rembert-convert'
command_names.console_script("rembert_tf.demo.__main__")           # 'rembert-demo'
```
"""
from typing import Optional

# Console script -> the module of rembert_tf.cli whose `run()` it calls; each
# of these also runs as tools/MODULE.py in a checkout.
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
# Console script -> the module whose `run()` it calls.
# (also `python -m rembert_tf.train`, `.finetune`, `.demo`).
CONSOLE_SCRIPTS = {
    "rembert-train": "rembert_tf.cli.train",
    "rembert-finetune": "rembert_tf.cli.finetune",
    "rembert-demo": "rembert_tf.demo.__main__",
    **{name: f"rembert_tf.cli.{module}" for name, module in CLI_COMMANDS.items()},
}
# Modules that run a command as `python -m` -> the command's module.
_ALIASES = {
    "rembert_tf.train": "rembert_tf.cli.train",      # python -m rembert_tf.train
    "rembert_tf.finetune": "rembert_tf.cli.finetune",
}


def console_script(module: str) -> Optional[str]:
  """The console script of a command's module (dotted name), or None."""
  module = _ALIASES.get(module, module)
  for name, target in CONSOLE_SCRIPTS.items():
    if target == module:
      return name
  return None

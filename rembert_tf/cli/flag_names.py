"""One flag name per concept across every command, and the old names as deprecated aliases.

| concept | flag |
| --- | --- |
| a SentencePiece model file a command reads | `--sentencepiece_model` |
| go on although two SentencePiece models differ | `--allow_sentencepiece_mismatch` |
| a checkpoint a command reads and does not train | `--checkpoint` (`--checkpoint_b`: the second of a compared pair) |
| the checkpoint a fine-tuning run starts from | `--init_checkpoint` (Model Garden's `task.init_checkpoint`) |
| the directory a trainer writes and resumes from | `--model_dir` (Model Garden's) |
| the directory a command writes its results in | `--output_dir` |
| the one file a command writes its result in | `--output_file` |
| the experiment YAMLs a trainer layers | `--config_file` (Model Garden's) |

`AGREED_FLAGS` is that table; tests/architecture_test.py refuses a command
flag that names one of these concepts otherwise. `DEPRECATED_FLAGS` keeps
each old name working: `define_aliases` makes it an absl alias of the agreed
flag (`flags.DEFINE_alias`: same value, `--noNAME` for a boolean) and
`report_aliases`, after parsing, prints one line per old name given, e.g.
`rembert-export: --sp_model is deprecated; use --sentencepiece_model.`
`harness` does both for every command; `current_flag_names` does the same for
a list of another command's flags (rembert-run-ablation's --finetune_flags).

Example:
```python
from rembert_tf.cli import flag_names
flag_names.DEPRECATED_FLAGS["export_savedmodel"]["model_dir"]  # 'checkpoint'
flag_names.current_flag_names("finetune", ["--allow_sp_model_mismatch"],
                              "rembert-run-ablation --finetune_flags")
# ['--allow_sentencepiece_mismatch'] (and one line on stderr)
```
"""
import sys
from typing import List, Sequence

from absl import flags

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


def _command(module: str) -> str:
  """`rembert_tf.cli.export_savedmodel` (or the stem itself) -> its stem."""
  return module.rpartition(".")[2]


def define_aliases(module: str, program: str) -> List[str]:
  """Defines the deprecated names of `module`'s flags as absl aliases (listed
  under `program` in --help); the names defined."""
  defined = []
  for old, new in DEPRECATED_FLAGS.get(_command(module), {}).items():
    if old in flags.FLAGS or new not in flags.FLAGS:
      continue  # a flag of another command loaded into this process
    flags.DEFINE_alias(old, new, module_name=program)
    flags.FLAGS[old].help = f"Deprecated: use --{new}."
    defined.append(old)
  return defined


def report_aliases(module: str, program: str) -> None:
  """One line on stderr for each deprecated name given on the command line."""
  for old, new in DEPRECATED_FLAGS.get(_command(module), {}).items():
    if old in flags.FLAGS and flags.FLAGS[old].present:
      _say(program, old, new)


def current_flag_names(module: str, args: Sequence[str],
                       program: str) -> List[str]:
  """`args` (flags of `module`'s command) with each deprecated name replaced
  by the agreed one, and one line on stderr for each."""
  renamed = DEPRECATED_FLAGS.get(_command(module), {})
  current = []
  for arg in args:
    dashes = len(arg) - len(arg.lstrip("-"))
    name, equals, value = arg[dashes:].partition("=")
    negated = name.startswith("no") and name[2:] in renamed
    old = name[2:] if negated else name
    if dashes and old in renamed:
      _say(program, name, ("no" if negated else "") + renamed[old])
      arg = f"{arg[:dashes]}{'no' if negated else ''}{renamed[old]}{equals}{value}"
    current.append(arg)
  return current


def _say(program: str, old: str, new: str) -> None:
  print(f"{program}: --{old} is deprecated; use --{new}.", file=sys.stderr,
        flush=True)

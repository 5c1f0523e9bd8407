"""The flag names each command deprecated, and its command line with each renamed.

Standard library only (a command module imports it before its flags are
parsed). A command with deprecated names passes `renamer(ITS_MODULE)` to
`rembert_tf.common.command.run`, which renames the flags before a `--` ahead
of absl's parser: the old name works and says so in one line on stderr.
"""
import functools
import sys
from typing import Callable, List, Sequence

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


def current_flag_names(module: str, args: Sequence[str],
                       program: str) -> List[str]:
  """`args` of the command of `module` with each deprecated name replaced;
  one line on stderr each."""
  renamed = DEPRECATED_FLAGS.get(module.rpartition(".")[2], {})
  current, said = [], []
  for arg in args:
    dashes = len(arg) - len(arg.lstrip("-"))
    name, equals, value = arg[dashes:].partition("=")
    no = "no" if name.startswith("no") and name[2:] in renamed else ""
    if dashes and name[len(no):] in renamed:
      said.append((list(renamed).index(name[len(no):]), name,
                   no + renamed[name[len(no):]]))
      arg = f"{arg[:dashes]}{said[-1][2]}{equals}{value}"
    current.append(arg)
  for _, old, new in sorted(said):
    print(f"{program}: --{old} is deprecated; use --{new}.", file=sys.stderr,
          flush=True)
  return current


def renamer(module: str) -> Callable[[Sequence[str], str], List[str]]:
  """`current_flag_names` of the command of `module`, as `command.run`'s
  `rename_flags`."""
  return functools.partial(current_flag_names, module)

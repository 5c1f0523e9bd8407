"""The suite's `--finetune_flags` as keyword arguments of `run_finetuning`.

The suite calls the fine-tuning library (`rembert_tf.finetuning`), not the
fine-tuning command; what a user gives for every fine-tuning run is written
as that command's flags (`--name=value`, `--name value`, `--flag` /
`--noflag`, comma-separated lists) and read here into the library's
arguments. The suite itself sets each run's task, checkpoint, output
directory, learning rate, seed and data; those flags are refused.

Example:
```python
from rembert_tf.ablation import finetune_flags
finetune_flags.keyword_arguments(["--num_train_epochs=2", "--nojit_compile",
                                  "--strategy", "tpu", "--splits=dev"])
# {'num_train_epochs': 2.0, 'jit_compile': False, 'strategy': 'tpu',
#  'splits': ['dev']}
```
"""
from typing import Any, Callable, Dict, List, Sequence, Tuple

from rembert_tf.common import errors

_TRUE, _FALSE = ("true", "t", "1"), ("false", "f", "0")


def _number(kind: type) -> Callable[[str], Any]:
  def parse(text: str):
    try:
      return kind(text)
    except ValueError:
      raise ValueError(f"expected {'an integer' if kind is int else 'a number'}"
                       ) from None
  return parse


def _boolean(text: str) -> bool:
  if text.lower() in _TRUE + _FALSE:
    return text.lower() in _TRUE
  raise ValueError("expected true or false")


def _names(text: str) -> List[str]:
  return [v for v in text.split(",") if v]


def _compare(text: str) -> bool:
  if text != "paper":
    raise ValueError("expected paper")
  return True


# rembert-finetune flag -> (run_finetuning keyword, value parser).
_FLAGS: Dict[str, Tuple[str, Callable[[str], Any]]] = {
    "num_train_epochs": ("num_train_epochs", _number(float)),
    "num_train_steps": ("num_train_steps", _number(int)),
    "warmup_proportion": ("warmup_proportion", _number(float)),
    "train_batch_size": ("train_batch_size", _number(int)),
    "eval_batch_size": ("eval_batch_size", _number(int)),
    "steps_per_loop": ("steps_per_loop", _number(int)),
    "checkpoint_interval": ("checkpoint_interval", _number(int)),
    "seq_length": ("seq_length", _number(int)),
    "languages": ("languages", _names),
    "splits": ("splits", _names),
    "model_config": ("model_config", str),
    "compare": ("compare_paper", _compare),
    "strategy": ("strategy", str),
    "tpu": ("tpu", str),
    "mixed_precision": ("mixed_precision", str),
    "jit_compile": ("jit_compile", _boolean),
    "deterministic": ("deterministic", _boolean),
    "freeze_input_embeddings": ("freeze_input_embeddings", _boolean),
    "keep_checkpoints": ("keep_checkpoints", _boolean),
    "allow_sentencepiece_mismatch": ("allow_sp_model_mismatch", _boolean),
    "allow_unlabelled_dev": ("allow_unlabelled_dev", _boolean),
}
# Flags the suite sets for each run -> what to use instead.
SET_BY_THE_SUITE = {
    "task": "choose the tasks with --tasks",
    "init_checkpoint": "each row's pre-trained model is fine-tuned",
    "output_dir": "runs go under --output_dir/models/<row>/finetune/",
    "learning_rate": "choose the rates with --learning_rates",
    "learning_rates": "choose the rates with --learning_rates",
    "num_seeds": "choose the seeds per rate with --num_seeds",
    "seed": "choose the seeds per rate with --num_seeds",
    "records_dir": "give --xtreme_records_dir or --xtreme_data_dir",
    "data_dir": "give --xtreme_records_dir or --xtreme_data_dir",
    "data_source": "give --xtreme_records_dir or --xtreme_data_dir",
    "tfds_data_dir": "give --xtreme_records_dir or --xtreme_data_dir",
    "sentencepiece_model": "give --sentencepiece_model",
}
FLAG_NAMES = tuple(_FLAGS) + tuple(SET_BY_THE_SUITE)


def _name_and_value(token: str, rest: List[str]) -> Tuple[str, str]:
  """(flag name, value text) of one flag; a value may be the next token."""
  name, has_value, value = token.lstrip("-").partition("=")
  if has_value:
    return name, value
  if name not in _FLAGS and name.startswith("no") and (
      _FLAGS.get(name[2:], (None, None))[1] is _boolean):
    return name[2:], "false"
  if _FLAGS.get(name, (None, None))[1] is _boolean:
    return name, "true"
  if not rest:
    raise errors.UsageError(f"--finetune_flags {token}: give a value "
                            f"({token}=VALUE).")
  return name, rest.pop(0)


def keyword_arguments(flags: Sequence[str]) -> Dict[str, Any]:
  """`run_finetuning` keyword arguments of rembert-finetune flags (a later
  flag overrides an earlier one, as on a command line)."""
  arguments, rest = {}, list(flags)
  while rest:
    token = rest.pop(0)
    if not token.startswith("-"):
      raise errors.UsageError(f"--finetune_flags {token!r}: expected a flag "
                              "such as --num_train_epochs=2.")
    name, text = _name_and_value(token, rest)
    if name in SET_BY_THE_SUITE:
      raise errors.UsageError(
          f"--finetune_flags --{name}: the suite sets it for each run "
          f"({SET_BY_THE_SUITE[name]}).")
    if name not in _FLAGS:
      raise errors.UsageError(
          f"--finetune_flags --{name}: not a flag of rembert-finetune; "
          f"expected one of {', '.join('--' + n for n in _FLAGS)}.")
    keyword, parse = _FLAGS[name]
    try:
      arguments[keyword] = parse(text)
    except ValueError as e:
      raise errors.UsageError(
          f"--finetune_flags --{name}={text}: {e}.") from None
  return arguments

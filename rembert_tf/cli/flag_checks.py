"""Numeric flags checked as the flags are parsed: type, sign and range, one line.

Builds on absl's own flag bounds: each numeric flag declares its range where
it is defined (`flags.DEFINE_integer(..., lower_bound=1)`, or
`require_above(name, 0)` / `require(name, check, why)` beside it for what absl's
inclusive bounds cannot say). absl then refuses a bad value before `main`
runs; `parse_flags` turns absl's refusal into the project's one line:

* a value of the wrong type (`--seq_length=abc`), an unknown flag: a usage
  error of flag parsing, exit code 2;
* a value out of its range (`--seq_length=0`): exit code 1, like every other
  bad input.

A leading `~` of any text flag is the home directory, as the shell makes it
(it leaves `--output_dir=~/c` alone): `expand_home_in_flags`.

Example:
```python
from absl import flags
from rembert_tf.cli import flag_checks

flags.DEFINE_integer("max_sentences", 512, "Sentences compared.",
                     lower_bound=1)
flags.DEFINE_float("megabytes", 2.0, "Corpus size.")
flag_checks.require_above("megabytes", 0)
flag_checks.describe(flags.FLAGS["max_sentences"], "0")
# -> (1, '--max_sentences 0: must be at least 1.')
```
"""
import os
import re
import sys
from typing import List, Sequence, Tuple

from absl import flags

from rembert_tf.common import errors

# absl's messages for a flag it refuses: `flag --NAME=VALUE: DETAIL`.
_REFUSED = re.compile(r"flag --([\w.-]+)=(.*?): (.*)$")
_TYPE_NAMES = {"int": "an integer", "float": "a number"}


def require(name: str, check, why: str,
            flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """The flag `name`, when given, must pass `check`; `why` says what to give."""
  flags.register_validator(
      name, lambda value: value is None or check(value), message=f"{why}.",
      flag_values=flag_values)


def require_above(name: str, limit: float,
                  flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """The flag `name`, when given, must be greater than `limit`."""
  require(name, lambda value: value > limit, f"must be above {limit:g}",
          flag_values)


def range_text(parser) -> str:
  """`at least 1`, `at most 8`, `in [0, 1]` or '' (absl's bounds)."""
  low = getattr(parser, "lower_bound", None)
  high = getattr(parser, "upper_bound", None)
  if low is not None and high is not None:
    return f"in [{low:g}, {high:g}]"
  if low is not None:
    return f"at least {low:g}"
  if high is not None:
    return f"at most {high:g}"
  return ""


def describe(flag, text: str, detail: str = "") -> Tuple[int, str]:
  """(exit code, line) for the value `text` absl refused for `flag`."""
  parser = flag.parser
  kind = _TYPE_NAMES.get(parser.flag_type(), parser.flag_type())
  bounds = range_text(parser)
  try:
    value = getattr(parser, "convert", parser.parse)(text)
    if text.startswith("[") and not hasattr(parser, "convert"):
      import ast  # pylint: disable=g-import-not-at-top
      value = ast.literal_eval(text)
  except (TypeError, ValueError):
    wanted = f"{kind} {bounds}".strip()
    return errors.EXIT_USAGE, f"--{flag.name} {text}: not {kind}; give {wanted}."
  if bounds and parser.is_outside_bounds(value):
    return errors.EXIT_ERROR, f"--{flag.name} {text}: must be {bounds}."
  if not hasattr(parser, "convert"):  # a list or text flag: its format
    if isinstance(value, list) and text.startswith("["):  # absl shows a repr
      text = ",".join(value)
    return errors.EXIT_USAGE, f"--{flag.name} {text}: {detail}"
  return errors.EXIT_ERROR, f"--{flag.name} {text}: {detail}"


def is_refused_value(error: flags.Error, flag_values=flags.FLAGS) -> bool:
  """Whether absl refused one flag's value (not a missing or unknown flag)."""
  first = str(error).strip().splitlines()[0] if str(error).strip() else ""
  found = _REFUSED.match(first)
  return bool(found and found.group(1) in flag_values
              and "must have a value other than None" not in found.group(3))


def explain(error: flags.Error, flag_values=flags.FLAGS) -> Tuple[int, str]:
  """(exit code, one line) for an error absl raised while parsing flags."""
  first = str(error).strip().splitlines()[0] if str(error).strip() else ""
  found = _REFUSED.match(first)
  if found and found.group(1) in flag_values:
    name, text, detail = found.groups()
    if text == "None" and "must have a value other than None" in detail:
      return errors.EXIT_USAGE, f"--{name} is required; give it a value."
    return describe(flag_values[name], text, detail)
  return errors.EXIT_USAGE, errors.one_line(error)


# `~` or `~user` opening a value, as the shell expands it unless the value is
# glued to its flag (`--output_dir=~/c`) or quoted.
_HOME_PREFIX = re.compile(r"^~[\w.-]*(?=/|$)")


def _home_expanded(value):
  if isinstance(value, str) and _HOME_PREFIX.match(value):
    return os.path.expanduser(value)
  if isinstance(value, list) and any(_HOME_PREFIX.match(v) for v in value
                                     if isinstance(v, str)):
    return [_home_expanded(v) for v in value]
  return value


def expand_home_in_flags(flag_values=flags.FLAGS) -> None:
  """A path flag's leading `~` means the home directory, in every command
  (a folder literally named `~` is never what a user meant)."""
  for flag in flag_values:
    value = flag_values[flag].value
    expanded = _home_expanded(value)
    if expanded is not value:
      flag_values[flag].value = expanded


def parse_flags(prog: str, argv: Sequence[str]) -> List[str]:
  """absl's `FLAGS(argv)`; a refused flag is one line `PROG: error: ...`."""
  try:
    args = flags.FLAGS(list(argv))
    expand_home_in_flags()
    return args
  except flags.Error as e:
    code, line = explain(e)
    print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
    sys.exit(code)

"""Both trainers' experiment configs from their YAML files, overrides and flags.

Builds on Model Garden's `exp_factory` and `hyperparams`. `layered_values`
layers `--config_file` (repeated; a bare name is a file of
`configs/experiments/`) and `--params_override` as Model Garden's `train.py`
does; `with_flags` sets the fields that flags stand for; `build` makes the
registered experiment, naming an unknown key with the closest field and a
value of the wrong type.

Example:
```python
from rembert_tf.runtime import experiment_files
values = experiment_files.layered_values(
    ["pretrain_tiny_demo"], "trainer.train_steps=50")
values["trainer"]["train_steps"]   # 50
```
"""
import copy
import dataclasses
import difflib
import os
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import yaml
from official.core import exp_factory
from official.modeling import hyperparams

from rembert_tf.common import errors
from rembert_tf.modeling import rembert_config
from rembert_tf.runtime import choices

EXPERIMENT_CONFIG_DIR = rembert_config.CONFIG_ROOT / "experiments"
# Each trainer's experiments -> (sections only its YAMLs have, its command).
PRETRAINING, FINETUNING = "pre-training", "fine-tuning"
_KINDS = {PRETRAINING: (("task",), "rembert-train"),
          FINETUNING: (("data", "encoder", "sweep"), "rembert-finetune")}
SOURCE = "--config_file / --params_override"
# The field types checked (text fields may take a list as well).
_EXPECTED = {bool: "true or false", int: "an integer", float: "a number"}


class ExperimentConfigError(errors.RemBertError, ValueError):
  """An experiment YAML or override is invalid; the message names the field."""


def experiment_kind(values: Dict[str, Any]) -> Optional[str]:
  """PRETRAINING or FINETUNING by the YAML's sections, else None."""
  return next((kind for kind, (sections, _) in _KINDS.items()
               if any(section in values for section in sections)), None)


def experiment_names(kind: Optional[str] = None):
  """The bare names of configs/experiments/, of one kind if given."""
  return sorted(p.stem for p in EXPERIMENT_CONFIG_DIR.glob("*.yaml")
                if kind is None or experiment_kind(read_yaml(str(p))) == kind)


def resolve_experiment_path(path: Union[str, os.PathLike],
                            kind: Optional[str] = None) -> str:
  """A YAML path, or a bare name of configs/experiments/; with `kind`, the
  choices named are that trainer's own."""
  path = os.fspath(path)
  if tf.io.gfile.isdir(path):
    raise ExperimentConfigError(
        f"--config_file {path}: a directory; give an experiment YAML file (e.g. "
        f"{os.path.join(path, 'experiment.yaml')}) or the bare name of one.")
  if tf.io.gfile.exists(path):
    return path
  named = EXPERIMENT_CONFIG_DIR / f"{path}.yaml"
  if os.path.splitext(path)[1] not in (".yaml", ".yml") and named.exists():
    return str(named)
  raise ExperimentConfigError(
      f"--config_file {path}: no such file. Give a YAML path or one of the "
      f"{kind + ' ' if kind else ''}experiments in {EXPERIMENT_CONFIG_DIR}: "
      f"{', '.join(experiment_names(kind))}.")


def read_yaml(path) -> Dict[str, Any]:
  """An experiment YAML as a mapping of its sections (an empty one: {})."""
  try:
    values = hyperparams.read_yaml_to_params_dict(os.fspath(path)).as_dict()
  except yaml.YAMLError as e:
    raise ExperimentConfigError(
        f"{path} is not valid YAML ({' '.join(str(e).split())}); fix the "
        "file.") from None
  except AttributeError:  # a list or a value: ParamsDict takes mappings only
    raise ExperimentConfigError(
        f"{path}: an experiment YAML must be a mapping of its sections (task "
        "/ trainer / runtime ...).") from None
  return {section: {} if value is None else value
          for section, value in values.items()}


def parse_override(params_override: Union[str, Dict[str, Any], None]
                   ) -> Dict[str, Any]:
  """`--params_override` (as Model Garden reads it; or a dict, nested or with
  dotted keys) as a nested dict."""
  if isinstance(params_override, dict):
    return _nested(params_override)  # its values as given: they may be configs
  if not params_override:
    return {}
  try:
    return hyperparams.override_params_dict(
        hyperparams.ParamsDict(), params_override, is_strict=False).as_dict()
  except (yaml.YAMLError, tf.errors.OpError, AttributeError, ValueError):
    raise ExperimentConfigError(
        f"--params_override {params_override!r}: expected comma-separated "
        "dotted keys (task.train_data.global_batch_size=64,trainer.train_steps=10), "
        "a YAML/JSON mapping, or a YAML file.") from None


def _nested(values: Dict[str, Any]) -> Dict[str, Any]:
  nested: Dict[str, Any] = {}
  for key, value in values.items():
    for part in reversed(key.split(".") if isinstance(key, str) else [key]):
      value = {part: value}
    nested = deep_merge(nested, value)
  return nested


def deep_merge(base: Dict[str, Any], update: Dict[str, Any]) -> Dict[str, Any]:
  out = copy.deepcopy(base)
  for key, value in (update or {}).items():
    if isinstance(value, dict) and isinstance(out.get(key), dict):
      out[key] = deep_merge(out[key], value)
    else:
      out[key] = copy.deepcopy(value)
  return out


def layered_values(config_files: Sequence[Union[str, os.PathLike]] = (),
                   params_override: Union[str, Dict[str, Any], None] = None,
                   kind: Optional[str] = None) -> Dict[str, Any]:
  """The YAML files in order, then the override; with `kind`, a YAML of the
  other trainer is refused."""
  merged: Dict[str, Any] = {}
  for path in config_files:
    values = read_yaml(resolve_experiment_path(path, kind))
    found = experiment_kind(values)
    if kind is not None and found not in (None, kind):
      name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
      raise ExperimentConfigError(
          f"--config_file {path}: {name} is a {found} experiment: use "
          f"{_KINDS[found][1]} --config_file {path}; {_KINDS[kind][1]} runs "
          f"the {kind} ones ({', '.join(experiment_names(kind))}).")
    merged = deep_merge(merged, values)
  return deep_merge(merged, parse_override(params_override))


def with_flags(values: Dict[str, Any], flags: Dict[str, Tuple[str, Any]]
               ) -> Tuple[Dict[str, Any], List[str]]:
  """`values` with the fields that flags set ({dotted field: (the flag as
  given, its value)}), and a note for each flag overriding another value."""
  notes = []
  for field, (flag, value) in flags.items():
    written: Any = values
    for part in field.split("."):
      written = written.get(part) if isinstance(written, dict) else None
    if written is not None and _spelled(written) != _spelled(value):
      notes.append(f"{flag} overrides the experiment's {field}: {written}")
  return deep_merge(values, _nested(
      {field: value for field, (_, value) in flags.items()})), notes


def _spelled(value: Any) -> Any:
  """A runtime value as the flags spell it."""
  return choices.FLAG_SPELLING.get(value, value) if isinstance(
      value, str) else value


def build(experiment: str, values: Dict[str, Any], source: str = SOURCE):
  """The registered `experiment` with `values` (nested) set and checked."""
  config = exp_factory.get_exp_config(experiment)
  values = copy.deepcopy(values)
  _check_values(config, values, source)
  try:
    config.override(values, is_strict=True)
    config.validate()
  except (KeyError, ValueError, AttributeError, TypeError) as e:
    raise ExperimentConfigError(
        f"{source}: {' '.join(str(e).split())}. Fix the named fields.") from None
  strategy = config.runtime.distribution_strategy
  if strategy and _spelled(strategy) not in choices.STRATEGIES:
    raise ExperimentConfigError(
        f"runtime.distribution_strategy {strategy!r}: expected one of "
        f"{', '.join(choices.STRATEGIES)} (Model Garden's 'off' is "
        "'default'); change the experiment YAML or give --strategy.")
  return config


def _field_type(config: Any, key: str) -> Any:
  """A field's declared type, Optional unwrapped (None: not one type)."""
  try:
    hint = typing.get_type_hints(type(config)).get(key)
  except (NameError, TypeError):
    return None
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  if typing.get_origin(hint) is Union:
    return args[0] if len(args) == 1 else None
  return hint


def _is_list(hint: Any) -> bool:
  return typing.get_origin(hint) in (list, tuple)


def _fits(value: Any, hint: Any) -> Optional[bool]:
  """Whether `value` fits a field's type; None for a type not checked."""
  if value is None:
    return True  # Model Garden's "not set"
  if hint in _EXPECTED:
    return isinstance(value, bool) == (hint is bool) and isinstance(
        value, (int, float) if hint is float else hint)
  if _is_list(hint):
    item = (typing.get_args(hint) or [None])[0]
    return isinstance(value, (list, tuple)) and all(
        _fits(v, item) is not False for v in value)
  return None


def _check_values(config: Any, values: Dict[str, Any], source: str,
                  prefix: str = "") -> None:
  """Refuses a key of `values` (nested) that is no field of `config` (naming
  the closest), sub-keys of a field, a value of another type (Model Garden
  would store `train_steps=abc` as text); an integer for a float field
  becomes a float (TensorFlow's schedules refuse to mix them)."""
  names = list(config.as_dict())  # a one-of config lists its chosen field
  names += [f.name for f in dataclasses.fields(config)
            if not f.name.startswith("_") and f.name not in names]
  where = prefix.rstrip(".")
  for key, value in values.items():
    if key not in names:
      close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
      raise ExperimentConfigError(
          f"{source}: {key!r} does not exist in {where or 'the experiment'}; "
          + (f"did you mean {prefix}{close[0]}?" if close else
             f"{where or 'the top level'} has {', '.join(sorted(names))}."))
    field, hint = getattr(config, key, None), _field_type(config, key)
    if isinstance(value, dict) and value and not isinstance(field, dict):
      if dataclasses.is_dataclass(field):
        _check_values(field, value, source, f"{prefix}{key}.")
      elif field is not None or hint in (*_EXPECTED, str) or _is_list(hint):
        example = ("[" + ",".join(map(str, value)) + "]"
                   if isinstance(field, (list, tuple)) or _is_list(hint)
                   else repr(field))
        raise ExperimentConfigError(
            f"{source}: {prefix}{key} is a field, not a section ({prefix}{key}."
            f"{next(iter(value))} names nothing); set it whole, e.g. "
            f"{prefix}{key}={example}.")
    elif hint is float and isinstance(value, int) and not isinstance(
        value, bool):
      values[key] = float(value)
    elif _fits(value, hint) is False:
      of = {int: " of integers", float: " of numbers"}
      expected = _EXPECTED.get(hint) or "a list" + of.get(
          (typing.get_args(hint) or [None])[0], "")
      raise ExperimentConfigError(
          f"experiment config: {prefix}{key} is {value!r}; it must be "
          f"{expected}. Fix it in --config_file or --params_override.")

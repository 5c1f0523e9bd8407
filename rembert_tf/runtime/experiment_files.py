"""An experiment's YAML files and overrides, layered into one mapping.

What Model Garden's `train.py` does with `--config_file` (repeated) and
`--params_override` (`official.modeling.hyperparams.params_dict`), shared by
both registered experiments (`pretraining.experiments`,
`finetuning.finetuning_experiment`): the YAMLs in order, then the override;
a bare name is a file of `configs/experiments/`. `check_field_types` then
names a field whose value is not of its declared type (Model Garden's
`override` stores whatever it is given).

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
import re
import typing
from typing import Any, Dict, Optional, Sequence, Union

import yaml
from official.modeling.hyperparams import params_dict

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.modeling import rembert_config

EXPERIMENT_CONFIG_DIR = rembert_config.CONFIG_ROOT / "experiments"


class ExperimentConfigError(errors.RemBertError, ValueError):
  """An experiment YAML or override is invalid; the message names the field."""


# The two trainers' experiments, told apart by their sections: each kind ->
# (a section only its YAMLs have, the command that runs them).
PRETRAINING, FINETUNING = "pre-training", "fine-tuning"
_KINDS = {PRETRAINING: (("task",), "rembert-train"),
          FINETUNING: (("data", "encoder", "sweep"), "rembert-finetune")}


def experiment_kind(values: Dict[str, Any]) -> Optional[str]:
  """PRETRAINING or FINETUNING by the YAML's sections; None if it has
  only the shared ones (trainer / runtime)."""
  for kind, (sections, _) in _KINDS.items():
    if any(section in values for section in sections):
      return kind
  return None


def experiment_names(kind: Optional[str] = None):
  """The bare names of configs/experiments/, of one kind if given."""
  return sorted(p.stem for p in EXPERIMENT_CONFIG_DIR.glob("*.yaml")
                if kind is None or experiment_kind(read_yaml(str(p))) == kind)


class _NumberAwareLoader(yaml.SafeLoader):
  """YAML 1.1 reads `1e-3` (no dot) as a string; here it is a float, as in
  YAML 1.2 and JSON, so `initial_learning_rate=1e-3` is a number."""


_NumberAwareLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"""),
    list("-+0123456789"))


def load_yaml_text(text: str) -> Any:
  """yaml.safe_load, with exponent-form numbers (`1e-3`) read as floats."""
  return yaml.load(text, Loader=_NumberAwareLoader)  # nosec: a SafeLoader


def deep_merge(base: Dict[str, Any], update: Dict[str, Any]) -> Dict[str, Any]:
  out = copy.deepcopy(base)
  for key, value in (update or {}).items():
    if isinstance(value, dict) and isinstance(out.get(key), dict):
      out[key] = deep_merge(out[key], value)
    else:
      out[key] = copy.deepcopy(value)
  return out


def resolve_experiment_path(path: Union[str, os.PathLike],
                            kind: Optional[str] = None) -> str:
  """A YAML path, or a bare name of configs/experiments/ (`pretrain_tiny_demo`);
  with `kind`, the choices named are that trainer's own."""
  if fileio.isdir(path):
    raise ExperimentConfigError(
        f"--config_file {path}: a directory; give an experiment YAML file (e.g. "
        f"{fileio.join(path, 'experiment.yaml')}) or the bare name of one.")
  if fileio.exists(path):
    return fileio.as_str(path)
  named = EXPERIMENT_CONFIG_DIR / f"{path}.yaml"
  is_yaml_path = os.path.splitext(fileio.as_str(path))[1] in (".yaml", ".yml")
  if not is_yaml_path and named.exists():
    return str(named)
  available = ", ".join(experiment_names(kind))
  raise ExperimentConfigError(
      f"--config_file {path}: no such file. Give a YAML path or one of the "
      f"{kind + ' ' if kind else ''}experiments in {EXPERIMENT_CONFIG_DIR}: "
      f"{available}.")


def _check_kind(path, values: Dict[str, Any], kind: Optional[str]) -> None:
  """An experiment of the other trainer is named as such."""
  found = experiment_kind(values)
  if kind is None or found is None or found == kind:
    return
  name = os.path.splitext(fileio.basename(fileio.as_str(path)))[0]
  raise ExperimentConfigError(
      f"--config_file {path}: {name} is a {found} experiment: use "
      f"{_KINDS[found][1]} --config_file {path}; {_KINDS[kind][1]} runs the {kind}"
      f" ones ({', '.join(experiment_names(kind))}).")


def read_yaml(path) -> Dict[str, Any]:
  try:
    values = load_yaml_text(fileio.read_text(path)) or {}
  except yaml.YAMLError as e:
    raise ExperimentConfigError(
        f"{path} is not valid YAML ({' '.join(str(e).split())}); fix the "
        "file.") from None
  if not isinstance(values, dict):
    raise ExperimentConfigError(f"{path}: an experiment YAML must be a mapping "
                                "of its sections (task / trainer / runtime ...).")
  # A section whose fields are all commented out reads as None: no change.
  return {section: ({} if value is None else value)
          for section, value in values.items()}


def parse_override(params_override: Union[str, Dict[str, Any], None]
                   ) -> Dict[str, Any]:
  """`--params_override` (dotted `a.b=1,c=2`, YAML/JSON text or a YAML file) as a dict."""
  if not params_override:
    return {}
  if isinstance(params_override, dict):
    return params_override
  text = params_override
  try:
    text = params_dict.nested_csv_str_to_json_str(params_override)
  except ValueError:
    pass
  try:
    values = load_yaml_text(text)
  except yaml.YAMLError:
    values = None
  if not isinstance(values, dict):
    if fileio.exists(params_override):
      return read_yaml(params_override)
    raise ExperimentConfigError(
        f"--params_override {params_override!r}: expected comma-separated "
        "dotted keys (task.train_data.global_batch_size=64,trainer.train_steps=10), "
        "a YAML/JSON mapping, or a YAML file.")
  return values


def layered_values(config_files: Sequence[Union[str, os.PathLike]] = (),
                   params_override: Union[str, Dict[str, Any], None] = None,
                   kind: Optional[str] = None) -> Dict[str, Any]:
  """The YAML files (paths or bare names) in order, then the override; with
  `kind` (PRETRAINING / FINETUNING), a YAML of the other trainer is refused."""
  merged: Dict[str, Any] = {}
  for path in config_files:
    values = read_yaml(resolve_experiment_path(path, kind))
    _check_kind(path, values, kind)
    merged = deep_merge(merged, values)
  return deep_merge(merged, parse_override(params_override))


def _field_names(section: Any) -> Optional[list]:
  """The field names of a Model Garden config (None: not a config): its
  dataclass fields (a one-of config lists only the chosen one in `as_dict`)
  and any key it holds besides."""
  as_dict = getattr(section, "as_dict", None)
  if not callable(as_dict):
    return None
  names = list(as_dict())
  if dataclasses.is_dataclass(section):
    names += [f.name for f in dataclasses.fields(section)
              if not f.name.startswith("_") and f.name not in names]
  return names


def check_keys(config: Any, values: Dict[str, Any], source: str,
               prefix: str = "") -> None:
  """Every key of `values` (nested) is a field of `config`: an unknown one is
  named with the closest field, and a field given sub-keys as if it were a
  section (`data.languages.en=1`) is named with the form it takes."""
  names = _field_names(config)
  if names is None:
    return
  for key, value in values.items():
    dotted = f"{prefix}{key}"
    if key not in names:
      close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
      hint = (f"did you mean {prefix}{close[0]}?" if close else
              f"{prefix.rstrip('.') or 'the top level'} has "
              f"{', '.join(sorted(names))}.")
      raise ExperimentConfigError(
          f"{source}: {key!r} does not exist in "
          f"{prefix.rstrip('.') or 'the experiment'}; {hint}")
    field = getattr(config, key, None)
    if isinstance(value, dict) and value:
      if _field_names(field) is not None:
        check_keys(field, value, source, dotted + ".")
      elif not isinstance(field, dict) and _is_value_field(config, key, field):
        raise ExperimentConfigError(
            f"{source}: {dotted} is a field, not a section ({dotted}."
            f"{next(iter(value))} names nothing); set it whole, e.g. "
            f"{dotted}={_example(config, key, field, value)}.")


def _hint(config: Any, key: str) -> Any:
  try:
    return typing.get_type_hints(type(config)).get(key)
  except (NameError, TypeError):
    return None


def _is_list_hint(hint: Any) -> bool:
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  return typing.get_origin(hint) in (list, tuple) or any(
      typing.get_origin(a) in (list, tuple) for a in args)


def _is_value_field(config: Any, key: str, field: Any) -> bool:
  """A field that holds a value (a number, text, a list), not sub-fields."""
  if field is not None:
    return True
  hint = _hint(config, key)
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  return _is_list_hint(hint) or hint in _EXPECTED or hint is str or any(
      a in _EXPECTED or a is str for a in args)


def _example(config: Any, key: str, field: Any, value: Dict[str, Any]) -> str:
  if isinstance(field, (list, tuple)) or _is_list_hint(_hint(config, key)):
    return "[" + ",".join(map(str, value)) + "]"
  return repr(field)


# The field types checked. Text fields are not: some documented ones take a
# list as well (input_path: globs, comma-separated or a list).
_EXPECTED = {bool: "true or false", int: "an integer", float: "a number"}


def _type_matches(value: Any, annotation: Any) -> Optional[bool]:
  """Whether `value` fits a field annotation; None when the annotation is
  not one this check knows (it is then left to the code that reads it)."""
  if value is None:
    return True  # Model Garden's "not set"
  if annotation in _EXPECTED:
    if annotation is bool or isinstance(value, bool):
      return annotation is bool and isinstance(value, bool)
    return isinstance(value, (int, float) if annotation is float
                      else annotation)
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is typing.Union:
    fits = [_type_matches(value, a) for a in args if a is not type(None)]
    return None if None in fits or not fits else any(fits)
  if origin in (list, tuple):
    if not isinstance(value, (list, tuple)):
      return False
    return not args or all(_type_matches(v, args[0]) is not False
                           for v in value)
  return None


def _expected(annotation: Any) -> str:
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  if typing.get_origin(annotation) in (list, tuple):
    return "a list" + (f" of {_expected(args[0])}s".replace("an ", "").replace(
        "a ", "") if args and args[0] in _EXPECTED else "")
  if args:
    return " or ".join(_expected(a) for a in args)
  return _EXPECTED.get(annotation, str(annotation))


def check_field_types(config: Any, path: str = "") -> None:
  """Every field of the config holds a value of its declared type.

  Model Garden's `override` stores what it is given (`train_steps=abc` stays
  the string 'abc'), which fails far from the field: a TypeError in a
  comparison, or a TensorFlow error tens of lines long once the learning
  rate is a string. Checked here, the message names the field.
  """
  try:
    hints = typing.get_type_hints(type(config))
  except (NameError, TypeError):
    return
  for field in dataclasses.fields(config):
    value, name = getattr(config, field.name), f"{path}{field.name}"
    if dataclasses.is_dataclass(value):
      check_field_types(value, name + ".")
    elif (hints.get(field.name) in (float, Optional[float]) and
          isinstance(value, int) and not isinstance(value, bool)):
      # `initial_learning_rate=1` reads as an int, which TensorFlow's
      # schedules refuse to mix with float steps.
      setattr(config, field.name, float(value))
    elif _type_matches(value, hints.get(field.name)) is False:
      raise ExperimentConfigError(
          f"experiment config: {name} is {value!r}; it must be "
          f"{_expected(hints[field.name])}. Fix it in --config_file or "
          "--params_override.")

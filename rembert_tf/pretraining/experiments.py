"""Pre-training experiment configs: the registered default and the YAML loader.

Builds on Model Garden's `official.core.exp_factory` (the experiment
`rembert_pretraining` is registered there, like Model Garden's
`bert/pretraining`) and `official.modeling.optimization` (AdamW / LAMB,
linear warmup then polynomial decay).

An experiment YAML (`configs/experiments/*.yaml`) is a Model Garden
`ExperimentConfig` in YAML with one addition: `task.model_preset` names a
model preset of `configs/models/` (or a model YAML path). Loading resolves it:
the preset's fields are read first, then the fields under `task.model:` in
the YAML, then `--params_override`. The resolved config (with every model
field spelled out) is what the train command saves to `model_dir/params.yaml`.

```yaml
task:
  model_preset: tiny             # configs/models/tiny.yaml
  model: {hidden_dropout_prob: 0.0}   # optional field overrides
  train_data: {input_path: /data/records/train-*.tfrecord, global_batch_size: 32,
               seq_length: 128, max_predictions_per_seq: 20}
trainer: {train_steps: 300, optimizer_config: {...}}
```

Example:
```python
from rembert_tf.pretraining import experiments
config = experiments.load_experiment_config(
    ["pretrain_tiny_demo"],
    params_override="trainer.train_steps=50,task.model_preset=decoupled_in128")
```
"""
import copy
import dataclasses
import os
import re
import typing
from typing import Any, Dict, Optional, Sequence, Union

import yaml
from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import optimization
from official.modeling.hyperparams import params_dict

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import config_ranges
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.runtime import stop_checks

EXPERIMENT_NAME = "rembert_pretraining"
EXPERIMENT_CONFIG_DIR = rembert_config.CONFIG_ROOT / "experiments"

# BERT's convention: no weight decay on LayerNorm parameters and biases.
WEIGHT_DECAY_EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


class ExperimentConfigError(errors.RemBertError, ValueError):
  """An experiment YAML or override is invalid; the message names the field."""


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


@dataclasses.dataclass
class RemBertTrainerConfig(cfg.TrainerConfig):
  """Model Garden's TrainerConfig plus what RemBERT's runner adds.

  Attributes:
    encoder_export_every_n_checkpoints: write `encoder/ckpt-N` beside every
      Nth full checkpoint (and always beside the last one, and a preemption
      save); 1 exports at every checkpoint.
    stop_check_seconds: the host checks for a stop request (SIGTERM, a
      multi-worker preemption notice) about this often, also inside a loop of
      `steps_per_loop` steps: the device loop runs as many steps per call as
      take about this long (`runtime.stop_checks`).
    stop_check_steps: a fixed number of steps per device call instead
      (0: sized by `stop_check_seconds`).
    enable_async_checkpointing: full checkpoints and encoder exports are
      written by a background thread from a host copy of the variables
      (orbit's `enable_async_checkpointing`); training goes on while they
      are written. One host only (TPU, one or several local devices).
  """
  encoder_export_every_n_checkpoints: int = 1
  stop_check_seconds: float = stop_checks.DEFAULT_SECONDS
  stop_check_steps: int = 0
  enable_async_checkpointing: bool = False


def adamw_optimization(learning_rate: float = 1e-4, warmup_steps: int = 10000,
                       decay_steps: int = 1000000, weight_decay: float = 0.01,
                       clip_norm: float = 1.0) -> optimization.OptimizationConfig:
  """AdamW, linear warmup, linear decay to 0, decay off for LayerNorm/bias."""
  return optimization.OptimizationConfig({
      "optimizer": {
          "type": "adamw",
          "adamw": {
              "weight_decay_rate": weight_decay,
              "exclude_from_weight_decay": list(WEIGHT_DECAY_EXCLUDE),
              "beta_1": 0.9,
              "beta_2": 0.999,
              "epsilon": 1e-6,
              "gradient_clip_norm": clip_norm,
          },
      },
      "learning_rate": {
          "type": "polynomial",
          "polynomial": {
              "initial_learning_rate": learning_rate,
              "decay_steps": decay_steps,
              "end_learning_rate": 0.0,
              "power": 1.0,
          },
      },
      "warmup": {
          "type": "linear",
          "linear": {"warmup_steps": warmup_steps},
      },
  })


@exp_factory.register_config_factory(EXPERIMENT_NAME)
def rembert_pretraining() -> cfg.ExperimentConfig:
  """Decoupled MLM pre-training; model and data come from the YAML."""
  config = cfg.ExperimentConfig(
      task=masked_lm_task.RemBertPretrainTaskConfig(
          train_data=masked_lm_task.PretrainDataConfig(is_training=True),
          validation_data=masked_lm_task.PretrainDataConfig(
              is_training=False, drop_remainder=True)),
      trainer=RemBertTrainerConfig(
          train_steps=1000000,
          steps_per_loop=1000,
          summary_interval=1000,
          checkpoint_interval=5000,
          max_to_keep=5,
          validation_steps=-1,
          validation_interval=10000,
          # Non-finite losses stop the run (rembert_tf.pretraining.runner),
          # rather than Model Garden's restore-and-retry.
          recovery_max_trials=-1,
          optimizer_config=adamw_optimization()),
      # No strategy unless the YAML names one: the train command's
      # --strategy (one_device by default) chooses then.
      runtime=cfg.RuntimeConfig(mixed_precision_dtype="float32",
                                distribution_strategy=None),
      restrictions=[
          "task.train_data.is_training != None",
          "task.validation_data.is_training != None",
      ])
  return config


def _deep_merge(base: Dict[str, Any], update: Dict[str, Any]) -> Dict[str, Any]:
  out = copy.deepcopy(base)
  for key, value in (update or {}).items():
    if isinstance(value, dict) and isinstance(out.get(key), dict):
      out[key] = _deep_merge(out[key], value)
    else:
      out[key] = copy.deepcopy(value)
  return out


def resolve_experiment_path(path: Union[str, os.PathLike]) -> str:
  """A YAML path, or a bare name of configs/experiments/ (`pretrain_tiny_demo`)."""
  if fileio.exists(path):
    return fileio.as_str(path)
  named = EXPERIMENT_CONFIG_DIR / f"{path}.yaml"
  is_yaml_path = os.path.splitext(fileio.as_str(path))[1] in (".yaml", ".yml")
  if not is_yaml_path and named.exists():
    return str(named)
  available = ", ".join(sorted(p.stem for p in EXPERIMENT_CONFIG_DIR.glob("*.yaml")))
  raise ExperimentConfigError(
      f"--config {path}: no such file. Give a YAML path or one of the "
      f"experiments in {EXPERIMENT_CONFIG_DIR}: {available}.")


def _read_yaml(path) -> Dict[str, Any]:
  try:
    values = load_yaml_text(fileio.read_text(path)) or {}
  except yaml.YAMLError as e:
    raise ExperimentConfigError(
        f"{path} is not valid YAML ({' '.join(str(e).split())}); fix the "
        "file.") from None
  if not isinstance(values, dict):
    raise ExperimentConfigError(f"{path}: an experiment YAML must be a mapping "
                                "with task / trainer / runtime sections.")
  return values


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
      return _read_yaml(params_override)
    raise ExperimentConfigError(
        f"--params_override {params_override!r}: expected comma-separated "
        "dotted keys (task.train_data.global_batch_size=64,trainer.train_steps=10), "
        "a YAML/JSON mapping, or a YAML file.")
  return values


def load_experiment_config(
    config_files: Sequence[Union[str, os.PathLike]] = (),
    params_override: Union[str, Dict[str, Any], None] = None,
    experiment: str = EXPERIMENT_NAME) -> cfg.ExperimentConfig:
  """Registered defaults <- YAML files (in order) <- overrides; preset resolved."""
  merged: Dict[str, Any] = {}
  for path in config_files:
    merged = _deep_merge(merged, _read_yaml(resolve_experiment_path(path)))
  merged = _deep_merge(merged, parse_override(params_override))
  task_values = merged.get("task", {}) or {}
  preset = task_values.get("model_preset")
  if preset:
    preset_path = rembert_config.resolve_model_config_path(preset)
    model_values = dict(_read_yaml(preset_path))
    if "model" in model_values and len(model_values) == 1:
      model_values = model_values["model"]
    model_values.update(task_values.get("model") or {})
    rembert_config.model_config_from_dict(
        model_values, source=f"{preset_path} + task.model")  # names bad fields
    task_values["model"] = model_values
    merged["task"] = task_values
  elif task_values.get("model"):
    rembert_config.model_config_from_dict(task_values["model"],
                                          source="task.model")
  config = exp_factory.get_exp_config(experiment)
  try:
    config.override(merged, is_strict=True)
  except (KeyError, ValueError, AttributeError) as e:
    raise ExperimentConfigError(
        f"experiment config {list(map(str, config_files))} + overrides: {e}. "
        "Check the key against the ExperimentConfig fields (task / trainer / "
        "runtime; see docs/pretraining.md).") from None
  try:
    config.validate()
  except (KeyError, ValueError, AttributeError) as e:
    raise ExperimentConfigError(
        f"experiment config {list(map(str, config_files))} + overrides: "
        f"{' '.join(str(e).split())}. Fix the named fields.") from None
  check_field_types(config)
  out_of_range = config_ranges.first_out_of_range(config)
  if out_of_range:
    raise ExperimentConfigError(f"experiment config: {out_of_range} Fix it in "
                                "--config or --params_override.")
  config.task.model.validate()
  check_trainer_config(config.trainer)
  return config


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
          f"{_expected(hints[field.name])}. Fix it in --config or "
          "--params_override.")


def check_trainer_config(trainer: cfg.TrainerConfig) -> None:
  """The loop settings orbit / Model Garden refuse later with a traceback,
  refused here with the field names and the fix."""
  def fail(message):
    raise ExperimentConfigError(f"experiment config: {message}")

  if trainer.steps_per_loop is None or trainer.steps_per_loop <= 0:
    fail(f"trainer.steps_per_loop is {trainer.steps_per_loop}; it must be a "
         "positive number of steps (e.g. trainer.steps_per_loop=1000).")
  if trainer.train_steps is not None and trainer.train_steps <= 0:
    fail(f"trainer.train_steps is {trainer.train_steps}; it must be > 0.")
  if trainer.summary_interval and trainer.summary_interval > 0 and (
      trainer.summary_interval % trainer.steps_per_loop):
    fail(f"trainer.summary_interval ({trainer.summary_interval}) must be a "
         f"multiple of trainer.steps_per_loop ({trainer.steps_per_loop}); set "
         f"trainer.summary_interval={trainer.steps_per_loop} or a multiple.")
  if trainer.checkpoint_interval is not None and trainer.checkpoint_interval <= 0:
    fail(f"trainer.checkpoint_interval is {trainer.checkpoint_interval}; it "
         "must be > 0 (steps between checkpoints).")
  if trainer.max_to_keep is not None and trainer.max_to_keep <= 0:
    fail(f"trainer.max_to_keep is {trainer.max_to_keep}; keep at least 1 "
         "checkpoint (a resume needs one).")
  value = getattr(trainer, "encoder_export_every_n_checkpoints", 1)
  if value is None or value < 1:
    fail(f"trainer.encoder_export_every_n_checkpoints is {value}; it must be "
         ">= 1.")
  if getattr(trainer, "stop_check_steps", 0) < 0:
    fail(f"trainer.stop_check_steps is {trainer.stop_check_steps}; it must be "
         ">= 0 (0: calls sized by trainer.stop_check_seconds).")
  if getattr(trainer, "stop_check_seconds", 1.0) <= 0:
    fail(f"trainer.stop_check_seconds is {trainer.stop_check_seconds}; it "
         "must be > 0 (e.g. trainer.stop_check_seconds=1).")


def save_experiment_config(config: cfg.ExperimentConfig, path) -> None:
  """Writes the resolved experiment config as YAML (atomically)."""
  fileio.write_yaml(path, config.as_dict())

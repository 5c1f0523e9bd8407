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
    ["configs/experiments/pretrain_tiny_demo.yaml"],
    params_override="trainer.train_steps=50,task.model_preset=decoupled_in128")
```
"""
import copy
import os
import pathlib
from typing import Any, Dict, Sequence, Union

import yaml
from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import optimization
from official.modeling.hyperparams import params_dict

from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import masked_lm_task

EXPERIMENT_NAME = "rembert_pretraining"
EXPERIMENT_CONFIG_DIR = rembert_config.CONFIG_ROOT / "experiments"

# BERT's convention: no weight decay on LayerNorm parameters and biases.
WEIGHT_DECAY_EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


class ExperimentConfigError(ValueError):
  """An experiment YAML or override is invalid; the message names the field."""


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
      trainer=cfg.TrainerConfig(
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
      runtime=cfg.RuntimeConfig(mixed_precision_dtype="float32"),
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


def resolve_experiment_path(path: Union[str, os.PathLike]) -> pathlib.Path:
  """A YAML path, or a bare name of configs/experiments/ (`pretrain_tiny_demo`)."""
  candidate = pathlib.Path(path)
  if candidate.exists():
    return candidate
  named = EXPERIMENT_CONFIG_DIR / f"{path}.yaml"
  if candidate.suffix not in (".yaml", ".yml") and named.exists():
    return named
  available = ", ".join(sorted(p.stem for p in EXPERIMENT_CONFIG_DIR.glob("*.yaml")))
  raise ExperimentConfigError(
      f"--config {path}: no such file. Give a YAML path or one of the "
      f"experiments in {EXPERIMENT_CONFIG_DIR}: {available}.")


def _read_yaml(path: pathlib.Path) -> Dict[str, Any]:
  with open(path, encoding="utf-8") as f:
    values = yaml.safe_load(f) or {}
  if not isinstance(values, dict):
    raise ExperimentConfigError(f"{path}: an experiment YAML must be a mapping "
                                "with task / trainer / runtime sections.")
  return values


def _parse_override(params_override: Union[str, Dict[str, Any], None]
                    ) -> Dict[str, Any]:
  if not params_override:
    return {}
  if isinstance(params_override, dict):
    return params_override
  text = params_override
  try:
    text = params_dict.nested_csv_str_to_json_str(params_override)
  except ValueError:
    pass
  values = yaml.safe_load(text)
  if not isinstance(values, dict):
    path = pathlib.Path(params_override)
    if path.exists():
      return _read_yaml(path)
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
  merged = _deep_merge(merged, _parse_override(params_override))
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
        "runtime; see README 'Pre-training').") from None
  config.validate()
  config.task.model.validate()
  return config


def save_experiment_config(config: cfg.ExperimentConfig, path) -> None:
  """Writes the resolved experiment config as YAML (atomically)."""
  path = pathlib.Path(path)
  tmp = path.with_name(path.name + ".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    yaml.safe_dump(config.as_dict(), f, sort_keys=False)
  os.replace(tmp, path)

"""Pre-training experiment configs: `rembert_pretraining`, registered with
Model Garden's `exp_factory`, and its loader (on `runtime.experiment_files`).
`task.model_preset` names a model of `configs/models/` (or a model YAML)
read under every layer's `task.model:`. A number out of its range is one
line here (Model Garden's configs declare no ranges).

Example:
```python
from rembert_tf.pretraining import experiments
config = experiments.load_experiment_config(
    ["pretrain_tiny_demo"],
    params_override="trainer.train_steps=50,task.model_preset=decoupled_in128")
```
"""
import dataclasses
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from official.modeling import optimization

from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.runtime import experiment_files

EXPERIMENT_NAME = "rembert_pretraining"

# (field names, whether a value fits, what it must be), wherever the field
# sits; the first rule naming it applies; a name starting with `_` is a suffix.
RANGES = (
    (("initial_learning_rate", "learning_rate"), lambda v: v > 0,
     "above 0 (a learning rate, e.g. 1e-4)"),
    (("end_learning_rate", "warmup_learning_rate", "weight_decay_rate",
      "warmup_steps", "alpha", "offset", "gradient_clip_norm",
      "stop_check_steps"), lambda v: v >= 0, "at least 0"),
    (("epsilon", "clipnorm", "clipvalue", "global_clipnorm",
      "stop_check_seconds"), lambda v: v > 0, "above 0"),
    (("beta_1", "beta_2"), lambda v: 0 <= v < 1, "in [0, 1)"),
    (("_prob", "mask_token_rate", "random_token_rate", "dropout_rate"),
     lambda v: 0 <= v <= 1, "in [0, 1]"),
    (("global_batch_size", "seq_length", "max_predictions_per_seq",
      "decay_steps", "steps_per_loop", "train_steps", "cycle_length",
      "block_length", "shuffle_buffer_size", "num_shards",
      "checkpoint_interval", "max_to_keep",
      "encoder_export_every_n_checkpoints"), lambda v: v >= 1, "at least 1"),
)
# Fields the runner needs a value of (Model Garden's None is "not set").
_NEEDED = ("steps_per_loop", "encoder_export_every_n_checkpoints")


@dataclasses.dataclass
class RemBertTrainerConfig(cfg.TrainerConfig):
  """Model Garden's TrainerConfig plus what RemBERT's runner adds.

  Attributes:
    encoder_export_every_n_checkpoints: `encoder/ckpt-N` beside every Nth
      full checkpoint (and the last one).
    stop_check_seconds: a SIGTERM is seen about this often.
    stop_check_steps: a fixed number of steps per device call instead (0).
    enable_async_checkpointing: saves are written by a background thread
      while training goes on (one host).
  """
  encoder_export_every_n_checkpoints: int = 1
  stop_check_seconds: float = 1.0
  stop_check_steps: int = 0
  enable_async_checkpointing: bool = False


def adamw_optimization(learning_rate: float = 1e-4, warmup_steps: int = 10000,
                       decay_steps: int = 1000000, weight_decay: float = 0.01,
                       clip_norm: float = 1.0) -> optimization.OptimizationConfig:
  """AdamW, linear warmup, linear decay to 0, decay off for LayerNorm/bias
  (BERT's convention)."""
  return optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": weight_decay,
          "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"],
          "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6,
          "gradient_clip_norm": clip_norm}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": learning_rate, "decay_steps": decay_steps,
          "end_learning_rate": 0.0, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {"warmup_steps": warmup_steps}},
  })


@exp_factory.register_config_factory(EXPERIMENT_NAME)
def rembert_pretraining() -> cfg.ExperimentConfig:
  """Decoupled MLM pre-training; model and data come from the YAML."""
  return cfg.ExperimentConfig(
      task=masked_lm_task.RemBertPretrainTaskConfig(
          train_data=masked_lm_task.PretrainDataConfig(is_training=True),
          validation_data=masked_lm_task.PretrainDataConfig(
              is_training=False, drop_remainder=True)),
      trainer=RemBertTrainerConfig(
          train_steps=1000000, steps_per_loop=1000, summary_interval=1000,
          checkpoint_interval=5000, max_to_keep=5, validation_steps=-1,
          validation_interval=10000,
          # A non-finite loss stops the run (exit code 3), rather than Model
          # Garden's restore-and-retry.
          recovery_max_trials=-1,
          # --mode continuous_eval exits this long after the final checkpoint
          # (orbit checks for the end only once no checkpoint came as long).
          continuous_eval_timeout=60,
          optimizer_config=adamw_optimization()),
      # No strategy unless the YAML names one: --strategy chooses then.
      runtime=cfg.RuntimeConfig(mixed_precision_dtype="float32",
                                distribution_strategy=None),
      restrictions=["task.train_data.is_training != None",
                    "task.validation_data.is_training != None"])


def load_experiment_config(
    config_files: Sequence[Union[str, os.PathLike]] = (),
    params_override: Union[str, Dict[str, Any], None] = None,
    experiment: str = EXPERIMENT_NAME) -> cfg.ExperimentConfig:
  """Registered defaults <- YAML files (in order) <- overrides; preset resolved."""
  values = experiment_files.layered_values(config_files, params_override,
                                          experiment_files.PRETRAINING)
  task = values.get("task") or {}
  if task.get("model_preset") or task.get("model"):
    model, source = {}, "task.model"
    if task.get("model_preset"):
      path = rembert_config.resolve_model_config_path(task["model_preset"])
      model, source = experiment_files.read_yaml(path), f"{path} + task.model"
      model = model["model"] if list(model) == ["model"] else model
    model.update(task.get("model") or {})
    rembert_config.model_config_from_dict(model, source)  # names bad fields
    values["task"] = dict(task, model=model)
  config = experiment_files.build(experiment, values)
  problem = first_out_of_range(config)
  if problem:
    raise experiment_files.ExperimentConfigError(
        f"experiment config: {problem} Fix it in --config_file or "
        "--params_override.")
  every, loop = config.trainer.summary_interval, config.trainer.steps_per_loop
  if (every or 0) > 0 and every % loop:
    raise experiment_files.ExperimentConfigError(
        f"experiment config: trainer.summary_interval ({every}) must be a "
        f"multiple of trainer.steps_per_loop ({loop}); set "
        f"trainer.summary_interval={loop} or a multiple.")
  return config


def first_out_of_range(config: Any, path: str = "") -> Optional[str]:
  """`FIELD is VALUE; it must be RANGE.` for the first field of the config
  (nested too) out of its range, or None; nan and inf are out of all."""
  fields = dataclasses.fields(config)
  if isinstance(config, hyperparams.OneOfConfig):
    fields = [f for f in fields if f.name == config.type]
  for field in fields:
    value, name = getattr(config, field.name), f"{path}{field.name}"
    found = None
    if dataclasses.is_dataclass(value):
      found = first_out_of_range(value, name + ".")
    elif value is None and field.name in _NEEDED:
      found = f"{name} is None; it must be at least 1."
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
      rule = next(((fits, wanted) for names, fits, wanted in RANGES
                   if any(field.name == n or (n.startswith("_")
                                               and field.name.endswith(n))
                          for n in names)), None)
      if not math.isfinite(value):
        found = f"{name} is {value!r}; it must be a finite number."
      elif rule and not rule[0](value):
        found = f"{name} is {value!r}; it must be {rule[1]}."
    if found:
      return found
  return None


def data_sections(config: cfg.ExperimentConfig, mode: str
                  ) -> List[Tuple[str, Any]]:
  """(field name, data config) of the data `mode` reads."""
  sections = [("task.train_data", config.task.train_data)] if (
      "train" in mode) else []
  if "eval" in mode:
    sections.append(("task.validation_data", config.task.validation_data))
  return sections

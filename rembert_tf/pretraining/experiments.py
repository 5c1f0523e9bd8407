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
import dataclasses
import os
from typing import Any, Dict, List, Sequence, Tuple, Union

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import optimization

from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import config_ranges
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.pretraining import pretraining_errors
from rembert_tf.runtime import experiment_files
from rembert_tf.runtime import stop_checks

EXPERIMENT_NAME = "rembert_pretraining"

# BERT's convention: no weight decay on LayerNorm parameters and biases.
WEIGHT_DECAY_EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


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
          # --mode continuous_eval exits this long after the final checkpoint
          # (orbit checks for the end only once no checkpoint came as long).
          continuous_eval_timeout=60,
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


# Where an experiment's keys come from, for the line naming a wrong one.
_SOURCE = "--config_file / --params_override"


def load_experiment_config(
    config_files: Sequence[Union[str, os.PathLike]] = (),
    params_override: Union[str, Dict[str, Any], None] = None,
    experiment: str = EXPERIMENT_NAME) -> cfg.ExperimentConfig:
  """Registered defaults <- YAML files (in order) <- overrides; preset resolved."""
  merged = experiment_files.layered_values(config_files, params_override,
                                          experiment_files.PRETRAINING)
  task_values = merged.get("task", {}) or {}
  preset = task_values.get("model_preset")
  if preset:
    preset_path = rembert_config.resolve_model_config_path(preset)
    model_values = dict(experiment_files.read_yaml(preset_path))
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
  experiment_files.check_keys(config, merged, _SOURCE)
  try:
    config.override(merged, is_strict=True)
  except (KeyError, ValueError, AttributeError) as e:
    raise experiment_files.ExperimentConfigError(
        f"experiment config {list(map(str, config_files))} + overrides: {e}. "
        "Check the key against the ExperimentConfig fields (task / trainer / "
        "runtime; see docs/pretraining.md).") from None
  try:
    config.validate()
  except (KeyError, ValueError, AttributeError) as e:
    raise experiment_files.ExperimentConfigError(
        f"experiment config {list(map(str, config_files))} + overrides: "
        f"{' '.join(str(e).split())}. Fix the named fields.") from None
  experiment_files.check_field_types(config)
  out_of_range = config_ranges.first_out_of_range(config)
  if out_of_range:
    raise experiment_files.ExperimentConfigError(
        f"experiment config: {out_of_range} Fix it in --config_file or "
        "--params_override.")
  config.task.model.validate()
  check_trainer_config(config.trainer)
  return config


def check_trainer_config(trainer: cfg.TrainerConfig) -> None:
  """The loop settings orbit / Model Garden refuse later with a traceback
  (a number out of its range: `config_ranges`; no loop length; summaries
  between loop ends), refused here with the field names and the fix."""
  problem = config_ranges.first_out_of_range(trainer, "trainer.")
  for name in ("steps_per_loop", "encoder_export_every_n_checkpoints"):
    if not problem and getattr(trainer, name, 1) is None:
      problem = f"trainer.{name} is None; it must be at least 1."
  if not problem and trainer.summary_interval and (
      trainer.summary_interval > 0) and (
          trainer.summary_interval % trainer.steps_per_loop):
    problem = (
        f"trainer.summary_interval ({trainer.summary_interval}) must be a "
        f"multiple of trainer.steps_per_loop ({trainer.steps_per_loop}); set "
        f"trainer.summary_interval={trainer.steps_per_loop} or a multiple.")
  if problem:
    raise experiment_files.ExperimentConfigError(
        f"experiment config: {problem}")


def check_async_checkpointing(config: cfg.ExperimentConfig,
                              multi_worker: bool) -> None:
  """Asynchronous checkpoints are written from one host; a multi-worker job
  has every worker join each save."""
  if config.trainer.enable_async_checkpointing and multi_worker:
    raise pretraining_errors.PretrainingError(
        "trainer.enable_async_checkpointing=true writes checkpoints from one "
        "host; under --strategy multi_worker_mirrored every worker joins each "
        "save. Set trainer.enable_async_checkpointing=false for this job.")


def data_sections(config: cfg.ExperimentConfig, mode: str
                  ) -> List[Tuple[str, Any]]:
  """(field name, data config) of the data `mode` reads."""
  sections = []
  if "train" in mode:
    sections.append(("task.train_data", config.task.train_data))
  if "eval" in mode:
    sections.append(("task.validation_data", config.task.validation_data))
  return sections

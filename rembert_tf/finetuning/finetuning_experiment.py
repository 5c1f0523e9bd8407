"""The fine-tuning experiment: its settings, defined once, and each run's Model Garden config.

Builds on Model Garden's `exp_factory` (registers `rembert_finetuning`),
`hyperparams`, `ExperimentConfig` and `optimization` (AdamW, linear warmup
and decay). `FinetuningExperimentConfig` holds a whole `rembert-finetune`
sweep (`data`, `encoder`, `sweep`, `trainer`, `runtime`); each run is the
base `trainer` plus its overrides (`run_overrides`).

Example:
```python
from rembert_tf.finetuning import finetuning_experiment
config = finetuning_experiment.load_finetuning_config(
    ["xtreme_xnli"], "sweep.learning_rates=[1e-5,3e-5],sweep.num_seeds=2")
config.data.task, len(finetuning_experiment.run_overrides(config))  # ('xnli', 4)
```
"""
import dataclasses
import math
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from official.modeling import optimization

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.finetuning import finetuning_task
from rembert_tf.runtime import experiment_files

EXPERIMENT_NAME = "rembert_finetuning"


class FinetuningError(errors.RemBertError, ValueError):
  """A fine-tuning run cannot start; the message names the cause and the fix."""


@dataclasses.dataclass
class FinetuningConfig(hyperparams.Config):
  """Hyper-parameters of one fine-tuning run (paper: batch 32, swept rate)."""
  learning_rate: float = 2e-5
  num_train_epochs: float = 3.0
  num_train_steps: Optional[int] = None  # overrides epochs when set
  warmup_proportion: float = 0.1
  train_batch_size: int = 32
  eval_batch_size: int = 32
  weight_decay_rate: float = 0.01
  seed: int = 0
  steps_per_loop: int = 100
  checkpoint_interval: int = 1000
  # XLA for the training and prediction steps; None: what is faster on the
  # strategy's devices (`runtime.strategies.jit_compile_default`).
  jit_compile: Optional[bool] = None
  deterministic: bool = False
  keep_checkpoints: bool = False
  freeze_input_embeddings: bool = False
  n_best_size: int = 20
  max_answer_length: int = 30


@dataclasses.dataclass
class FinetuningDataConfig(hyperparams.Config):
  """The task and its records: `records_dir`, or records written from
  `data_dir` (XTREME download/) or TFDS (`data_source: tfds`)."""
  task: Optional[str] = None
  records_dir: Optional[str] = None
  data_dir: Optional[str] = None
  data_source: str = "download"
  tfds_data_dir: Optional[str] = None
  sentencepiece_model: Optional[str] = None  # default: the checkpoint's
  languages: Optional[List[str]] = None      # default: all present
  seq_length: Optional[int] = None
  splits: List[str] = dataclasses.field(default_factory=lambda: ["dev", "test"])
  allow_unlabelled_dev: bool = False
  allow_sentencepiece_mismatch: bool = False


@dataclasses.dataclass
class FinetuningEncoderConfig(hyperparams.Config):
  """The encoder a run starts from: a checkpoint, or random weights of `model_config`."""
  init_checkpoint: Optional[str] = None
  model_config: Optional[str] = None


@dataclasses.dataclass
class FinetuningSweepConfig(hyperparams.Config):
  """The runs: each rate x `num_seeds` seeds from trainer.seed (no rates: trainer.learning_rate)."""
  learning_rates: List[float] = dataclasses.field(default_factory=list)
  num_seeds: int = 1
  compare_paper: bool = False  # the paper's averages beside the results


@dataclasses.dataclass
class FinetuningExperimentConfig(hyperparams.Config):
  """A whole fine-tuning sweep; `rembert-finetune`'s flags are aliases of its fields."""
  data: FinetuningDataConfig = dataclasses.field(
      default_factory=FinetuningDataConfig)
  encoder: FinetuningEncoderConfig = dataclasses.field(
      default_factory=FinetuningEncoderConfig)
  sweep: FinetuningSweepConfig = dataclasses.field(
      default_factory=FinetuningSweepConfig)
  trainer: FinetuningConfig = dataclasses.field(
      default_factory=FinetuningConfig)
  runtime: cfg.RuntimeConfig = dataclasses.field(
      default_factory=lambda: cfg.RuntimeConfig(
          distribution_strategy=None, mixed_precision_dtype=None))


@exp_factory.register_config_factory(EXPERIMENT_NAME)
def rembert_finetuning() -> FinetuningExperimentConfig:
  """Fine-tuning on English, zero-shot evaluation of every language."""
  return FinetuningExperimentConfig()


def load_finetuning_config(
    config_files: Sequence[Union[str, os.PathLike]] = (),
    params_override: Union[str, Dict[str, Any], None] = None,
    source: str = experiment_files.SOURCE) -> FinetuningExperimentConfig:
  """Registered defaults <- YAML files <- overrides (as `--params_override`
  takes them, or a dict, nested or with dotted keys)."""
  return experiment_files.build(
      EXPERIMENT_NAME, experiment_files.layered_values(
          config_files, params_override, experiment_files.FINETUNING), source)


def run_overrides(config: FinetuningExperimentConfig) -> List[Dict[str, Any]]:
  """One `trainer` override per run: each rate x `num_seeds` seeds from trainer.seed."""
  rates = list(config.sweep.learning_rates) or [config.trainer.learning_rate]
  return [{"learning_rate": rate, "seed": config.trainer.seed + index}
          for rate in rates for index in range(config.sweep.num_seeds)]


def check_settings(experiment: FinetuningExperimentConfig) -> None:
  """Refuses unusable settings before any work, naming the flag to fix."""
  def fail(flag, value, rule):
    raise errors.UsageError(f"{flag} {value}: {rule}.")

  config, num_seeds = experiment.trainer, experiment.sweep.num_seeds
  if experiment.data.task not in xtreme_tasks.FINETUNING_TASKS:
    fail("--task (data.task)", experiment.data.task, "give one of "
         f"{', '.join(xtreme_tasks.FINETUNING_TASKS)} (or --config_file xtreme_xnli)")
  for rate in list(experiment.sweep.learning_rates) or [config.learning_rate]:
    if isinstance(rate, bool) or not (isinstance(rate, numbers.Real)
                                      and math.isfinite(rate) and rate > 0):
      fail("--learning_rate(s)", rate,
           "a learning rate must be a positive number (e.g. 2e-5)")
  if num_seeds < 1:
    fail("--num_seeds", num_seeds, "give at least 1 run per rate")
  if config.num_train_steps is not None and config.num_train_steps < 1:
    fail("--num_train_steps", config.num_train_steps, "train at least 1 step, "
         "or leave it out to train --num_train_epochs epochs")
  if config.num_train_steps is None and not config.num_train_epochs > 0:
    fail("--num_train_epochs", config.num_train_epochs, "must be > 0")
  if not 0 <= config.warmup_proportion <= 1:
    fail("--warmup_proportion", config.warmup_proportion,
         "must lie in [0, 1] (a share of the training steps)")
  for flag in ("train_batch_size", "eval_batch_size", "steps_per_loop",
               "checkpoint_interval"):
    if getattr(config, flag) < 1:
      fail(f"--{flag}", getattr(config, flag), "must be at least 1")


def num_train_steps(meta: Dict, config: FinetuningConfig) -> int:
  """`num_train_steps`, or the epochs over the English training records."""
  if config.num_train_steps:
    return config.num_train_steps
  num_features = meta["splits"]["train"]["en"]["num_features"]
  return max(1, math.ceil(num_features * config.num_train_epochs /
                          config.train_batch_size))


def optimizer_config(config: FinetuningConfig, num_steps: int
                     ) -> optimization.OptimizationConfig:
  """AdamW (no decay on LayerNorm and biases), linear warmup and decay."""
  return optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": config.weight_decay_rate, "epsilon": 1e-6,
          "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"]}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": config.learning_rate,
          "decay_steps": num_steps, "end_learning_rate": 0.0, "power": 1.0}},
      "warmup": {"type": "linear", "linear": {
          "warmup_steps": int(config.warmup_proportion * num_steps)}}})


def experiment_config(meta: Dict, records_dir: str, model_config,
                      config: FinetuningConfig) -> cfg.ExperimentConfig:
  """The Model Garden experiment of one run of the sweep (train mode only)."""
  steps = num_train_steps(meta, config)
  steps_per_loop = max(1, min(config.steps_per_loop, steps))
  train_file = meta["splits"]["train"]["en"]["file"]
  task = finetuning_task.FinetuningTaskConfig(
      model=model_config, task_type=meta["task_type"],
      num_labels=max(len(meta["labels"]), 1), jit_compile=config.jit_compile,
      freeze_input_embeddings=config.freeze_input_embeddings,
      train_data=finetuning_task.FinetuningDataConfig(
          input_path=fileio.join(records_dir, train_file),
          global_batch_size=config.train_batch_size,
          seq_length=meta["seq_length"], seed=config.seed, is_training=True))
  trainer = cfg.TrainerConfig(
      train_steps=steps, steps_per_loop=steps_per_loop,
      summary_interval=steps_per_loop,
      checkpoint_interval=max(1, config.checkpoint_interval), max_to_keep=2,
      optimizer_config=optimizer_config(config, steps))
  return cfg.ExperimentConfig(task=task, trainer=trainer)

"""One fine-tuning run's settings and the Model Garden experiment built from them.

Builds on Model Garden: `official.core.config_definitions.ExperimentConfig`
(what `train_lib` / orbit run) and `official.modeling.optimization` (AdamW
with weight decay, linear warmup, linear decay to 0). The paper fine-tunes
with batch 32 and a learning rate swept per task (`sweep`).

Example:
<!-- snippet: not run: needs fine-tuning records and a checkpoint -->
```python
from rembert_tf.finetuning import finetuning_data, finetuning_experiment
meta = finetuning_data.read_metadata("records/xnli")
config = finetuning_experiment.FinetuningConfig(learning_rate=3e-5)
experiment = finetuning_experiment.experiment_config(
    meta, "records/xnli", model_config, config)
experiment.trainer.train_steps    # 3 epochs of the English training records
```
"""
import dataclasses
import math
import numbers
from typing import Dict, Optional, Sequence

from official.core import config_definitions as cfg
from official.modeling import hyperparams
from official.modeling import optimization

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.finetuning import finetuning_task


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


def check_settings(config: FinetuningConfig, learning_rates: Sequence[float],
                   num_seeds: int) -> None:
  """The settings of a sweep, refused before any work with the flag to fix.

  Model Garden would take them and fail mid-run (a batch of 0: a TensorFlow
  error) or run to the end on a meaningless setting (a negative rate; 0
  steps, read as "use the epochs").
  """
  def fail(flag, value, rule):
    raise errors.UsageError(f"{flag} {value}: {rule}.")

  for rate in learning_rates:
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
  """The Model Garden experiment of one run (train mode only)."""
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

"""`finetune`: `run_finetuning` on the fine-tuning experiment, with its fields
named as keyword arguments without their section (`num_train_steps=2` is
`trainer.num_train_steps`; the sections' field names do not repeat)."""
import os

from official.core import exp_factory

from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.finetuning import finetuning_runner


def config(task: str, **fields) -> finetuning_experiment.FinetuningExperimentConfig:
  """The experiment with data.task = `task` and `fields` set."""
  default = exp_factory.get_exp_config(finetuning_experiment.EXPERIMENT_NAME)
  section = {name: part for part in ("data", "encoder", "sweep", "trainer")
             for name in getattr(default, part).as_dict()}
  def plain(value):
    if isinstance(value, os.PathLike):
      return os.fspath(value)
    return list(value) if isinstance(value, tuple) else value
  overrides = {f"{section[k]}.{k}": plain(v) for k, v in fields.items()}
  return finetuning_experiment.load_finetuning_config(
      params_override=dict(overrides, **{"data.task": task}))


def finetune(task: str, output_dir, progress=print, overwrite=False,
             **fields):
  """`run_finetuning` of `config(task, **fields)` into `output_dir`."""
  return finetuning_runner.run_finetuning(config(task, **fields), output_dir,
                                          progress=progress,
                                          overwrite=overwrite)

"""XTREME fine-tuning: data creation, task types, the Model Garden task, the sweep.

Modules:
* `tasks`: where each XTREME task's files live and which task type it is;
* `task_types`: the registry of task types (data, head, loss, metrics,
  record spec, prediction writer), the one place that differs per type;
* `finetuning_data`: XTREME `download/` files -> TFRecords;
* `finetuning_task`: the `base_task.Task` that `train_lib` / orbit run;
* `finetuning_runner`: the sweep (rates x seeds), checkpoints and resume,
  predictions in the benchmark layout, results.

Entry points:
* `rembert_tf.finetuning.finetuning_data.create_finetuning_data(...)`
* `rembert_tf.finetuning.run_finetuning(task, output_dir, init_checkpoint=...,
  records_dir=... | data_dir=..., ...) -> results dict` (lazy import of
  `finetuning_runner`; the demo calls it).
"""


def run_finetuning(*args, **kwargs):
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  return finetuning_runner.run_finetuning(*args, **kwargs)

"""XTREME fine-tuning: data creation, task heads, training, prediction.

Entry points:
* `rembert_tf.finetuning.finetuning_data.create_finetuning_data(...)`
* `rembert_tf.finetuning.run_finetuning(task, records_dir, init_checkpoint,
  output_dir, ...) -> results dict` (lazy import of `finetuning_runner`).
* `rembert_tf.finetuning.demo_xnli.write_demo_xnli(...)`
"""


def run_finetuning(*args, **kwargs):
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  return finetuning_runner.run_finetuning(*args, **kwargs)

"""XTREME fine-tuning: task records, the Model Garden task and the sweep.

Entry points: `finetuning_data.create_finetuning_data` (the records of a
task) and `finetuning_runner.run_finetuning` (a sweep of learning rates x
seeds, on Model Garden's `train_lib` / orbit).
"""


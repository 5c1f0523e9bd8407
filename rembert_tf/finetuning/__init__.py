"""XTREME fine-tuning: the Model Garden task, the sweep (`finetuning_runner.run_finetuning`)."""

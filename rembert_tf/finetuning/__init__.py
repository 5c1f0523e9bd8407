"""XTREME fine-tuning: the Model Garden task and the sweep (`finetuning_runner`)."""

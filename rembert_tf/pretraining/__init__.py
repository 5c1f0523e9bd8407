"""RemBERT pre-training on Model Garden: the task, experiment, `runner.run`."""

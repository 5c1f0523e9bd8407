"""RemBERT pre-training on Model Garden: the task, the experiment, `runner.run`."""

"""RemBERT pre-training on Model Garden: the Task (`masked_lm_task`), the
registered experiment and its loader (`experiments`), `runner.run` (one
experiment on Model Garden's runner), what a model_dir holds and its checks
(`model_directory`), the trainer and orbit actions (`training_loop`) and the
errors that stop a run (`pretraining_errors`).

The package imports nothing, so a light module of it does not load the trainer:
<!-- snippet: not run: pre-trains (minutes on a CPU) -->
```python
from rembert_tf.pretraining import experiments, runner
config = experiments.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"], "trainer.train_steps=100")
metrics = runner.run(config, "/tmp/pretrain", mode="train_and_eval")
```
"""

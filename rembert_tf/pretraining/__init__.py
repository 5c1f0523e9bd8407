"""RemBERT pre-training on Model Garden: the Task, experiment configs and the runner.

| module | what it holds |
| --- | --- |
| `masked_lm_task` | the Model Garden Task (inputs, MLM loss, train step) |
| `experiments` | the registered experiment and the YAML / override loader |
| `runner` | `run`: one experiment, as named steps |
| `model_directory` | what a run's model_dir holds, its checks before the first step (an input, writable, its checkpoint, its SentencePiece model) and the artefacts written beside its checkpoints; the records are checked by the input pipeline |
| `training_loop` | the trainer and the orbit actions Model Garden's runner drives (saves, stops, console lines) |
| `pretraining_errors` | what stops a run, one line each |

Entry points (see `runner.run` for the metrics it returns); the package
imports nothing, so a light module of it does not load the trainer:
```python
from rembert_tf.pretraining import experiments, runner
config = experiments.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"], "trainer.train_steps=100")
metrics = runner.run(config, "/tmp/pretrain", mode="train_and_eval",
                     strategy="one_device")
```
"""

"""RemBERT pre-training on Model Garden: the Task, experiment configs and the runner.

Public entry points (see `runner.run` for the metrics it returns):
```python
from rembert_tf import pretraining
config = pretraining.load_experiment_config(
    ["configs/experiments/pretrain_tiny_demo.yaml"], "trainer.train_steps=100")
metrics = pretraining.run(config, "/tmp/pretrain", mode="train_and_eval",
                          strategy="one_device")
```
"""
from rembert_tf.pretraining.experiments import EXPERIMENT_NAME
from rembert_tf.pretraining.experiments import ExperimentConfigError
from rembert_tf.pretraining.experiments import load_experiment_config
from rembert_tf.pretraining.masked_lm_task import RemBertPretrainTask
from rembert_tf.pretraining.masked_lm_task import RemBertPretrainTaskConfig
from rembert_tf.pretraining.runner import CheckpointMismatchError
from rembert_tf.pretraining.runner import CorruptRecordsError
from rembert_tf.pretraining.runner import NonFiniteLossError
from rembert_tf.pretraining.runner import PretrainingError
from rembert_tf.pretraining.runner import TokenizerMismatchError
from rembert_tf.pretraining.runner import TrainingPreempted
from rembert_tf.pretraining.runner import make_strategy
from rembert_tf.pretraining.runner import run

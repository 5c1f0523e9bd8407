"""RemBERT pre-training on Model Garden: the Task, experiment configs and the runner.

| module | what it holds |
| --- | --- |
| `masked_lm_task` | the Model Garden Task (inputs, MLM loss, train step) |
| `experiments` | the registered experiment and the YAML / override loader |
| `runner` | `run`: one experiment, as named steps |
| `model_directory` | what a run's model_dir holds, its checks before the first step (an input, writable, its checkpoint, its SentencePiece model) and the artefacts written beside its checkpoints; the records are checked by the input pipeline |
| `training_loop` | the trainer and the orbit actions Model Garden's runner drives (saves, stops, console lines) |
| `pretraining_errors` | what stops a run, one line each |

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
from rembert_tf.runtime.experiment_files import ExperimentConfigError
from rembert_tf.pretraining.experiments import load_experiment_config
from rembert_tf.pretraining.masked_lm_task import RemBertPretrainTask
from rembert_tf.pretraining.masked_lm_task import RemBertPretrainTaskConfig
from rembert_tf.pretraining.model_directory import holds_a_run
from rembert_tf.pretraining.pretraining_errors import CheckpointMismatchError
from rembert_tf.pretraining.pretraining_errors import CorruptRecordsError
from rembert_tf.pretraining.pretraining_errors import LostPeerError
from rembert_tf.pretraining.pretraining_errors import NonFiniteLossError
from rembert_tf.pretraining.pretraining_errors import PretrainingError
from rembert_tf.pretraining.pretraining_errors import TokenizerMismatchError
from rembert_tf.pretraining.pretraining_errors import TrainingPreempted
from rembert_tf.pretraining.runner import run

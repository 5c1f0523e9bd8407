"""`--config` and `--params_override`: the experiment flags of `rembert-train`
and `rembert-finetune`, defined once (absl keeps one flag registry per process
and a name can be defined only once in it; the ablation suite loads both
commands into one process).

As in Model Garden's `official/nlp/train.py`: the registered experiment's
defaults, then each --config YAML in order, then --params_override
(`runtime.experiment_files.layered_values`).

Example (a command module):
```python
from absl import flags
from rembert_tf.cli import experiment_flags
flags.adopt_module_key_flags(experiment_flags)
# flags.FLAGS.config: a list of YAMLs / names; flags.FLAGS.params_override
```
"""
from absl import flags

flags.DEFINE_multi_string(
    "config", None,
    "Experiment YAML (configs/experiments/NAME.yaml or a bare NAME); repeat to "
    "layer several files, later ones win.")
flags.DEFINE_string(
    "params_override", None,
    "Dotted overrides applied after --config, e.g. "
    "'trainer.train_steps=1000,task.train_data.global_batch_size=64' "
    "(rembert-finetune: 'trainer.warmup_proportion=0.2,sweep.num_seeds=3'), "
    "or a YAML/JSON mapping or file.")

"""The experiment flags of `rembert-train` and `rembert-finetune`: Model
Garden's own (`official.common.flags.define_flags`: --experiment,
--config_file (repeated), --params_override, --mode, --model_dir, --tpu),
defined once per process (the ablation suite loads both commands into one).

The layering is Model Garden's `train.py`'s: the registered experiment's
defaults, then each --config_file YAML in order (a bare NAME is
configs/experiments/NAME.yaml), then --params_override
(`runtime.experiment_files.layered_values`). `--config` is the project's
older name of --config_file: an alias (`flag_names.DEPRECATED_FLAGS`).

Example (a command module):
```python
from absl import flags
from rembert_tf.cli import experiment_flags
flags.adopt_module_key_flags(experiment_flags)
# flags.FLAGS.config_file: a list of YAMLs / names; flags.FLAGS.params_override
```
"""
from absl import flags
from official.common import flags as tfm_flags

tfm_flags.define_flags()
# What the trainers list under --help (Model Garden defines a few more).
for _name in ("experiment", "config_file", "params_override", "mode",
              "model_dir", "tpu"):
  flags.declare_key_flag(_name)

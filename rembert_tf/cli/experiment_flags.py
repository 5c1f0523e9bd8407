"""The trainers' experiment flags: Model Garden's (`official.common.flags`:
--experiment, --config_file, --params_override, --mode, --model_dir, --tpu),
defined once per process (the ablation suite loads both trainers into one).
The YAMLs layer as in Model Garden's `train.py`: the registered defaults, each
--config_file in order (a bare NAME: configs/experiments/NAME.yaml), then
--params_override (`runtime.experiment_files.layered_values`).

Example: `flags.adopt_module_key_flags(experiment_flags)` in a trainer.
"""
from absl import flags
from official.common import flags as tfm_flags

tfm_flags.define_flags()
# What the trainers list under --help (Model Garden defines a few more).
for _name in ("experiment", "config_file", "params_override", "mode",
              "model_dir", "tpu"):
  flags.declare_key_flag(_name)

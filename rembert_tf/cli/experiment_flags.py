"""The trainers' experiment flags, Model Garden's (`official.common.flags`:
--experiment, --config_file, --params_override, --mode, --model_dir, --tpu),
defined once per process (the ablation suite loads both trainers into one).
"""
from absl import flags
from official.common import flags as tfm_flags

tfm_flags.define_flags()
# What the trainers list under --help (Model Garden defines a few more).
for _name in ("experiment", "config_file", "params_override", "mode",
              "model_dir", "tpu"):
  flags.declare_key_flag(_name)

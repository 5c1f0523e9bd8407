"""Where a command reads XTREME's examples: `--data_source` and `--tfds_data_dir`, defined once.

`rembert-create-finetuning-data`, `rembert-finetune` and `rembert-retrieve`
read the benchmark from XTREME's `download/` folder (their own `--data_dir`)
or from TensorFlow Datasets prepared in `--tfds_data_dir` (`tfds_flags`).
absl defines a name once per process, so each command adopts these flags.

Example (a command module):
```python
from absl import flags
from rembert_tf.cli import xtreme_source_flags
flags.adopt_module_key_flags(xtreme_source_flags)
FLAGS = flags.FLAGS
# FLAGS.data_source: "download" or "tfds"; FLAGS.tfds_data_dir: a folder
```
"""
from absl import flags

from rembert_tf.cli import tfds_flags
from rembert_tf.evaluation import xtreme_tasks  # light: no TensorFlow

flags.adopt_module_key_flags(tfds_flags)  # --tfds_data_dir, for tfds

flags.DEFINE_enum(
    "data_source", "download", list(xtreme_tasks.DATA_SOURCES),
    "Where the examples come from: XTREME's download/ folder (--data_dir) or "
    "TFDS datasets prepared in --tfds_data_dir (tfds).")

"""`--tfds_data_dir`, defined once for every command that reads prepared TensorFlow Datasets.

Example (a flag module):
```python
from absl import flags
from rembert_tf.cli import tfds_flags
flags.adopt_module_key_flags(tfds_flags)
# flags.FLAGS.tfds_data_dir: a local or gs:// folder, or None (TFDS's default)
```
"""
from absl import flags

flags.DEFINE_string(
    "tfds_data_dir", None, "The folder the TFDS datasets are prepared in "
    "(`tfds build NAME --data_dir DIR`; local or gs://); nothing is "
    "downloaded. Default: TFDS's own, $TFDS_DATA_DIR or "
    "~/tensorflow_datasets.")

"""`--tfds_data_dir`, defined once for every command that reads prepared TensorFlow Datasets.

The corpus commands (`text_input_flags`: `tfds:` inputs) and the XTREME
commands (`xtreme_source_flags`: `--data_source tfds`) read TFDS from the
same kind of folder; absl keeps one flag registry per process, so the flag
lives here and both flag modules adopt it (a command adopting either lists it
under `--help`).

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

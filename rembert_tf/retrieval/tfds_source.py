"""BUCC 2018 and Tatoeba from TensorFlow Datasets prepared in a folder: a `bitext.BitextSource`.

Reads with `data.xtreme_tfds.retrieval_sides` (prepared data only):
bucc2018 dev and test from `bucc/bucc_<l>:validation` and `:test`, tatoeba
test from `tatoeba/tatoeba_<l>:train`, each with its gold alignment. A
missing split is one line naming the `tfds build` command that prepares it.

Example:
<!-- snippet: not run: reads TFDS data from `gs://` -->
```python
from rembert_tf.retrieval import tfds_source
source = tfds_source.TfdsSource("gs://bucket/tensorflow_datasets")
source.discover_languages("bucc2018")   # ["de", "fr"]: the prepared ones
source.check("bucc2018", ["de"])        # raises unless both splits are there
sample = source("bucc2018", "dev", "de")  # a Bitext with its gold pairs
```
"""
from typing import List, Sequence

from rembert_tf.common import fileio
from rembert_tf.data import tfds_reader
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.data import xtreme_tfds
from rembert_tf.retrieval import bitext

# Why each split is needed, for the error that finds it missing.
_NEEDED_FOR = {(bitext.BUCC, "dev"): "BUCC's threshold is chosen on it",
               (bitext.BUCC, "test"): "BUCC's predictions are mined in it",
               (bitext.TATOEBA, "test"): "Tatoeba's pairs"}


def _build_command(ref: tfds_reader.SplitRef, data_dir: str) -> str:
  return tfds_reader.build_command(ref.name, ref.config, data_dir)


class TfdsSource:
  """`source(task, split, lang)` -> Bitext, read from TFDS in `data_dir`."""

  def __init__(self, data_dir):
    self.data_dir = fileio.as_str(data_dir)

  def __call__(self, task: str, split: str, lang: str) -> bitext.Bitext:
    sides = xtreme_tfds.retrieval_sides(task, split, lang, self.data_dir)
    return bitext.Bitext(task=task, split=split, language=lang, **sides)

  def discover_languages(self, task: str) -> List[str]:
    """The benchmark's languages whose test split is prepared, in order."""
    return xtreme_tfds.split_languages(xtreme_tasks.get(task), "test",
                                       self.data_dir)

  def check(self, task: str, languages: Sequence[str]) -> None:
    """Raises TfdsError naming the first split that is not prepared."""
    dataset = xtreme_tasks.get(task)
    for lang in languages:
      for split in bitext.SPLITS[task]:
        ref = xtreme_tfds.split_ref(dataset, split, lang)
        tfds_reader.open_split(ref, self.data_dir, fix=(
            f"{_NEEDED_FOR[task, split]}; prepare it with "
            f"{_build_command(ref, self.data_dir)}, or leave {lang} out "
            "(--languages)"))

  def nothing_found(self, task: str) -> str:
    """The error when no language of `task` is prepared."""
    dataset = xtreme_tasks.get(task)
    layout = dataset.tfds.describe().replace("{lang}", "<lang>")
    example = xtreme_tfds.split_ref(dataset, "test", "<lang>")
    return (f"No {task} dataset prepared in {self.data_dir} (TFDS layout: "
            f"{layout}); prepare one with "
            f"{_build_command(example, self.data_dir)}, or check "
            "--tfds_data_dir, --tasks and --languages.")

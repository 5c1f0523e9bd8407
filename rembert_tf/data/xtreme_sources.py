"""Where a task's examples come from: XTREME's `download/` folder or prepared TFDS.

A source lists the (split, language) pairs to write (each checked to exist
before anything is written), reads one as a task type's `SplitData`, and
names its origin. Both give the same examples for the same data: files go
through `xtreme_readers`, TFDS splits through `xtreme_tfds` rows.
"""
from typing import List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import tfds_reader
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.data import xtreme_readers
from rembert_tf.data import xtreme_tfds



class _Source:
  """What both sources share: the (split, language) pairs to write."""
  name = ""

  def __init__(self, dataset: xtreme_tasks.XtremeTask, data_dir):
    self.dataset = dataset
    self.data_dir = fileio.as_str(data_dir)

  def jobs(self, languages: Optional[Sequence[str]],
           splits: Sequence[str]) -> List[Tuple[str, str]]:
    """(split, language) of every split to write, each checked to be there."""
    jobs = [("train", "en")] + [
        (split, lang) for split in splits if split in self._eval_splits()
        for lang in self._eval_languages(split, languages)]
    for split, lang in jobs:
      self._check(split, lang)
    return jobs

  def _eval_languages(self, split: str, languages) -> List[str]:
    if languages is None:
      return self._present_languages(split)
    only = self._only_languages(split)  # XQuAD's dev (SQuAD): English
    return [l for l in languages if only is None or l in only]


class DownloadSource(_Source):
  """A task's files in XTREME's `download/` folder."""
  name = "download"

  def _eval_splits(self):
    return self.dataset.download.eval_files

  def _present_languages(self, split: str) -> List[str]:
    return self.dataset.discover_languages(self.data_dir, split)

  def _only_languages(self, split: str) -> Optional[List[str]]:
    return self.dataset.download.eval_languages(split)

  def _check(self, split: str, lang: str) -> None:
    xtreme_readers.require_file(self.describe(split, lang), self.dataset)

  def describe(self, split: str, lang: str) -> str:
    return self.dataset.download.path(self.data_dir, split, lang)

  def read(self, kind, split: str, lang: str):
    return kind.read(self.describe(split, lang), self.dataset,
                     split == "train")


class TfdsSource(_Source):
  """A task's splits prepared with TensorFlow Datasets under tfds_data_dir."""
  name = "tfds"

  def _eval_splits(self):
    return self.dataset.tfds.eval_splits

  def _present_languages(self, split: str) -> List[str]:
    return xtreme_tfds.split_languages(self.dataset, split, self.data_dir)

  def _only_languages(self, split: str) -> Optional[List[str]]:
    return self.dataset.tfds.eval_languages(split)

  def _check(self, split: str, lang: str) -> None:
    xtreme_tfds.check_split(self.dataset, split, lang, self.data_dir)

  def describe(self, split: str, lang: str) -> str:
    return xtreme_tfds.describe_source(self.dataset, split, lang)

  def read(self, kind, split: str, lang: str):
    rows, origin = xtreme_tfds.read_rows(self.dataset, split, lang,
                                         self.data_dir)
    return kind.from_rows(rows, self.dataset, split == "train", origin)


def source_root(data_source: str, data_dir=None, tfds_data_dir=None):
  """The folder `data_source` reads; one-line errors for a missing one."""
  if data_source == "download":
    if not data_dir:
      raise errors.UsageError("Give --data_dir (the XTREME download/ folder), "
                              "or --data_source tfds.")
    return data_dir
  if data_source == "tfds":  # without --tfds_data_dir: TFDS's own default
    return tfds_reader.data_dir_or_default(tfds_data_dir)
  raise errors.UsageError(f"--data_source {data_source!r}: choose one of "
                          f"{', '.join(xtreme_tasks.DATA_SOURCES)}.")


def make_source(dataset: xtreme_tasks.XtremeTask, data_source: str,
                data_dir=None, tfds_data_dir=None):
  """The source of `data_source`; one-line errors for a missing root."""
  root = source_root(data_source, data_dir, tfds_data_dir)
  kind = TfdsSource if data_source == "tfds" else DownloadSource
  return kind(dataset, root)

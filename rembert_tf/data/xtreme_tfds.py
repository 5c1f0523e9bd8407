"""XTREME tasks read from prepared TensorFlow Datasets instead of `download/`.

Where a task's splits and fields lie is its `evaluation.xtreme_tasks` entry
(`TfdsLayout`); reading a split is `data.tfds_reader` (the given data dir
only, no download). This module turns a split's examples into *rows*, dicts
in the task's own terms (class labels as the task's names, translations as
the split language's text), which the task types turn into the same examples
the download readers make:

| task type      | row fields                                                  |
| -------------- | ----------------------------------------------------------- |
| classification | text_a, text_b, label                                       |
| tagging        | words, tags                                                 |
| span           | id, question, context, answers {text: [...], answer_start: [...]} |
| retrieval      | source, target (+ source_id, target_id: BUCC)               |
"""
from typing import Any, Dict, List, Tuple

from rembert_tf.data import tfds_reader
from rembert_tf.evaluation import xtreme_tasks

TaskDataError = xtreme_tasks.TaskDataError


def split_ref(dataset: xtreme_tasks.XtremeTask, split: str,
              lang: str) -> tfds_reader.SplitRef:
  ref = dataset.tfds.split(split, lang)
  return tfds_reader.SplitRef(ref.builder, ref.config, ref.split)


def _fix(dataset: xtreme_tasks.XtremeTask, split: str) -> str:
  if split == "train":
    return (f"{dataset.name} trains on it; prepare it in the TFDS data dir "
            f"(layout: {dataset.tfds.describe()})")
  return (f"leave the language out (--languages) or the split (--splits); "
          f"{dataset.name}'s TFDS layout: {dataset.tfds.describe()}")


def check_split(dataset: xtreme_tasks.XtremeTask, split: str, lang: str,
                data_dir):
  """The builder of `split` in `lang`; a one-line error unless prepared."""
  if not dataset.tfds.holds(split, lang):
    raise TaskDataError(
        f"{dataset.name} has no {split} split for language {lang!r} in "
        f"TFDS ({dataset.tfds.describe()}); leave it out (--languages).")
  return tfds_reader.open_split(split_ref(dataset, split, lang), data_dir,
                                fix=_fix(dataset, split))


def split_languages(dataset: xtreme_tasks.XtremeTask, split: str,
                    data_dir) -> List[str]:
  """The task's languages whose `split` is prepared in data_dir, in order."""
  return [lang for lang in dataset.languages
          if dataset.tfds.holds(split, lang) and
          tfds_reader.is_prepared(split_ref(dataset, split, lang), data_dir)]


def _in_language(value: Dict[str, Any], lang: str, where: str) -> str:
  """A translation feature's text in `lang`."""
  if "language" in value and "translation" in value:  # variable languages
    value = dict(zip(value["language"], value["translation"]))
  if lang not in value:
    raise TaskDataError(f"{where}: no text in language {lang!r} (it has "
                        f"{', '.join(sorted(value))}).")
  return value[lang]


def _join_word_parts(word: str) -> str:
  return "".join(word.replace("\u200c", "").split(" "))


class _RowMapper:
  """Builder examples -> the task's rows (fields renamed, labels named)."""

  def __init__(self, dataset: xtreme_tasks.XtremeTask, builder,
               ref: tfds_reader.SplitRef, lang: str):
    layout = dataset.tfds
    tfds_reader.require_features(
        builder, ref, layout.fields.values(),
        fix=f"the {dataset.name} entry of rembert_tf/evaluation/"
            "xtreme_tasks.py names the features of this builder version")
    self._fields = layout.fields
    self._names = {feature: tfds_reader.class_names(builder, feature)
                   for feature in layout.fields.values()}
    self._translated = {feature for feature in layout.fields.values()
                        if tfds_reader.is_translation(builder, feature)}
    self._label_names = layout.label_names
    self._join_words = layout.join_word_parts
    self._lang = lang
    self._origin = str(ref)

  def _label(self, feature: str, value: Any) -> Any:
    names = self._names[feature]
    if names is None:
      return value
    rename = lambda i: self._label_names.get(names[i], names[i])  # noqa: E731
    return [rename(i) for i in value] if isinstance(value, list) else rename(value)

  def row(self, index: int, example: Dict[str, Any]) -> Dict[str, Any]:
    where = f"{self._origin} example {index}"
    row = {"where": where}
    for field, feature in self._fields.items():
      value = example[feature]
      if feature in self._translated:
        value = _in_language(value, self._lang, where)
      row[field] = self._label(feature, value)
    if self._join_words and "words" in row:
      row["words"] = [_join_word_parts(w) for w in row["words"]]
    return row


def read_rows(dataset: xtreme_tasks.XtremeTask, split: str, lang: str,
              data_dir) -> Tuple[List[Dict[str, Any]], str]:
  """(rows of `split` in `lang`, the TFDS split they came from)."""
  builder = check_split(dataset, split, lang, data_dir)
  ref = split_ref(dataset, split, lang)
  mapper = _RowMapper(dataset, builder, ref, lang)
  id_prefix = dataset.tfds.split(split, lang).id_prefix
  rows = []
  for index, example in enumerate(tfds_reader.iter_examples(builder, ref)):
    if id_prefix and not str(example.get("id", "")).startswith(id_prefix):
      continue
    rows.append(mapper.row(index, example))
  return rows, str(ref)


class TfdsSource:
  """A task's splits prepared with TFDS under data_dir (`--data_source tfds`)."""

  def __init__(self, dataset: xtreme_tasks.XtremeTask, data_dir):
    self.dataset = dataset
    self.data_dir = data_dir
    self.layout = dataset.tfds
    self.eval_splits = self.layout.eval_splits

  def present_languages(self, split: str) -> List[str]:
    return split_languages(self.dataset, split, self.data_dir)

  def check(self, split: str, lang: str) -> None:
    check_split(self.dataset, split, lang, self.data_dir)

  def describe(self, split: str, lang: str) -> str:
    """`tfds:name/config:split` (metadata's `source`)."""
    return f"tfds:{split_ref(self.dataset, split, lang)}"

  def read(self, kind, split: str, lang: str):
    """The split's rows as `kind` (an `xtreme_records.RecordType`) reads them."""
    rows, origin = read_rows(self.dataset, split, lang, self.data_dir)
    return kind.from_rows(rows, self.dataset, split == "train", origin)

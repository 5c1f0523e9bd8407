"""Readers of XTREME's task files, one per file format; errors name file and line.

* `read_sentence_pairs`: `sentence1<TAB>sentence2[<TAB>label]` rows (XNLI,
  PAWS-X), on the TSV reader of Model Garden's `classifier_data_lib` (its
  processors merge languages, so reading per language is added here);
* `read_tagged_sentences`: `token<TAB>tag` lines, sentences separated by a
  blank line (UD-POS, PAN-X);
* `read_squad_examples`: SQuAD v1.1 JSON (XQuAD, MLQA, TyDiQA-GoldP) into
  `squad_lib_sp.SquadExample`s.

`sentence_pair_examples`, `check_tags` and `squad_examples` also serve the
TFDS source, so both sources make the same examples.
"""
import json
from typing import List, Optional, Tuple

from absl import logging
from official.nlp.data import classifier_data_lib
from official.nlp.data import squad_lib_sp

from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_tasks

TaskDataError = xtreme_tasks.TaskDataError


def require_file(path, dataset: xtreme_tasks.XtremeTask,
                 fix: str = "") -> None:
  """A missing task file: one line naming it, the layout expected and `fix`."""
  if not fileio.isfile(path):
    raise TaskDataError(
        f"Missing {dataset.name} file {path}. Expected the XTREME download "
        f"layout under the data dir: {dataset.download.describe()} (see "
        f"rembert_tf/evaluation/xtreme_tasks.py).{fix}")


def _not_utf8(path, error: UnicodeDecodeError) -> TaskDataError:
  del error  # its offset counts from the chunk a reader decoded
  return TaskDataError(fileio.utf8_problem(path) + ".")


def _check_label(label: str, where: str, what: str,
                 dataset: xtreme_tasks.XtremeTask) -> str:
  """`label` must be one of the task's labels (`what`: label or tag)."""
  if label not in dataset.labels:
    raise TaskDataError(
        f"{where}: {what} {label!r} is not a {dataset.name} {what} "
        f"({', '.join(dataset.labels)}).")
  return label


def _pair_label(label: Optional[str], where: str,
                dataset: xtreme_tasks.XtremeTask) -> Optional[str]:
  """A sentence pair's label, checked against the task's labels."""
  if label is None:
    return None
  label = label.strip()
  if dataset.name == "xnli" and label == "contradictory":
    label = "contradiction"
  return _check_label(label, where, "label", dataset)


def sentence_pair_examples(rows, dataset: xtreme_tasks.XtremeTask,
                           origin: str
                           ) -> List[classifier_data_lib.InputExample]:
  """(where, sentence1, sentence2, label or None) rows -> InputExamples.

  A row without its label among labelled ones is refused as broken.
  """
  if any(label is not None for *_, label in rows):
    for where, *_, label in rows:
      if label is None:
        raise TaskDataError(
            f"{where}: no label column, though other rows have one; every "
            "row of a labelled file needs sentence1<TAB>sentence2<TAB>label.")
  return [classifier_data_lib.InputExample(
      guid=f"{origin}-{index}", text_a=text_a, text_b=text_b,
      label=_pair_label(label, where, dataset), example_id=index)
          for index, (where, text_a, text_b, label) in enumerate(rows)]


def read_sentence_pairs(path, dataset: xtreme_tasks.XtremeTask
                        ) -> List[classifier_data_lib.InputExample]:
  """`sentence1<TAB>sentence2[<TAB>label]` rows; labels checked against the task."""
  require_file(path, dataset)
  try:
    lines = classifier_data_lib.DataProcessor._read_tsv(fileio.as_str(path))  # pylint: disable=protected-access
  except UnicodeDecodeError as e:
    raise _not_utf8(path, e) from None
  rows = []
  for line_number, row in enumerate(lines, start=1):
    if len(row) < 2:
      raise TaskDataError(f"{path}:{line_number}: expected sentence1<TAB>"
                          f"sentence2[<TAB>label], got {len(row)} field(s).")
    label = row[2] if len(row) >= 3 else None
    rows.append((f"{path}:{line_number}", row[0], row[1], label))
  return sentence_pair_examples(rows, dataset, fileio.basename(path))


def check_tags(tags: List[str], where: str,
               dataset: xtreme_tasks.XtremeTask) -> List[str]:
  """Each tag must be one of the task's labels."""
  return [_check_label(tag, where, "tag", dataset) for tag in tags]


def read_tagged_sentences(path, dataset: xtreme_tasks.XtremeTask
                          ) -> List[Tuple[List[str], Optional[List[str]]]]:
  """`token<TAB>tag` lines (test: token only), blank line between sentences."""
  require_file(path, dataset)
  sentences, words, tags = [], [], []
  lines = _text_lines(path)
  tagged = any(len(l.split("\t")) >= 2 for l in lines)
  for line_number, line in enumerate(lines + [""], start=1):  # "": the end
    if not line.strip():
      if words:
        sentences.append((words, tags if tagged else None))
      words, tags = [], []
      continue
    fields = line.rstrip("\r\n").split("\t")
    words.append(fields[0].strip())
    if tagged:
      if len(fields) < 2:
        raise TaskDataError(
            f"{path}:{line_number}: no tag column, though other lines have "
            "one; every line of a tagged file needs token<TAB>tag.")
      tags.extend(check_tags([fields[-1].strip()], f"{path}:{line_number}",
                             dataset))
  return sentences


def _text_lines(path) -> List[str]:
  try:
    return fileio.read_text(path).splitlines()
  except UnicodeDecodeError as e:
    raise _not_utf8(path, e) from None


def read_squad_json(path, dataset: xtreme_tasks.XtremeTask):
  """The parsed SQuAD v1.1 JSON of a task file."""
  require_file(path, dataset)
  try:
    return json.loads("\n".join(_text_lines(path)))
  except json.JSONDecodeError as e:
    raise TaskDataError(f"{path} is not valid JSON: {e}") from None


def _squad_paragraphs(data, path):
  """(context, qas) of each paragraph of SQuAD v1.1 JSON, fields checked."""
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise TaskDataError(f"{path}: expected SQuAD v1.1 JSON with a 'data' list.")
  for a, article in enumerate(data["data"]):
    if not isinstance(article, dict) or "paragraphs" not in article:
      raise TaskDataError(f"{path}: data[{a}] has no field 'paragraphs' "
                          "(SQuAD v1.1: data[].paragraphs[].qas[]).")
    for p, paragraph in enumerate(article["paragraphs"]):
      if "context" not in paragraph or "qas" not in paragraph:
        raise TaskDataError(f"{path}: data[{a}].paragraphs[{p}] needs the "
                            "fields 'context' and 'qas' (SQuAD v1.1).")
      for q, qa in enumerate(paragraph["qas"]):
        if "id" not in qa or "question" not in qa:
          raise TaskDataError(f"{path}: data[{a}].paragraphs[{p}].qas[{q}] "
                              "needs the fields 'id' and 'question'.")
      yield paragraph["context"], paragraph["qas"]


def _training_answer(path, context: str, qa) -> Optional[Tuple[str, int]]:
  """(text, character start) of a question's first answer; None if not in its context."""
  if not qa.get("answers"):
    raise TaskDataError(f"{path}: training question {qa['id']} has no answer.")
  answer = qa["answers"][0]
  text, start = answer.get("text"), answer.get("answer_start")
  if not isinstance(text, str) or isinstance(start, bool) or not isinstance(
      start, int):
    raise TaskDataError(
        f"{path}: question {qa['id']}: answers[0] needs 'text' (a string) and "
        "'answer_start' (the character offset of the answer in the context, "
        f"an integer); it has text {text!r} and answer_start {start!r}.")
  if context[start:start + len(text)] != text:
    start = context.find(text)
    if start < 0:
      logging.warning("%s: answer of %s not in its context; skipped.", path,
                      qa["id"])
      return None
  return text, start


def read_squad_examples(path, dataset: xtreme_tasks.XtremeTask,
                        is_training: bool) -> List[squad_lib_sp.SquadExample]:
  """A SQuAD v1.1 file -> SquadExample list (start_position is a char offset)."""
  return squad_examples(read_squad_json(path, dataset), path, is_training)


def has_answers(data) -> bool:
  """False for XTREME's label-stripped QA files (every answer text empty)."""
  return any(isinstance(answer, dict) and answer.get("text")
             for article in data["data"]
             for paragraph in article["paragraphs"]
             for qa in paragraph["qas"] for answer in qa.get("answers", []))


def squad_examples(data, path, is_training: bool
                   ) -> List[squad_lib_sp.SquadExample]:
  """SQuAD v1.1 JSON -> SquadExamples; a training set with no answer found is refused."""
  examples, questions = [], 0
  for context, qas in _squad_paragraphs(data, path):
    for qa in qas:
      questions += 1
      answer_text, start = None, None
      if is_training:
        answer = _training_answer(path, context, qa)
        if answer is None:
          continue
        answer_text, start = answer
      examples.append(squad_lib_sp.SquadExample(
          qas_id=str(qa["id"]), question_text=qa["question"],
          paragraph_text=context, orig_answer_text=answer_text,
          start_position=start))
  if is_training and questions and not examples:
    raise TaskDataError(
        f"{path}: none of its {questions} training questions has its answer "
        "in its context (answers[0].text must occur in the context, at "
        "answers[0].answer_start); fix the file.")
  return examples


class DownloadSource:
  """A task's files in XTREME's `download/` folder (`--data_source download`)."""

  def __init__(self, dataset: xtreme_tasks.XtremeTask, data_dir):
    self.dataset = dataset
    self.data_dir = fileio.as_str(data_dir)
    self.layout = dataset.download
    self.eval_splits = self.layout.eval_files

  def present_languages(self, split: str) -> List[str]:
    return self.dataset.discover_languages(self.data_dir, split)

  def check(self, split: str, lang: str) -> None:
    """A missing file of a language asked for: the line says which splits
    that language has (a download with dev files alone, as the demo's)."""
    path = self.describe(split, lang)
    if split == "train":
      return require_file(path, self.dataset)
    if fileio.isfile(path):
      return None
    there = [s for s in self.eval_splits
             if fileio.isfile(self.describe(s, lang))]
    require_file(path, self.dataset, (
        f" To predict only {lang}'s {', '.join(there)}, pass --splits "
        f"{','.join(there)}." if there else
        f" No split has a file for {lang}: leave it out of --languages."))

  def describe(self, split: str, lang: str) -> str:
    return self.layout.path(self.data_dir, split, lang)

  def read(self, kind, split: str, lang: str):
    """The split as `kind` (an `xtreme_records.RecordType`) reads a file."""
    return kind.read(self.describe(split, lang), self.dataset,
                     split == "train")

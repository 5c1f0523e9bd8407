"""A retrieval task's data for one language, from XTREME's `download/` folder or prepared TFDS.

A source (`DownloadSource`, `TfdsSource`) is a callable `source(task, split,
language)` -> `Bitext`: the other language's sentences (source side) and the
English ones (target), with the benchmark's ids and the gold (source id,
target id) pairs or None. Where the files and datasets lie is the task
table's (`xtreme_tasks`); TFDS splits are read by `xtreme_tfds`.

Example:
```python
from rembert_tf.retrieval import bitext
pair = bitext.Bitext(task="tatoeba", split="test", language="de",
                     source_ids=("0", "1"), source_sentences=("Hallo.", "Ja."),
                     target_ids=("0", "1"), target_sentences=("Hello.", "Yes."),
                     gold=frozenset({("0", "0"), ("1", "1")}), origin="demo")
sorted(pair.gold)                  # [("0", "0"), ("1", "1")], checked against the ids
```
"""
import dataclasses
import functools
from typing import FrozenSet, List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import tfds_reader
from rembert_tf.data import xtreme_tfds
from rembert_tf.evaluation import xtreme_tasks

# The benchmark's retrieval tasks and their splits (the task table's).
BUCC = "bucc2018"
TATOEBA = "tatoeba"
TASKS = (BUCC, TATOEBA)
# BUCC's "dev" is its sample set (gold alignments: the threshold is chosen
# there), "test" its training set; Tatoeba has a test set only.
SPLITS = {task: tuple(xtreme_tasks.get(task).download.files) for task in TASKS}


class RetrievalDataError(errors.InputError):
  """A retrieval file is missing or malformed, or a split lacks what it needs."""


@dataclasses.dataclass(frozen=True)
class Bitext:
  """The two sides of one (task, split, language); `origin` names the files."""
  task: str
  split: str
  language: str
  source_ids: Tuple[str, ...]
  source_sentences: Tuple[str, ...]
  target_ids: Tuple[str, ...]
  target_sentences: Tuple[str, ...]
  gold: Optional[FrozenSet[Tuple[str, str]]]
  origin: str
  gold_origin: str = ""  # where the gold alignment comes from, if elsewhere

  def __post_init__(self):
    for side, sentences in (("source", self.source_sentences),
                            ("target", self.target_sentences)):
      if not sentences:
        raise RetrievalDataError(f"{self.origin}: no {side} sentences.")
    if self.task == TATOEBA and (
        len(self.source_sentences) != len(self.target_sentences)):
      raise RetrievalDataError(
          f"{self.origin}: {len(self.source_sentences)} {self.language} "
          f"sentences but {len(self.target_sentences)} English ones; "
          "Tatoeba's two files are parallel line by line, so they must have "
          "as many lines: use the two files of one download.")
    if self.gold is None:
      return
    # Gold pairs must name sentences of the two sides (else every score is 0).
    where = self.gold_origin or self.origin
    if not self.gold:
      raise RetrievalDataError(
          f"{where}: the gold alignment holds no pair; give the gold file "
          f"of {self.origin}.")
    source_ids, target_ids = set(self.source_ids), set(self.target_ids)
    unknown = sorted(pair for pair in self.gold if pair[0] not in source_ids
                     or pair[1] not in target_ids)
    if unknown:
      raise RetrievalDataError(
          f"{where}: {len(unknown)} of its {len(self.gold)} gold pairs name "
          f"sentence ids that are not in {self.origin} (e.g. "
          f"{unknown[0][0]} {unknown[0][1]}); the gold file and the sentence "
          "files must come from the same download.")


# --- XTREME's download/ folder ----------------------------------------------


def _lines(file_path: str) -> List[str]:
  try:
    return fileio.read_text(file_path).splitlines()
  except UnicodeDecodeError:
    raise RetrievalDataError(fileio.utf8_problem(file_path) + ".") from None


def _two_fields(file_path: str, what: str
                ) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
  """(first fields, second fields) of a file of `<a><TAB><b>` lines."""
  rows = []
  for number, line in enumerate(_lines(file_path), 1):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) < 2:
      raise RetrievalDataError(
          f"{file_path}: line {number} has no tab; each line must be {what}.")
    rows.append((fields[0].strip(), fields[1].strip()))
  return tuple(r[0] for r in rows), tuple(r[1] for r in rows)


def _numbered_lines(file_path: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
  """(0-based line numbers, sentences) of a one-sentence-per-line file."""
  sentences = tuple(line.strip() for line in _lines(file_path))
  return tuple(str(i) for i in range(len(sentences))), sentences


class DownloadSource:
  """`source(task, split, lang)` -> Bitext, read from XTREME's download/ folder."""

  def __init__(self, data_dir):
    self.data_dir = fileio.as_str(data_dir)

  def _path(self, task: str, split: str, side: str, lang: str) -> str:
    return xtreme_tasks.get(task).download.path(self.data_dir, split, side,
                                                lang)

  def _require(self, task: str, split: str, side: str, lang: str) -> None:
    file_path = self._path(task, split, side, lang)
    if fileio.isfile(file_path):
      return
    if task == BUCC and split == "dev":
      what, fix = "a BUCC language without a sample set", (
          "the threshold is chosen on BUCC's sample set, which XTREME's "
          "download script keeps as <lang>-en.dev.{<lang>,en,gold}; run it "
          "for this language or leave the language out (--languages)")
    else:
      what, fix = f"{task} {split} {side} file", (
          "run XTREME's download script (scripts/download_data.sh) into the "
          "data dir, or leave the language out (--languages)")
    raise RetrievalDataError(f"Missing {file_path} ({what}, {lang}): {fix}.")

  def discover_languages(self, task: str) -> List[str]:
    """Languages with a test-set English file, in the benchmark's order first."""
    dataset = xtreme_tasks.get(task)
    return dataset.in_benchmark_order(
        dataset.download.languages_present(self.data_dir, "test"))

  def check(self, task: str, languages: Sequence[str]) -> None:
    """Raises RetrievalDataError naming the first missing file and the fix."""
    for lang in languages:
      for split, side in xtreme_tasks.get(task).download.required:
        self._require(task, split, side, lang)

  def nothing_found(self, task: str) -> str:
    """The error when no language of `task` has its files."""
    return (f"No {task} files in {self.data_dir} (expected "
            f"{self._path(task, 'test', 'target', '<lang>')}); run "
            "XTREME's download script, or check --data_dir, --tasks and "
            "--languages.")

  def __call__(self, task: str, split: str, lang: str) -> Bitext:
    layout = xtreme_tasks.get(task).download
    for required_split, side in layout.required:
      if required_split == split:
        self._require(task, split, side, lang)
    source, target = (self._path(task, split, side, lang)
                      for side in ("source", "target"))
    read = (functools.partial(_two_fields, what="`<id><TAB><sentence>`")
            if layout.ids_in_lines else _numbered_lines)
    source_ids, source_sentences = read(source)
    target_ids, target_sentences = read(target)
    gold_file = (self._path(task, split, "gold", lang)
                 if "gold" in layout.files[split] else "")
    gold = (frozenset(zip(*_two_fields(gold_file,
                                       "`<source id><TAB><English id>`")))
            if gold_file and fileio.isfile(gold_file) else None)
    return Bitext(
        task=task, split=split, language=lang, source_ids=source_ids,
        source_sentences=source_sentences, target_ids=target_ids,
        target_sentences=target_sentences, gold=gold,
        origin=f"{source} / {target}",
        gold_origin=gold_file if gold is not None else "")


# --- Prepared TensorFlow Datasets -------------------------------------------


# Why each split is needed, for the error that finds it missing.
_NEEDED_FOR = {(BUCC, "dev"): "BUCC's threshold is chosen on it",
               (BUCC, "test"): "BUCC's predictions are mined in it",
               (TATOEBA, "test"): "Tatoeba's pairs"}


def _unique(side: str, ids: List[str], sentences: List[str]):
  """`<side>_ids` and `<side>_sentences`: each id once, with its first sentence."""
  seen = {}
  for id_, sentence in zip(ids, sentences):
    seen.setdefault(id_, sentence)
  return {f"{side}_ids": tuple(seen),
          f"{side}_sentences": tuple(seen.values())}


class TfdsSource:
  """`source(task, split, lang)` -> Bitext, read from TFDS in `data_dir`."""

  def __init__(self, data_dir):
    self.data_dir = fileio.as_str(data_dir)

  def __call__(self, task: str, split: str, lang: str) -> Bitext:
    """TFDS's `bucc` holds only the aligned pairs (ids are BUCC's);
    `tatoeba` holds them in order (ids are 0-based positions)."""
    rows, origin = xtreme_tfds.read_rows(xtreme_tasks.get(task), split, lang,
                                         self.data_dir)
    if not rows:
      raise xtreme_tfds.TaskDataError(
          f"{origin} in {self.data_dir} has no examples.")
    positions = [str(i) for i in range(len(rows))]
    source_ids = [r.get("source_id", p) for r, p in zip(rows, positions)]
    target_ids = [r.get("target_id", p) for r, p in zip(rows, positions)]
    return Bitext(
        task=task, split=split, language=lang,
        **_unique("source", source_ids, [r["source"] for r in rows]),
        **_unique("target", target_ids, [r["target"] for r in rows]),
        gold=frozenset(zip(source_ids, target_ids)), origin=origin)

  def discover_languages(self, task: str) -> List[str]:
    """The benchmark's languages whose test split is prepared, in order."""
    return xtreme_tfds.split_languages(xtreme_tasks.get(task), "test",
                                       self.data_dir)

  def _build(self, ref: tfds_reader.SplitRef) -> str:
    return tfds_reader.build_command(ref.name, ref.config, self.data_dir)

  def check(self, task: str, languages: Sequence[str]) -> None:
    """Raises TfdsError naming the first split that is not prepared."""
    for lang in languages:
      for split in SPLITS[task]:
        ref = xtreme_tfds.split_ref(xtreme_tasks.get(task), split, lang)
        tfds_reader.open_split(ref, self.data_dir, fix=(
            f"{_NEEDED_FOR[task, split]}; prepare it with {self._build(ref)}, "
            f"or leave {lang} out (--languages)"))

  def nothing_found(self, task: str) -> str:
    """The error when no language of `task` is prepared."""
    dataset = xtreme_tasks.get(task)
    layout = dataset.tfds.describe().replace("{lang}", "<lang>")
    example = xtreme_tfds.split_ref(dataset, "test", "<lang>")
    return (f"No {task} dataset prepared in {self.data_dir} (TFDS layout: "
            f"{layout}); prepare one with {self._build(example)}, or check "
            "--tfds_data_dir, --tasks and --languages.")

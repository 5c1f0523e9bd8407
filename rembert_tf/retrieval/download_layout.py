"""BUCC 2018 and Tatoeba in XTREME's `download/` folder: reading the files.

Where each file lies is the task table's (`xtreme_tasks.get(task).download`);
`DownloadSource(data_dir)` is a `bitext.BitextSource`.

Example:
<!-- snippet: not run: needs XTREME's download/ folder -->
```python
from rembert_tf.retrieval import download_layout
source = download_layout.DownloadSource("download")
download_layout.discover_languages("download", "bucc2018")   # ["de", "fr", ...]
download_layout.check_files("download", "bucc2018", ["de"])
dev = source("bucc2018", "dev", "de")        # a Bitext with its gold pairs
```
"""
from typing import Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.retrieval import bitext


def layout(task: str) -> xtreme_tasks.BitextLayout:
  """The task table's download layout of a retrieval task."""
  if task not in bitext.TASKS:
    raise bitext.RetrievalDataError(
        f"Unknown retrieval task {task!r}; choose from "
        f"{', '.join(bitext.TASKS)}.")
  return xtreme_tasks.get(task).download


def path(data_dir, task: str, split: str, side: str, lang: str) -> str:
  return layout(task).path(data_dir, split, side, lang)


def discover_languages(data_dir, task: str) -> List[str]:
  """Languages with a test-set English file, in the benchmark's order first."""
  return xtreme_tasks.get(task).in_benchmark_order(
      layout(task).languages_present(data_dir, "test"))


def _fix(task: str, split: str, side: str) -> str:
  if task == bitext.BUCC and split == "dev":
    return ("the threshold is chosen on BUCC's sample set, which XTREME's "
            "download script keeps as <lang>-en.dev.{<lang>,en,gold}; run it "
            "for this language or leave the language out (--languages)")
  return ("run XTREME's download script (scripts/download_data.sh) into the "
          "data dir, or leave the language out (--languages)")


def check_files(data_dir, task: str, languages: Sequence[str]) -> None:
  """Raises RetrievalDataError naming the first missing file and the fix."""
  for lang in languages:
    for split, side in layout(task).required:
      file_path = path(data_dir, task, split, side, lang)
      if not fileio.isfile(file_path):
        what = ("a BUCC language without a sample set"
                if task == bitext.BUCC and split == "dev" else
                f"{task} {split} {side} file")
        raise bitext.RetrievalDataError(
            f"Missing {file_path} ({what}, {lang}): {_fix(task, split, side)}.")


def _lines(file_path: str) -> List[str]:
  try:
    return fileio.read_text(file_path).splitlines()
  except UnicodeDecodeError as e:
    del e
    raise bitext.RetrievalDataError(fileio.utf8_problem(file_path) + ".") from None


def _two_fields(file_path: str, what: str) -> List[Tuple[str, str]]:
  rows = []
  for number, line in enumerate(_lines(file_path), 1):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) < 2:
      raise bitext.RetrievalDataError(
          f"{file_path}: line {number} has no tab; each line must be {what}.")
    rows.append((fields[0].strip(), fields[1].strip()))
  return rows


def read_bucc_side(file_path: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
  """(ids, sentences) of a BUCC `<id><TAB><sentence>` file."""
  rows = _two_fields(file_path, "`<id><TAB><sentence>`")
  return tuple(r[0] for r in rows), tuple(r[1] for r in rows)


def read_gold_pairs(file_path: str) -> frozenset:
  return frozenset(_two_fields(file_path,
                               "`<source id><TAB><English id>`"))


def read_sentences(file_path: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
  """(line numbers as ids, sentences) of a one-sentence-per-line file."""
  sentences = tuple(line.strip() for line in _lines(file_path))
  return tuple(str(i) for i in range(len(sentences))), sentences


class DownloadSource:
  """`source(task, split, lang)` -> Bitext, read from XTREME's download/ folder."""

  def __init__(self, data_dir):
    self.data_dir = fileio.as_str(data_dir)

  def discover_languages(self, task: str) -> List[str]:
    return discover_languages(self.data_dir, task)

  def check(self, task: str, languages: Sequence[str]) -> None:
    check_files(self.data_dir, task, languages)

  def nothing_found(self, task: str) -> str:
    """The error when no language of `task` has its files."""
    return (f"No {task} files in {self.data_dir} (expected "
            f"{path(self.data_dir, task, 'test', 'target', '<lang>')}); run "
            "XTREME's download script, or check --data_dir, --tasks and "
            "--languages.")

  def files(self, task: str, split: str, lang: str) -> Dict[str, str]:
    return {side: path(self.data_dir, task, split, side, lang)
            for side in layout(task).files[split]}

  def __call__(self, task: str, split: str, lang: str) -> bitext.Bitext:
    files = self.files(task, split, lang)
    for side in ("source", "target"):
      if not fileio.isfile(files[side]):
        raise bitext.RetrievalDataError(
            f"Missing {files[side]} ({task} {split} {side} file, {lang}): "
            f"{_fix(task, split, side)}.")
    read = read_bucc_side if layout(task).ids_in_lines else read_sentences
    source_ids, source_sentences = read(files["source"])
    target_ids, target_sentences = read(files["target"])
    gold_file: Optional[str] = files.get("gold")
    gold = (read_gold_pairs(gold_file)
            if gold_file and fileio.isfile(gold_file) else None)
    return bitext.Bitext(
        task=task, split=split, language=lang, source_ids=source_ids,
        source_sentences=source_sentences, target_ids=target_ids,
        target_sentences=target_sentences, gold=gold,
        origin=f"{files['source']} / {files['target']}",
        gold_origin=gold_file if gold is not None else "")

"""BUCC 2018 and Tatoeba in XTREME's `download/` folder: where each file is, and reading it.

The layout XTREME's download script leaves (BUCC's sample set renamed `dev`,
its training set `test`; Tatoeba's English side sorted, which hides the
alignment):

| task     | split | source side             | English side            | gold alignment                 |
| -------- | ----- | ----------------------- | ----------------------- | ------------------------------ |
| bucc2018 | dev   | bucc2018/<l>-en.dev.<l> | bucc2018/<l>-en.dev.en  | bucc2018/<l>-en.dev.gold       |
| bucc2018 | test  | bucc2018/<l>-en.test.<l>| bucc2018/<l>-en.test.en | bucc2018/<l>-en.test.gold (optional: the script deletes it) |
| tatoeba  | test  | tatoeba/<l>-en.<l>      | tatoeba/<l>-en.en       | - (give a label folder)        |

BUCC lines are `<id><TAB><sentence>` (the sentence is the second field),
gold lines `<source id><TAB><English id>`. Tatoeba files hold one sentence
per line; a sentence's id is its 0-based line number.

`DownloadSource(data_dir)` is a `bitext.BitextSource`; its
`discover_languages` and `check` (`check_files`: a missing file is found
before any work starts) are those of `tfds_source.TfdsSource` too.

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
import re
from typing import Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.retrieval import bitext

# task -> split -> side -> file pattern under the data dir.
LAYOUT = {
    bitext.BUCC: {
        split: {"source": f"bucc2018/{{lang}}-en.{split}.{{lang}}",
                "target": f"bucc2018/{{lang}}-en.{split}.en",
                "gold": f"bucc2018/{{lang}}-en.{split}.gold"}
        for split in ("dev", "test")},
    bitext.TATOEBA: {
        "test": {"source": "tatoeba/{lang}-en.{lang}",
                 "target": "tatoeba/{lang}-en.en"}},
}
# The files each task needs per language: (split, side).
REQUIRED = {
    bitext.BUCC: (("dev", "source"), ("dev", "target"), ("dev", "gold"),
                  ("test", "source"), ("test", "target")),
    bitext.TATOEBA: (("test", "source"), ("test", "target")),
}


def path(data_dir, task: str, split: str, side: str, lang: str) -> str:
  return fileio.join(data_dir, LAYOUT[task][split][side].format(lang=lang))


def discover_languages(data_dir, task: str) -> List[str]:
  """Languages with a test-set English file, in the benchmark's order first."""
  pattern = LAYOUT[task]["test"]["target"]
  regex = re.compile(re.escape(pattern).replace(re.escape("{lang}"),
                                                "([A-Za-z0-9_]+)") + "$")
  found = set()
  for found_path in fileio.glob(fileio.join(data_dir,
                                            pattern.replace("{lang}", "*"))):
    match = regex.search(found_path.replace("\\", "/"))
    if match:
      found.add(match.group(1))
  return xtreme_tasks.get(task).in_benchmark_order(found)


def _fix(task: str, split: str, side: str) -> str:
  if task == bitext.BUCC and split == "dev":
    return ("the threshold is chosen on BUCC's sample set, which XTREME's "
            "download script keeps as <lang>-en.dev.{<lang>,en,gold}; run it "
            "for this language or leave the language out (--languages)")
  return ("run XTREME's download script (scripts/download_data.sh) into the "
          "data dir, or leave the language out (--languages)")


def check_files(data_dir, task: str, languages: Sequence[str]) -> None:
  """Raises RetrievalDataError naming the first missing file and the fix."""
  if task not in LAYOUT:
    raise bitext.RetrievalDataError(
        f"Unknown retrieval task {task!r}; choose from "
        f"{', '.join(bitext.TASKS)}.")
  for lang in languages:
    for split, side in REQUIRED[task]:
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
    raise bitext.RetrievalDataError(
        f"{file_path} is not UTF-8 text ({e.reason} at byte {e.start}).") from None


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
            for side in LAYOUT[task][split]}

  def __call__(self, task: str, split: str, lang: str) -> bitext.Bitext:
    files = self.files(task, split, lang)
    for side in ("source", "target"):
      if not fileio.isfile(files[side]):
        raise bitext.RetrievalDataError(
            f"Missing {files[side]} ({task} {split} {side} file, {lang}): "
            f"{_fix(task, split, side)}.")
    read = read_bucc_side if task == bitext.BUCC else read_sentences
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

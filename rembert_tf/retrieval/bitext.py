"""A retrieval task's data for one language: two sides of sentences and, when known, the gold alignment.

A `BitextSource` is a callable `source(task, split, language)` -> `Bitext`:
the other language's sentences (source side) and English ones (target),
with the benchmark's ids and the gold (source id, target id) pairs or None.

Example:
```python
from rembert_tf.retrieval import bitext
pair = bitext.Bitext(task="tatoeba", split="test", language="de",
                     source_ids=("0", "1"), source_sentences=("Hallo.", "Ja."),
                     target_ids=("0", "1"), target_sentences=("Hello.", "Yes."),
                     gold=frozenset({("0", "0"), ("1", "1")}), origin="demo")
pair.gold_target_to_source()        # {"0": "0", "1": "1"}
```
"""
import dataclasses
from typing import Callable, Dict, FrozenSet, Optional, Tuple

from rembert_tf.common import errors
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
    for side in ("source", "target"):
      ids, sentences = (getattr(self, f"{side}_ids"),
                        getattr(self, f"{side}_sentences"))
      if len(ids) != len(sentences):
        raise RetrievalDataError(
            f"{self.origin}: {len(ids)} {side} ids for {len(sentences)} "
            f"{side} sentences.")
      if not sentences:
        raise RetrievalDataError(f"{self.origin}: no {side} sentences.")
    if self.task == TATOEBA and (
        len(self.source_sentences) != len(self.target_sentences)):
      raise RetrievalDataError(
          f"{self.origin}: {len(self.source_sentences)} {self.language} "
          f"sentences but {len(self.target_sentences)} English ones; "
          "Tatoeba's two files are parallel line by line, so they must have "
          "as many lines: use the two files of one download.")
    self._check_gold()

  def _check_gold(self) -> None:
    """Gold pairs must name sentences of the two sides (else every score is 0)."""
    if self.gold is None:
      return
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

  def gold_target_to_source(self) -> Dict[str, str]:
    """Target id -> its aligned source id (Tatoeba: one each)."""
    if self.gold is None:
      raise RetrievalDataError(f"{self.origin}: no gold alignment.")
    return {target: source for source, target in self.gold}


BitextSource = Callable[[str, str, str], Bitext]

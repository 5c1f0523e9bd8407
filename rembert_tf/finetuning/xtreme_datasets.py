"""The XTREME datasets fine-tuning reads: one table entry per task.

An entry says everything about a task's data that is not behaviour: where
its files lie in XTREME's `download/` folder (`DownloadLayout`), its labels,
its task type (a key of `task_types.TASK_TYPES`, the behaviour per type) and
the split whose scores a run reports. A new task, or a new source of an
existing one, is one entry (or one field of an entry) here.

The layout is the one XTREME's download script leaves under `download/`:

| task   | train (English)                                            | dev                                                  | test                                            |
| ------ | ---------------------------------------------------------- | ---------------------------------------------------- | ----------------------------------------------- |
| xnli   | xnli/train-en.tsv                                          | xnli/dev-<lang>.tsv                                  | xnli/test-<lang>.tsv                            |
| pawsx  | pawsx/train-en.tsv                                         | pawsx/dev-<lang>.tsv                                 | pawsx/test-<lang>.tsv                           |
| panx   | panx/train-en.tsv                                          | panx/dev-<lang>.tsv                                  | panx/test-<lang>.tsv                            |
| xquad  | squad/train-v1.1.json                                      | squad/dev-v1.1.json (en only)                        | xquad/xquad.<lang>.json                         |
| mlqa   | squad/train-v1.1.json                                      | mlqa/MLQA_V1/dev/dev-context-<l>-question-<l>.json   | mlqa/MLQA_V1/test/test-context-<l>-question-<l>.json |
| tydiqa | tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json  | -                                                    | tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.<lang>.dev.json |

XQuAD has no dev set and XTREME's "test" for TyDiQA-GoldP is TyDi QA's public
dev set, so those two are scored on their `test` split when its files carry
answers (XTREME's download strips them; the original files have them).

Example:
```python
from rembert_tf.finetuning import xtreme_datasets
dataset = xtreme_datasets.get("mlqa")
dataset.download.path("download", "dev", "zh")
# download/mlqa/MLQA_V1/dev/dev-context-zh-question-zh.json
```
"""
import dataclasses
import re
from typing import Dict, List, Optional, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer

class TaskDataError(errors.InputError):
  """A task file is missing or malformed, or a data option cannot work."""


PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
_LANG = "{lang}"


@dataclasses.dataclass(frozen=True)
class DownloadLayout:
  """Where a task's files lie under XTREME's `download/` folder."""
  train_file: str
  # split -> file pattern with {lang}; a pattern without {lang} is English only.
  eval_files: Dict[str, str]

  def path(self, data_dir, split: str, lang: Optional[str] = None) -> str:
    if split == "train":
      return fileio.join(data_dir, self.train_file)
    return fileio.join(data_dir, self.eval_files[split].format(lang=lang))

  def eval_languages(self, split: str) -> Optional[List[str]]:
    """Languages of a split; None means any (the pattern has {lang})."""
    return None if _LANG in self.eval_files[split] else ["en"]

  def describe(self) -> str:
    rows = [f"train: {self.train_file}"]
    rows += [f"{split}: {p}" for split, p in self.eval_files.items()]
    return "; ".join(rows)

  def languages_present(self, data_dir, split: str) -> List[str]:
    """Languages with a file for `split` under data_dir (unordered)."""
    if split not in self.eval_files:
      return []
    pattern = self.eval_files[split]
    if _LANG not in pattern:
      return ["en"] if fileio.isfile(self.path(data_dir, split)) else []
    regex = re.compile(re.escape(pattern).replace(re.escape(_LANG),
                                                  r"([A-Za-z0-9_]+)") + "$")
    found = set()
    for path in fileio.glob(fileio.join(data_dir,
                                        pattern.replace(_LANG, "*"))):
      match = regex.search(path.replace("\\", "/"))
      if match and len(set(match.groups())) == 1:
        found.add(match.group(1))
    return sorted(found)


@dataclasses.dataclass(frozen=True)
class XtremeDataset:
  """One XTREME task's data: its files, labels, task type and scored split."""
  name: str
  task_type: str                 # a key of task_types.TASK_TYPES
  download: DownloadLayout
  labels: Tuple[str, ...] = ()
  # The split whose labelled files give the scores of a run.
  score_split: str = "dev"

  @property
  def languages(self) -> List[str]:
    """The benchmark's languages of the task, in its order."""
    return list(xtreme_scorer.TASK_LANGUAGES.get(self.name, []))

  def discover_languages(self, data_dir, split: str) -> List[str]:
    """Languages with a file for `split`, benchmark order first."""
    found = self.download.languages_present(data_dir, split)
    ordered = [l for l in self.languages if l in found]
    return ordered + sorted(set(found) - set(ordered))


def _tsv_per_language(task: str) -> DownloadLayout:
  """`<task>/train-en.tsv`, `<task>/dev-<lang>.tsv`, `<task>/test-<lang>.tsv`."""
  return DownloadLayout(f"{task}/train-en.tsv",
                        {"dev": f"{task}/dev-{{lang}}.tsv",
                         "test": f"{task}/test-{{lang}}.tsv"})


_SQUAD_TRAIN = "squad/train-v1.1.json"

XTREME_DATASETS = {d.name: d for d in (
    XtremeDataset("xnli", "classification", _tsv_per_language("xnli"),
                  labels=("contradiction", "entailment", "neutral")),
    XtremeDataset("pawsx", "classification", _tsv_per_language("pawsx"),
                  labels=("0", "1")),
    XtremeDataset("panx", "tagging", _tsv_per_language("panx"),
                  labels=PANX_LABELS),
    XtremeDataset("xquad", "span", DownloadLayout(
        _SQUAD_TRAIN, {"dev": "squad/dev-v1.1.json",
                       "test": "xquad/xquad.{lang}.json"}),
                  score_split="test"),
    XtremeDataset("mlqa", "span", DownloadLayout(_SQUAD_TRAIN, {
        "dev": "mlqa/MLQA_V1/dev/dev-context-{lang}-question-{lang}.json",
        "test": "mlqa/MLQA_V1/test/test-context-{lang}-question-{lang}.json"})),
    XtremeDataset("tydiqa", "span", DownloadLayout(
        "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json",
        {"test": "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json"}),
                  score_split="test"),
)}


def get(name: str) -> XtremeDataset:
  if name not in XTREME_DATASETS:
    raise errors.UsageError(f"Unknown task {name!r}; choose one of "
                            f"{', '.join(XTREME_DATASETS)}.")
  return XTREME_DATASETS[name]

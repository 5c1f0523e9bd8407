"""Where each XTREME task lives in the benchmark's `download/` folder.

The layout is the one the XTREME download script leaves (see PAPER.md):

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
from rembert_tf.finetuning import tasks
spec = tasks.get_task("mlqa")
spec.path("download", "dev", "zh")   # download/mlqa/MLQA_V1/dev/dev-context-zh-question-zh.json
```
"""
import dataclasses
from typing import Dict, List, Optional, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer

# Task types (entries of `task_types.TASK_TYPES`).
CLASSIFICATION = "classification"
TAGGING = "tagging"
SPAN = "span"

PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  name: str
  task_type: str
  train_file: str
  # split -> file pattern with {lang}; a pattern without {lang} is English only.
  eval_files: Dict[str, str]
  labels: Tuple[str, ...] = ()
  # The split whose labelled files give the scores of a run.
  score_split: str = "dev"

  @property
  def languages(self) -> List[str]:
    return list(xtreme_scorer.TASK_LANGUAGES.get(self.name, []))

  def path(self, data_dir, split: str, lang: Optional[str] = None) -> str:
    if split == "train":
      return fileio.join(data_dir, self.train_file)
    pattern = self.eval_files[split]
    return fileio.join(data_dir, pattern.format(lang=lang))

  def eval_languages(self, split: str) -> Optional[List[str]]:
    """Languages of a split; None means any (pattern has {lang})."""
    return None if "{lang}" in self.eval_files[split] else ["en"]

  def layout(self) -> str:
    rows = [f"train: {self.train_file}"]
    rows += [f"{split}: {p}" for split, p in self.eval_files.items()]
    return "; ".join(rows)


TASK_SPECS = {
    "xnli": TaskSpec("xnli", CLASSIFICATION, "xnli/train-en.tsv",
                     {"dev": "xnli/dev-{lang}.tsv",
                      "test": "xnli/test-{lang}.tsv"},
                     labels=("contradiction", "entailment", "neutral")),
    "pawsx": TaskSpec("pawsx", CLASSIFICATION, "pawsx/train-en.tsv",
                      {"dev": "pawsx/dev-{lang}.tsv",
                       "test": "pawsx/test-{lang}.tsv"},
                      labels=("0", "1")),
    "panx": TaskSpec("panx", TAGGING, "panx/train-en.tsv",
                     {"dev": "panx/dev-{lang}.tsv",
                      "test": "panx/test-{lang}.tsv"},
                     labels=PANX_LABELS),
    "xquad": TaskSpec("xquad", SPAN, "squad/train-v1.1.json",
                      {"dev": "squad/dev-v1.1.json",
                       "test": "xquad/xquad.{lang}.json"},
                      score_split="test"),
    "mlqa": TaskSpec("mlqa", SPAN, "squad/train-v1.1.json",
                     {"dev": "mlqa/MLQA_V1/dev/dev-context-{lang}-question-{lang}.json",
                      "test": "mlqa/MLQA_V1/test/test-context-{lang}-question-{lang}.json"}),
    "tydiqa": TaskSpec("tydiqa", SPAN,
                       "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json",
                       {"test": "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json"},
                       score_split="test"),
}


def get_task(name: str) -> TaskSpec:
  if name not in TASK_SPECS:
    raise errors.UsageError(f"Unknown task {name!r}; choose one of "
                     f"{', '.join(TASK_SPECS)}.")
  return TASK_SPECS[name]

"""The XTREME tasks: one table entry per task, read by fine-tuning, retrieval and scoring.

An entry holds every fact of a task that is not behaviour: category,
languages, metric, its files in XTREME's `download/` (`DownloadLayout`,
`BitextLayout`), its TFDS splits and features (`TfdsLayout`), labels, task
type, scored split and the paper's averages. A new task, or a new source of
one, is one entry. Imports only common/.

Example:
```python
from rembert_tf.evaluation import xtreme_tasks
task = xtreme_tasks.get("mlqa")
task.category, task.metric, task.languages[:3]   # "qa", "mlqa", ("en", "es", "de")
task.download.path("download", "dev", "zh")
# download/mlqa/MLQA_V1/dev/dev-context-zh-question-zh.json
task.tfds.split("dev", "zh")
# TfdsSplit(builder='mlqa', config='zh', split='validation', ...)
```
"""
import dataclasses
import re
from typing import Dict, List, Optional, Tuple, Union

from rembert_tf.common import errors
from rembert_tf.common import fileio


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
    return _languages_in(data_dir, pattern)


def _languages_in(data_dir, pattern: str) -> List[str]:
  """The languages whose file of `pattern` ({lang} in it) is under data_dir."""
  regex = re.compile(re.escape(pattern).replace(re.escape(_LANG),
                                                r"([A-Za-z0-9_]+)") + "$")
  found = set()
  for path in fileio.glob(fileio.join(data_dir, pattern.replace(_LANG, "*"))):
    match = regex.search(path.replace("\\", "/"))
    if match and len(set(match.groups())) == 1:
      found.add(match.group(1))
  return sorted(found)


@dataclasses.dataclass(frozen=True)
class BitextLayout:
  """A retrieval task's files per split and side (`source`: the other language,
  `target`: English, `gold`: the alignment) under XTREME's `download/`."""
  # split -> side -> file pattern with {lang}.
  files: Dict[str, Dict[str, str]]
  # (split, side) of the files each language needs; the others are optional.
  required: Tuple[Tuple[str, str], ...]
  # Lines are `<id><TAB><sentence>`; else a sentence a line, its id its
  # 0-based line number.
  ids_in_lines: bool = False

  def path(self, data_dir, split: str, side: str, lang: str) -> str:
    return fileio.join(data_dir, self.files[split][side].format(lang=lang))

  def languages_present(self, data_dir, split: str) -> List[str]:
    """Languages with an English file for `split` under data_dir."""
    if split not in self.files:
      return []
    return _languages_in(data_dir, self.files[split]["target"])


@dataclasses.dataclass(frozen=True)
class TfdsSplit:
  """One split of a TFDS dataset; `{lang}` in config or split is the language
  (as the builder names it)."""
  builder: str
  config: Optional[str]
  split: str
  # The languages the split holds when it does not name one (SQuAD: "en");
  # None: any (by {lang}, or each example holds every language, as xnli's).
  languages: Optional[Tuple[str, ...]] = None
  # Keep only the examples whose `id` starts with this.
  id_prefix: Optional[str] = None

  def for_language(self, lang: str) -> "TfdsSplit":
    fill = lambda v: None if v is None else v.replace(_LANG, lang)  # noqa: E731
    return dataclasses.replace(self, config=fill(self.config),
                               split=fill(self.split))

  def describe(self) -> str:
    dataset = self.builder if self.config is None else (
        f"{self.builder}/{self.config}")
    return f"{dataset}:{self.split}"


@dataclasses.dataclass(frozen=True)
class TfdsLayout:
  """Where a task's splits lie in TensorFlow Datasets, and its fields there."""
  train: Optional[TfdsSplit]
  eval_splits: Dict[str, TfdsSplit]
  # The task type's field -> the builder's feature holding it.
  fields: Dict[str, str]
  # The builder's class name -> the task's label, where the two differ.
  label_names: Dict[str, str] = dataclasses.field(default_factory=dict)
  # The task's language code -> the builder's, where the two differ.
  builder_languages: Dict[str, str] = dataclasses.field(default_factory=dict)
  # UD-POS: each word as XTREME's preprocessing writes it (its spaces and
  # zero-width non-joiners removed).
  join_word_parts: bool = False

  def split(self, split: str, lang: str) -> TfdsSplit:
    """The TFDS split holding `split` of language `lang`."""
    ref = self.train if split == "train" else self.eval_splits[split]
    return ref.for_language(self.builder_languages.get(lang, lang))

  def eval_languages(self, split: str) -> Optional[List[str]]:
    """The only languages of a split; None means any."""
    ref = self.eval_splits[split]
    return None if ref.languages is None else list(ref.languages)

  def holds(self, split: str, lang: str) -> bool:
    """Whether the layout can hold `split` of `lang` at all."""
    ref = self.train if split == "train" else self.eval_splits.get(split)
    return ref is not None and (ref.languages is None or
                                lang in ref.languages)

  def describe(self) -> str:
    rows = [f"train: {self.train.describe()}"] if self.train else []
    rows += [f"{split}: {ref.describe()}"
             for split, ref in self.eval_splits.items()]
    return "; ".join(rows)


@dataclasses.dataclass(frozen=True)
class XtremeTask:
  """One XTREME task: its category, languages, metric and data."""
  name: str
  task_type: str                 # a key of task_types.TASK_TYPES, or RETRIEVAL
  # A BitextLayout for the retrieval tasks.
  download: Union[DownloadLayout, BitextLayout]
  tfds: TfdsLayout
  category: str                  # a key of xtreme_benchmark.CATEGORY_LABELS
  languages: Tuple[str, ...]     # the benchmark's, in its order
  metric: str                    # a TaskMetric.name of xtreme_scorer
  labels: Tuple[str, ...] = ()
  # The split whose labelled files give the scores of a run.
  score_split: str = "dev"
  # The paper's averages (base scale): metric -> (coupled, decoupled).
  paper_results: Dict[str, Tuple[Optional[float], Optional[float]]] = (
      dataclasses.field(default_factory=dict))

  def in_benchmark_order(self, found) -> List[str]:
    """`found` languages, the benchmark's first in its order, then the rest."""
    ordered = [l for l in self.languages if l in found]
    return ordered + sorted(set(found) - set(ordered))

  def discover_languages(self, data_dir, split: str) -> List[str]:
    """Languages with a file for `split`, benchmark order first."""
    return self.in_benchmark_order(
        self.download.languages_present(data_dir, split))


def _tsv_per_language(task: str) -> DownloadLayout:
  """`<task>/train-en.tsv`, `<task>/dev-<lang>.tsv`, `<task>/test-<lang>.tsv`."""
  return DownloadLayout(f"{task}/train-en.tsv",
                        {"dev": f"{task}/dev-{{lang}}.tsv",
                         "test": f"{task}/test-{{lang}}.tsv"})


def _words(text: str) -> Tuple[str, ...]:
  return tuple(text.split())


def _tfds_per_config(builder: str, config: str, dev: str = "validation",
                     test: str = "test", **fields) -> TfdsLayout:
  """A builder with one config per language and train/dev/test splits."""
  per_language = lambda split: TfdsSplit(builder, config, split)  # noqa: E731
  return TfdsLayout(
      train=TfdsSplit(builder, config.replace(_LANG, "en"), "train"),
      eval_splits={"dev": per_language(dev), "test": per_language(test)},
      **fields)


RETRIEVAL = "retrieval"
UDPOS_LABELS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN",
                "NUM", "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM",
                "VERB", "X")
_SQUAD_TRAIN = "squad/train-v1.1.json"
_PAIR_FIELDS = {"text_a": "premise", "text_b": "hypothesis", "label": "label"}
_SQUAD_FIELDS = {"id": "id", "question": "question", "context": "context",
                 "answers": "answers"}
_TFDS_SQUAD_TRAIN = TfdsSplit("squad", "v1.1", "train", languages=("en",))

XTREME_TASKS = {t.name: t for t in (
    XtremeTask(
        "xnli", "classification", _tsv_per_language("xnli"),
        TfdsLayout(TfdsSplit("multi_nli", None, "train", languages=("en",)),
                   {"dev": TfdsSplit("xnli", None, "validation"),
                    "test": TfdsSplit("xnli", None, "test")},
                   fields=_PAIR_FIELDS),
        category="classification", metric="accuracy",
        languages=_words("ar bg de el en es fr hi ru sw th tr ur vi zh"),
        labels=("contradiction", "entailment", "neutral"),
        paper_results={"accuracy": (70.7, 71.3)}),
    XtremeTask(
        "pawsx", "classification", _tsv_per_language("pawsx"),
        _tfds_per_config("paws_x_wiki", _LANG, fields={
            "text_a": "sentence1", "text_b": "sentence2", "label": "label"},
                         label_names={"different_meaning": "0",
                                      "paraphrase": "1"}),
        category="classification", metric="accuracy",
        languages=_words("de en es fr ja ko zh"), labels=("0", "1"),
        paper_results={"accuracy": (85.3, 85.0)}),
    XtremeTask(
        "udpos", "tagging", _tsv_per_language("udpos"),
        _tfds_per_config("xtreme_pos", f"xtreme_pos_{_LANG}", dev="dev",
                         fields={"words": "tokens", "tags": "upos"},
                         # TFDS's xtreme_pos swaps the Tamil and Tagalog configs.
                         builder_languages={"ta": "tl", "tl": "ta"},
                         join_word_parts=True),
        category="tagging", metric="entity_f1",
        languages=_words("af ar bg de el en es et eu fa fi fr he hi hu id it "
                         "ja kk ko mr nl pt ru ta te th tl tr ur vi yo zh"),
        labels=UDPOS_LABELS),
    XtremeTask(
        "panx", "tagging", _tsv_per_language("panx"),
        _tfds_per_config("wikiann", _LANG,
                         fields={"words": "tokens", "tags": "tags"}),
        category="tagging", metric="entity_f1",
        languages=_words("ar he vi id jv ms tl eu ml ta te af nl en de el bn "
                         "hi mr ur fa fr it pt es bg ru ja ka ko th sw yo my "
                         "zh kk tr et fi hu"),
        labels=PANX_LABELS, paper_results={"f1": (69.2, 68.9)}),
    XtremeTask(
        "xquad", "span", DownloadLayout(
            _SQUAD_TRAIN, {"dev": "squad/dev-v1.1.json",
                           "test": "xquad/xquad.{lang}.json"}),
        TfdsLayout(_TFDS_SQUAD_TRAIN, {
            "dev": TfdsSplit("squad", "v1.1", "validation", languages=("en",)),
            "test": TfdsSplit("xquad", _LANG, "test")}, fields=_SQUAD_FIELDS),
        category="qa", metric="squad",
        languages=_words("en es de el ru tr ar vi th zh hi"),
        score_split="test",
        paper_results={"exact_match": (46.2, 46.9), "f1": (63.2, 63.8)}),
    XtremeTask(
        "mlqa", "span", DownloadLayout(_SQUAD_TRAIN, {
            "dev": "mlqa/MLQA_V1/dev/dev-context-{lang}-question-{lang}.json",
            "test": "mlqa/MLQA_V1/test/test-context-{lang}-question-{lang}.json"}),
        TfdsLayout(_TFDS_SQUAD_TRAIN, {
            "dev": TfdsSplit("mlqa", _LANG, "validation"),
            "test": TfdsSplit("mlqa", _LANG, "test")}, fields=_SQUAD_FIELDS),
        category="qa", metric="mlqa", languages=_words("en es de ar hi vi zh"),
        paper_results={"exact_match": (37.3, None), "f1": (53.1, 53.1)}),
    XtremeTask(
        "tydiqa", "span", DownloadLayout(
            "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json",
            {"test": "tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json"}),
        TfdsLayout(
            TfdsSplit("tydi_qa", "goldp", "train", languages=("en",),
                      id_prefix="english-"),
            {"test": TfdsSplit("tydi_qa", "goldp", f"validation-{_LANG}")},
            fields=_SQUAD_FIELDS),
        category="qa", metric="squad",
        languages=_words("en ar bn fi id ko ru sw te"), score_split="test",
        paper_results={"exact_match": (None, 42.8), "f1": (None, 58.1)}),
    # Retrieval: the source side is the other language, the target English.
    XtremeTask(
        "bucc2018", RETRIEVAL, BitextLayout(
            {split: {"source": f"bucc2018/{_LANG}-en.{split}.{_LANG}",
                     "target": f"bucc2018/{_LANG}-en.{split}.en",
                     "gold": f"bucc2018/{_LANG}-en.{split}.gold"}
             for split in ("dev", "test")},
            required=(("dev", "source"), ("dev", "target"), ("dev", "gold"),
                      ("test", "source"), ("test", "target")),
            ids_in_lines=True), TfdsLayout(None, {
            "dev": TfdsSplit("bucc", f"bucc_{_LANG}", "validation"),
            "test": TfdsSplit("bucc", f"bucc_{_LANG}", "test")}, fields={
                "source_id": "source_id", "source": "source_sentence",
                "target_id": "target_id", "target": "target_sentence"}),
        category="retrieval", metric="pair_f1",
        languages=_words("de fr ru zh"), score_split="test"),
    XtremeTask(
        "tatoeba", RETRIEVAL, BitextLayout(
            {"test": {"source": f"tatoeba/{_LANG}-en.{_LANG}",
                      "target": f"tatoeba/{_LANG}-en.en"}},
            required=(("test", "source"), ("test", "target"))),
        TfdsLayout(None, {
            "test": TfdsSplit("tatoeba", f"tatoeba_{_LANG}", "train")},
            fields={"source": "source_sentence", "target": "target_sentence"}),
        category="retrieval", metric="accuracy",
        languages=_words("ar he vi id jv tl eu ml ta te af nl de el bn hi mr "
                         "ur fa fr it pt es bg ru ja ka ko th sw zh kk tr et "
                         "fi hu"),
        score_split="test"),
)}
# The task names in the benchmark's order.
TASKS = tuple(XTREME_TASKS)
FINETUNING_TASKS = tuple(name for name, t in XTREME_TASKS.items()
                         if t.task_type != RETRIEVAL)
# Where a task's examples are read from: XTREME's download/ folder (the
# entries' DownloadLayout) or prepared TFDS datasets (their TfdsLayout);
# `task_sources` reads each.
DATA_SOURCES = ("download", "tfds")


def get(name: str) -> XtremeTask:
  if name not in XTREME_TASKS:
    raise errors.UsageError(f"Unknown task {name!r}; choose one of "
                            f"{', '.join(XTREME_TASKS)}.")
  return XTREME_TASKS[name]


def get_finetuning_task(name: str) -> XtremeTask:
  """A task that is fine-tuned (not a retrieval task)."""
  task = get(name)
  if task.task_type == RETRIEVAL:
    raise errors.UsageError(
        f"{name} is a retrieval task, evaluated without fine-tuning "
        f"(rembert-retrieve); fine-tune one of {', '.join(FINETUNING_TASKS)}.")
  return task

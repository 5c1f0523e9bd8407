"""The metric definitions of the XTREME benchmark, per task.

They agree with the official scorer (google-research/xtreme `evaluate.py`,
which defers to the SQuAD v1.1 and MLQA v1 scripts):

* xnli, pawsx, tatoeba: accuracy (labels stripped; line numbers);
* panx, udpos: `seqeval.metrics` precision / recall / F1 over tag sequences;
* bucc2018: precision / recall / F1 of the set of (source id, English id) pairs;
* xquad, tydiqa: SQuAD v1.1 exact match and token F1, best over gold answers;
* mlqa: the same with MLQA v1 normalisation per answer language.

Scores are fractions in [0, 1] here; the scorer reports percent.

Example:
```python
from rembert_tf.evaluation import xtreme_metrics as m
m.mlqa_normalize("Die Katze!", "de")        # 'katze'
m.mlqa_f1("北京大学", "北京", "zh")            # 2/3
m.squad_exact_match("The Eiffel Tower", "eiffel tower.")   # 1.0
```
"""
import collections
import functools
import re
import string
import sys
import unicodedata
from typing import Callable, Dict, Iterable, List, Sequence, Tuple

# --- SQuAD v1.1 --------------------------------------------------------------

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ENGLISH_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> str:
  """SQuAD v1.1 answer normalisation (lower, punctuation, articles, spaces)."""
  text = text.lower()
  text = "".join(c for c in text if c not in _ASCII_PUNCTUATION)
  text = _ENGLISH_ARTICLES.sub(" ", text)
  return " ".join(text.split())


def _token_f1(prediction_tokens: Sequence[str],
              gold_tokens: Sequence[str]) -> float:
  overlap = collections.Counter(prediction_tokens) & collections.Counter(
      gold_tokens)
  matched = sum(overlap.values())
  if matched == 0:
    return 0.0
  precision = matched / len(prediction_tokens)
  recall = matched / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def squad_exact_match(prediction: str, gold: str) -> float:
  return float(squad_normalize(prediction) == squad_normalize(gold))


def squad_f1(prediction: str, gold: str) -> float:
  return _token_f1(squad_normalize(prediction).split(),
                   squad_normalize(gold).split())


# --- MLQA v1 -----------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _unicode_punctuation() -> frozenset:
  chars = {chr(i) for i in range(sys.maxunicode)
           if unicodedata.category(chr(i)).startswith("P")}
  return frozenset(chars | _ASCII_PUNCTUATION)


# Article patterns per answer language; None means the language has none.
_MLQA_ARTICLES = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "de": re.compile(
        r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    # MLQA's Arabic rule replaces every occurrence of the definite-article
    # prefix, wherever it is in a word.
    "ar": re.compile("ال"),
    "hi": None,
    "zh": None,
}
_MIXED_SEGMENTATION_LANGUAGES = frozenset({"zh"})
_CJK_IDEOGRAPH = re.compile("[\u4e00-\u9fa5]")
MLQA_LANGUAGES = tuple(sorted(_MLQA_ARTICLES))


def mixed_segmentation(text: str) -> List[str]:
  """Each CJK ideograph or punctuation char is a token; the rest split on spaces."""
  punctuation = _unicode_punctuation()
  tokens, pending = [], []
  for char in text:
    if _CJK_IDEOGRAPH.match(char) or char in punctuation:
      tokens.extend("".join(pending).split())
      pending = []
      tokens.append(char)
    else:
      pending.append(char)
  tokens.extend("".join(pending).split())
  return tokens


def _check_mlqa_language(language: str):
  if language not in _MLQA_ARTICLES:
    raise ValueError(
        f"MLQA normalisation is defined for the answer languages "
        f"{', '.join(MLQA_LANGUAGES)}; got {language!r}.")


def mlqa_normalize(text: str, language: str) -> str:
  """MLQA v1 answer normalisation for an answer in `language`."""
  _check_mlqa_language(language)
  punctuation = _unicode_punctuation()
  text = text.lower()
  text = "".join(c for c in text if c not in punctuation)
  articles = _MLQA_ARTICLES[language]
  if articles is not None:
    text = articles.sub(" ", text)
  if language in _MIXED_SEGMENTATION_LANGUAGES:
    tokens = mixed_segmentation(text)
  else:
    tokens = text.split()
  return " ".join(t for t in tokens if t.strip())


def mlqa_exact_match(prediction: str, gold: str, language: str) -> float:
  return float(mlqa_normalize(prediction, language) ==
               mlqa_normalize(gold, language))


def mlqa_f1(prediction: str, gold: str, language: str) -> float:
  return _token_f1(mlqa_normalize(prediction, language).split(),
                   mlqa_normalize(gold, language).split())


# --- Per-dataset aggregates --------------------------------------------------


def qa_scores(gold_answers: Dict[str, List[str]],
              predictions: Dict[str, str],
              exact_match_fn: Callable[[str, str], float],
              f1_fn: Callable[[str, str], float]) -> Dict[str, float]:
  """Mean over questions of the best score over gold answers (no prediction: 0)."""
  if not gold_answers:
    raise ValueError("No questions to score.")
  exact_match = f1 = 0.0
  for question_id, golds in gold_answers.items():
    if question_id not in predictions:
      continue
    prediction = predictions[question_id]
    exact_match += max(exact_match_fn(prediction, g) for g in golds)
    f1 += max(f1_fn(prediction, g) for g in golds)
  total = len(gold_answers)
  return {"exact_match": exact_match / total, "f1": f1 / total}


def squad_scores(gold_answers, predictions) -> Dict[str, float]:
  return qa_scores(gold_answers, predictions, squad_exact_match, squad_f1)


def mlqa_scores(gold_answers, predictions, language: str) -> Dict[str, float]:
  _check_mlqa_language(language)
  return qa_scores(gold_answers, predictions,
                   functools.partial(mlqa_exact_match, language=language),
                   functools.partial(mlqa_f1, language=language))


def accuracy(labels: Sequence[str], predictions: Sequence[str]) -> Dict[str, float]:
  if len(labels) != len(predictions):
    raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels.")
  if not labels:
    raise ValueError("No examples to score.")
  correct = sum(p.strip() == l.strip() for p, l in zip(predictions, labels))
  return {"accuracy": correct / len(labels)}


def entity_f1(labels: Sequence[Sequence[str]],
              predictions: Sequence[Sequence[str]]) -> Dict[str, float]:
  """seqeval entity-level F1 / precision / recall over tag sequences."""
  import warnings  # pylint: disable=g-import-not-at-top
  from seqeval import metrics  # pylint: disable=g-import-not-at-top
  labels, predictions = list(labels), list(predictions)
  with warnings.catch_warnings():
    # No predicted / gold entity: seqeval warns and scores 0, as intended.
    warnings.simplefilter("ignore")
    return {"f1": float(metrics.f1_score(labels, predictions)),
            "precision": float(metrics.precision_score(labels, predictions)),
            "recall": float(metrics.recall_score(labels, predictions))}


def pair_f1(gold_pairs: Iterable[Tuple[str, str]],
            predicted_pairs: Iterable[Tuple[str, str]]) -> Dict[str, float]:
  """Set precision / recall / F1 of aligned pairs (BUCC); 0 with no match."""
  gold, predicted = set(gold_pairs), set(predicted_pairs)
  correct = len(gold & predicted)
  if not correct:
    return {"f1": 0.0, "precision": 0.0, "recall": 0.0}
  precision, recall = correct / len(predicted), correct / len(gold)
  return {"f1": 2 * precision * recall / (precision + recall),
          "precision": precision, "recall": recall}


def mean(values: Iterable[float]) -> float:
  values = list(values)
  return sum(values) / len(values)

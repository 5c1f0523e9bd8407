"""XNLI-like pairs from the demo grammar, written as XTREME's download/ folder.

`make_nli_pair` builds (premise, hypothesis, label) from frames, so the label
holds in every language, as in XNLI's translations; `write_xnli_files` writes
them as XTREME's download leaves XNLI.

Example:
```python
import random
from rembert_tf.demo import grammar, nli
premise, hypothesis, label = nli.make_nli_pair(random.Random(0))
print(label, "|", grammar.render(premise, "en"), "|", grammar.render(hypothesis, "en"))
rows = nli.nli_examples(100, seed=1, language="ru")   # [{"premise", "hypothesis", "label"}]
nli.write_xnli_files("download", num_train=200, num_dev=20)  # download/xnli/*.tsv
```
"""
import dataclasses
import random
from typing import Dict, List, Optional, Sequence, Tuple

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.demo import frame_sampling
from rembert_tf.demo import grammar
from rembert_tf.demo import lexicon as lx

NLI_LABELS = ("entailment", "neutral", "contradiction")
# Distinct seeds: train and dev pairs are drawn independently.
_TRAIN_SEED, _DEV_SEED = 101, 202

_MODIFIERS = ("location", "manner", "time", "subject_adjective",
              "object_adjective")
# Modifiers of the event (not of a definite noun phrase): under negation,
# adding one keeps the clause true and dropping one may not.
_EVENT_MODIFIERS = ("location", "manner", "time")


def _add_modifier(rng: random.Random, frame: grammar.Frame,
                  fields=_MODIFIERS) -> Optional[grammar.Frame]:
  options = []
  if frame.location is None:
    options.append(("location", rng.choice(tuple(lx.PLACES))))
  if frame.manner is None:
    options.append(("manner", rng.choice(lx.MANNERS)))
  if frame.time is None:
    options.append(("time", rng.choice(lx.times_of(frame.tense))))
  for field in ("subject", "object"):
    key = getattr(frame, field)
    if key and key not in lx.NAME_GENDER and getattr(frame, field + "_adjective") is None:
      options.append((field + "_adjective",
                      frame_sampling.adjective_for(rng, key, 1.0)))
  options = [(f, v) for f, v in options if f in fields]
  if not options:
    return None
  field, value = rng.choice(options)
  return dataclasses.replace(frame, **{field: value})


def _drop_modifiers(rng: random.Random, frame: grammar.Frame,
                    fields=_MODIFIERS) -> Optional[grammar.Frame]:
  present = [m for m in fields if getattr(frame, m) is not None]
  if not present:
    return None
  dropped = rng.sample(present, rng.randint(1, len(present)))
  return dataclasses.replace(frame, **{m: None for m in dropped})


def make_nli_pair(rng: random.Random, label: Optional[str] = None
                  ) -> Tuple[grammar.Frame, grammar.Frame, str]:
  """(premise, hypothesis, label) with label in NLI_LABELS (random if None).

  Entailment drops modifiers from a positive premise (adds an event modifier
  to a negated one); neutral does the reverse or changes the subject;
  contradiction flips the negation or moves a positive premise's place.
  """
  label = label or rng.choice(NLI_LABELS)
  if label not in NLI_LABELS:
    raise errors.UsageError(f"label must be one of {NLI_LABELS}, got {label!r}.")
  while True:
    premise = frame_sampling.sample_frame(rng, negation_prob=0.3)
    if label == "entailment":
      hypothesis = (_add_modifier(rng, premise, _EVENT_MODIFIERS)
                    if premise.negated else _drop_modifiers(rng, premise))
    elif label == "neutral":
      if rng.random() < 0.25:
        other = frame_sampling.sample_frame(rng, tense=premise.tense,
                                            negation_prob=0.3)
        hypothesis = other if other.subject != premise.subject else None
      else:
        hypothesis = (_drop_modifiers(rng, premise, _EVENT_MODIFIERS)
                      if premise.negated else _add_modifier(rng, premise))
    elif premise.negated or rng.random() < 0.5:
      hypothesis = dataclasses.replace(premise, negated=not premise.negated)
    elif premise.location is not None:
      hypothesis = dataclasses.replace(premise, location=rng.choice(
          [p for p in lx.PLACES if p != premise.location]))
    else:
      hypothesis = None
    if hypothesis is not None and hypothesis != premise:
      return premise, hypothesis, label


def nli_examples(num_examples: int, seed: int = 0,
                 language: str = "en") -> List[Dict[str, str]]:
  """`num_examples` balanced NLI rows; the same seed gives the same pairs in every language."""
  rng = random.Random(seed)
  rows = []
  for i in range(num_examples):
    premise, hypothesis, label = make_nli_pair(rng, NLI_LABELS[i % 3])
    rows.append({"premise": grammar.render(premise, language),
                 "hypothesis": grammar.render(hypothesis, language), "label": label})
  random.Random(seed + 1).shuffle(rows)
  return rows


def _write_tsv(path: str, rows: List[Dict[str, str]]) -> None:
  fileio.write_text(path, "".join(
      f"{r['premise']}\t{r['hypothesis']}\t{r['label']}\n" for r in rows))


def write_xnli_files(download_dir, num_train: int = 2000, num_dev: int = 300,
                     languages: Optional[Sequence[str]] = None,
                     seed: int = 0) -> str:
  """Writes download_dir/xnli/{train-en,dev-<lang>}.tsv; returns download_dir."""
  xnli_dir = fileio.join(download_dir, "xnli")
  _write_tsv(fileio.join(xnli_dir, "train-en.tsv"),
             nli_examples(num_train, seed=seed + _TRAIN_SEED, language="en"))
  for lang in languages or lx.LANGUAGES:
    _write_tsv(fileio.join(xnli_dir, f"dev-{lang}.tsv"),
               nli_examples(num_dev, seed=seed + _DEV_SEED, language=lang))
  return fileio.as_str(download_dir)

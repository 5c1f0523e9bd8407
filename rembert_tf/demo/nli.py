"""XNLI-like pairs from the demo grammar, and zero-shot transfer measured on them.

`make_nli_pair` builds (premise, hypothesis, label) from frames: entailment
drops modifiers from a positive premise (adds a place, manner or time to a
negated one), neutral does the reverse or talks about someone else,
contradiction flips the negation or moves a positive premise's event to
another place. The label depends only on the frames, so the same pair
rendered in every language has the same label, as XNLI's translations do:
fine-tune on English, evaluate zero-shot on the others.

`write_xnli_files` writes the pairs exactly as XTREME's download leaves XNLI
(`xnli/train-en.tsv`, `xnli/dev-<lang>.tsv`: `premise<TAB>hypothesis<TAB>label`;
`xnli/test-<lang>.tsv` without labels), so the regular XNLI code path
(`rembert_tf.finetuning.run_finetuning`) reads them. `zero_shot_accuracy`
fine-tunes a pre-trained encoder and, for comparison, the same encoder
randomly initialised.

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
import dataclasses
import random
from rembert_tf.demo import grammar, nli
premise, hypothesis, label = nli.make_nli_pair(random.Random(0))
print(label, "|", grammar.render(premise, "en"), "|", grammar.render(hypothesis, "en"))
rows = nli.nli_examples(100, seed=1, language="ru")   # [{"premise", "hypothesis", "label"}]
nli.write_xnli_files("/tmp/demo_download", num_train=2000)
table = nli.zero_shot_accuracy("/tmp/run/pretrain", "/tmp/run/xnli")
table["pretrained"]["es"], table["random_init"]["es"]   # accuracy in percent
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
# Distinct seeds: train / dev / test pairs are drawn independently.
_TRAIN_SEED, _DEV_SEED, _TEST_SEED = 101, 202, 303

_MODIFIERS = ("location", "manner", "time", "subject_adjective",
              "object_adjective")
# Modifiers of the event (not of a definite noun phrase): under negation,
# adding one keeps the clause true and dropping one may not.
_EVENT_MODIFIERS = ("location", "manner", "time")


def _present_modifiers(frame: grammar.Frame, fields=_MODIFIERS) -> List[str]:
  return [m for m in fields if getattr(frame, m) is not None]


def _add_modifier(rng: random.Random, frame: grammar.Frame,
                  fields=_MODIFIERS) -> Optional[grammar.Frame]:
  options = []
  if frame.location is None:
    options.append(("location", rng.choice(tuple(lx.PLACES))))
  if frame.manner is None:
    options.append(("manner", rng.choice(tuple(lx.MANNERS))))
  if frame.time is None:
    options.append(("time", rng.choice(
        [k for k, (t, _) in lx.TIMES.items() if t == frame.tense])))
  for field in ("subject", "object"):
    key = getattr(frame, field)
    if key and key not in lx.NAME_GENDER and getattr(frame, field + "_adjective") is None:
      options.append((field + "_adjective",
                      frame_sampling.adjective_for(rng, key, 1.0)))
  options = [(f, v) for f, v in options if f in fields]
  if not options:
    return None
  field, value = rng.choice(options)
  return frame.replace(**{field: value})


def _drop_modifiers(rng: random.Random, frame: grammar.Frame,
                    fields=_MODIFIERS) -> Optional[grammar.Frame]:
  present = _present_modifiers(frame, fields)
  if not present:
    return None
  dropped = rng.sample(present, rng.randint(1, len(present)))
  return frame.replace(**{m: None for m in dropped})


def _change_location(rng: random.Random, frame: grammar.Frame) -> Optional[grammar.Frame]:
  if frame.location is None:
    return None
  return frame.replace(location=rng.choice(
      [p for p in lx.PLACES if p != frame.location]))


def make_nli_pair(rng: random.Random, label: Optional[str] = None
                  ) -> Tuple[grammar.Frame, grammar.Frame, str]:
  """(premise, hypothesis, label) with label in NLI_LABELS (random if None).

  Entailment: a positive premise with modifiers dropped, or a negated premise
  with an event modifier (place, manner, time) added: negation reverses the
  direction. Neutral: the reverse of that (a positive premise with a modifier
  added, a negated one with an event modifier dropped), or a clause about
  another subject. Contradiction: the negation flipped, or a positive
  premise's place changed (one event cannot happen in two places).
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
    else:
      if premise.negated or rng.random() < 0.5:
        hypothesis = premise.replace(negated=not premise.negated)
      else:
        hypothesis = _change_location(rng, premise)
    if hypothesis is not None and hypothesis != premise:
      return premise, hypothesis, label


def nli_examples(num_examples: int, seed: int = 0,
                 language: str = "en") -> List[Dict[str, str]]:
  """`num_examples` balanced NLI rows {"premise", "hypothesis", "label"}.

  The frames depend only on `seed`, not on `language`: the same seed gives
  the same pairs (and labels) in every language, like XNLI's translations.
  """
  rng = random.Random(seed)
  rows = []
  for i in range(num_examples):
    premise, hypothesis, label = make_nli_pair(rng, NLI_LABELS[i % 3])
    rows.append({"premise": grammar.render(premise, language),
                 "hypothesis": grammar.render(hypothesis, language), "label": label})
  random.Random(seed + 1).shuffle(rows)
  return rows


def _tsv(rows, with_labels: bool) -> str:
  def clean(text):
    return " ".join(text.replace("\t", " ").split())
  lines = []
  for row in rows:
    fields = [clean(row["premise"]), clean(row["hypothesis"])]
    if with_labels:
      fields.append(row["label"])
    lines.append("\t".join(fields) + "\n")
  return "".join(lines)


def write_xnli_files(download_dir, num_train: int = 2000, num_dev: int = 300,
                     num_test: int = 0,
                     languages: Optional[Sequence[str]] = None,
                     seed: int = 0) -> str:
  """Writes download_dir/xnli/{train-en,dev-<lang>,test-<lang>}.tsv; returns download_dir."""
  languages = list(languages or lx.LANGUAGES)
  xnli_dir = fileio.join(download_dir, "xnli")
  fileio.write_text(fileio.join(xnli_dir, "train-en.tsv"), _tsv(
      nli_examples(num_train, seed=seed + _TRAIN_SEED, language="en"), True))
  for lang in languages:
    fileio.write_text(fileio.join(xnli_dir, f"dev-{lang}.tsv"), _tsv(
        nli_examples(num_dev, seed=seed + _DEV_SEED, language=lang), True))
    if num_test:
      fileio.write_text(fileio.join(xnli_dir, f"test-{lang}.tsv"), _tsv(
          nli_examples(num_test, seed=seed + _TEST_SEED, language=lang), False))
  return fileio.as_str(download_dir)


@dataclasses.dataclass(frozen=True)
class FinetuneRecipe:
  """How the demo fine-tunes on English pairs (the same for both encoders)."""
  num_train: int = 4000
  num_dev: int = 300
  learning_rate: float = 5e-4
  num_train_epochs: float = 2.0
  train_batch_size: int = 32
  seq_length: int = 64
  # Measured on the demo (seed 0): frozen input embeddings lowered the
  # pre-trained encoder's zero-shot mean and raised the random one's.
  freeze_input_embeddings: bool = False
  # Without XLA: faster on CPU for this model (and no compilation).
  jit_compile: bool = False


def _accuracy_by_language(results: Dict) -> Dict[str, float]:
  return {lang: float(value)
          for lang, value in results["scores"]["accuracy"].items()}


def zero_shot_accuracy(pretrain_dir, work_dir,
                       recipe: FinetuneRecipe = FinetuneRecipe(),
                       sp_model=None,
                       languages: Optional[Sequence[str]] = None,
                       random_init_baseline: bool = True,
                       seed: int = 0,
                       deterministic: bool = False,
                       progress=print) -> Dict[str, Dict[str, float]]:
  """Fine-tunes on English pairs, returns dev accuracy (percent) per language.

  Args:
    pretrain_dir: a pre-training model_dir or rembert_tf checkpoint directory.
    work_dir: gets download/ (the TSV files), pretrained/ and random_init/
      (each `run_finetuning`'s output: records, runs, results.json).
    recipe: the fine-tuning recipe, the same for both encoders.
    sp_model: default `pretrain_dir/sentencepiece.model`.
    languages: default every demo language.
    random_init_baseline: also fine-tune the same architecture from random
      weights (what pre-training adds).
    seed: seeds the pairs and the fine-tuning.
    deterministic: fine-tunes with `trainer.deterministic` (the same
      accuracies for a seed, however busy the machine is).
  Returns:
    {"pretrained": {lang: accuracy}, "random_init": {lang: accuracy}}.
  """
  from rembert_tf import finetuning  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  download = write_xnli_files(
      fileio.join(work_dir, "download"), num_train=recipe.num_train,
      num_dev=recipe.num_dev, languages=languages, seed=seed)
  from rembert_tf.finetuning import finetuning_experiment  # pylint: disable=g-import-not-at-top
  common = {"data.task": "xnli", "sweep.learning_rates": [recipe.learning_rate],
            "trainer.seed": seed, "trainer.deterministic": deterministic,
            "trainer.num_train_epochs": recipe.num_train_epochs,
            "trainer.train_batch_size": recipe.train_batch_size,
            "data.seq_length": recipe.seq_length,
            "data.languages": list(languages) if languages else None,
            "trainer.freeze_input_embeddings": recipe.freeze_input_embeddings,
            "trainer.jit_compile": recipe.jit_compile, "data.splits": ["dev"]}
  pretrained = finetuning.run_finetuning(
      finetuning_experiment.load_finetuning_config(params_override=dict(
          common, **{"encoder.init_checkpoint": fileio.as_str(pretrain_dir),
                     "data.data_dir": download,
                     "data.sentencepiece_model": (
                         fileio.as_str(sp_model) if sp_model else None)})),
      fileio.join(work_dir, "pretrained"), progress=progress)
  table = {"pretrained": _accuracy_by_language(pretrained)}
  if random_init_baseline:
    random_init = finetuning.run_finetuning(
        finetuning_experiment.load_finetuning_config(params_override=dict(
            common, **{"encoder.model_config": fileio.join(
                pretrain_dir, checkpoint_layout.MODEL_CONFIG_FILE),
                       "data.records_dir": pretrained["records_dir"]})),
        fileio.join(work_dir, "random_init"), progress=progress)
    table["random_init"] = _accuracy_by_language(random_init)
  return table

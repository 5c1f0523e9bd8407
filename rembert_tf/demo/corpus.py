"""The demo's pre-training corpus: stories in seven languages, written to files.

A document follows a protagonist through 6-12 sentences coming back to two
or three actions, so a masked word can often be read off the story. English
documents are monolingual; each other language's are **parallel** (each
sentence followed by its English rendering), **code-switched** (some words in
the other language, inflected as its clause writes them) or monolingual.
Languages differ in size so the data tools' language smoothing has something
to do.

Example:
```python
import random
from rembert_tf.demo import corpus
rng = random.Random(0)
corpus.sample_document(rng, "ru")                  # list of sentences
corpus.sample_parallel_document(rng, "ar")          # ar, en, ar, en, ...
corpus.sample_code_switched_document(rng, "hi")     # Hindi and English mixed
stats = corpus.generate_corpus("corpus", target_megabytes=1.0)
# -> corpus/{lang}/part-0000N.txt: one sentence per line, a blank line
#    between documents (the layout rembert-create-pretraining-data reads).
```
"""
import random
import zlib
from typing import Dict, List, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.demo import frame_sampling
from rembert_tf.demo import grammar
from rembert_tf.demo import lexicon as lx

# Relative corpus sizes (unequal on purpose: shows the smoothed sampling).
LANGUAGE_SIZES = {"en": 1.0, "es": 0.6, "ru": 0.5, "el": 0.3, "ar": 0.4,
                  "hi": 0.25, "zh": 0.5}
PARALLEL_FRACTION = 0.5
CODE_SWITCHED_FRACTION = 0.5
SWITCH_PROBABILITY = 0.5


def sample_document_frames(rng: random.Random,
                           num_sentences: Optional[int] = None
                           ) -> List[grammar.Frame]:
  """Frames of one story: a protagonist, a tense, often one place, and a
  topic of two or three verbs, each with a fixed object."""
  # Long enough to fill a 64-piece pre-training sequence: short documents
  # would make sequences mostly padding, with few predictions per step.
  num_sentences = num_sentences or rng.randint(6, 12)
  protagonist = frame_sampling.pick_subject(rng)
  protagonist_adjective = frame_sampling.adjective_for(rng, protagonist, 0.5)
  tense = rng.choice(lx.TENSES)
  place = rng.choice(tuple(lx.PLACES)) if rng.random() < 0.5 else None
  verbs = lx.verbs_for(protagonist)
  topic = {}
  for verb in rng.sample(verbs, rng.randint(2, 3)):
    obj = None
    if lx.VERBS[verb].objects is not None:
      obj = rng.choice(lx.nouns_of(lx.VERBS[verb].objects,
                                   other_than=protagonist))
    topic[verb] = (obj, frame_sampling.adjective_for(rng, obj, 0.4)
                   if obj else None)
  frames = []
  for _ in range(num_sentences):
    if rng.random() < 0.7:
      frame = frame_sampling.sample_frame(
          rng, subject=protagonist, subject_adjective=protagonist_adjective,
          tense=tense, location=place,
          topic=topic if rng.random() < 0.8 else None)
    else:
      frame = frame_sampling.sample_frame(rng, tense=tense)
    frames.append(frame)
  return frames


def sample_document(rng: random.Random, lang: str,
                    num_sentences: Optional[int] = None) -> List[str]:
  """One monolingual document (list of sentences) in `lang`."""
  return [grammar.render(f, lang)
          for f in sample_document_frames(rng, num_sentences)]


def sample_parallel_document(rng: random.Random, lang: str,
                             num_sentences: Optional[int] = None) -> List[str]:
  """A bilingual document: each sentence in `lang`, then in English."""
  lines = []
  for frame in sample_document_frames(rng, num_sentences):
    lines += [grammar.render(frame, lang), grammar.render(frame, "en")]
  return lines


def switchable_keys(frame: grammar.Frame) -> List[str]:
  """The keys code-switching may swap: content words, negation, preposition."""
  keys = ["v:" + frame.verb]
  for noun in (frame.subject, frame.object):
    if noun is not None and noun not in lx.NAME_GENDER:
      keys.append("n:" + noun)
  for kind, value in (("a", frame.subject_adjective),
                      ("a", frame.object_adjective), ("p", frame.location),
                      ("t", frame.time), ("m", frame.manner)):
    if value is not None:
      keys.append(f"{kind}:{value}")
  if frame.negated:
    keys.append("f:not_" + frame.tense)
  if frame.location is not None:
    keys.append("f:in")
  return keys


def sample_code_switched_document(rng: random.Random, lang: str,
                                  switch_probability: float = SWITCH_PROBABILITY,
                                  num_sentences: Optional[int] = None
                                  ) -> List[str]:
  """A document mixing `lang` and English within its sentences (see the module docstring)."""
  host, english = lx.lexicon(lang), lx.lexicon("en")
  lines = []
  for frame in sample_document_frames(rng, num_sentences):
    keys = [k for k in switchable_keys(frame) if rng.random() < switch_probability]
    if rng.random() < 0.5:
      lines.append(grammar.render(
          frame, lang, host.switched(keys, grammar.word_forms(frame, "en"))))
    else:
      lines.append(grammar.render(
          frame, "en", english.borrowing(lang, keys,
                                         grammar.word_forms(frame, lang))))
  return lines


def _check_arguments(languages, target_megabytes, files_per_language,
                     parallel_fraction, code_switched_fraction) -> None:
  for lang in languages:
    if lang not in lx.LANGUAGES:
      raise errors.UsageError(f"unknown demo language {lang!r} in --languages; "
                              f"choose from {', '.join(lx.LANGUAGES)}.")
  if not target_megabytes > 0:
    raise errors.UsageError(f"--megabytes is {target_megabytes:g}; give a size "
                            "above 0 (e.g. --megabytes 2).")
  if files_per_language < 1:
    raise errors.UsageError(f"--files_per_language is {files_per_language}; "
                            "give 1 or more.")
  for name, value in (("parallel_fraction", parallel_fraction),
                      ("code_switched_fraction", code_switched_fraction)):
    if not 0.0 <= value <= 1.0:
      raise errors.UsageError(f"{name} is {value:g}; give a value in [0, 1].")
  if parallel_fraction + code_switched_fraction > 1:
    raise errors.UsageError("parallel_fraction + code_switched_fraction is "
                            "above 1; lower one of them.")


def _sample_documents(rng: random.Random, lang: str, budget: int,
                      parallel_fraction: float, code_switched_fraction: float
                      ) -> List[List[str]]:
  """Documents of `lang` until `budget` UTF-8 bytes are reached."""
  documents, written = [], 0
  while written < budget:
    draw = rng.random() if lang != "en" else 1.0
    if draw < parallel_fraction:
      doc = sample_parallel_document(rng, lang)
    elif draw < parallel_fraction + code_switched_fraction:
      doc = sample_code_switched_document(rng, lang)
    else:
      doc = sample_document(rng, lang)
    documents.append(doc)
    written += len(("\n".join(doc) + "\n\n").encode("utf-8"))
  return documents


@outputs.writes_output("output_dir")
def generate_corpus(output_dir,
                    languages: Sequence[str] = lx.LANGUAGES,
                    target_megabytes: float = 2.0,
                    files_per_language: int = 2,
                    seed: int = 0,
                    parallel_fraction: float = PARALLEL_FRACTION,
                    code_switched_fraction: float = CODE_SWITCHED_FRACTION,
                    verbose: bool = False,
                    overwrite: bool = False) -> Dict[str, Dict[str, int]]:
  """Writes `output_dir/{lang}/part-NNNNN.txt` (swapped in whole); returns
  {lang: {"documents", "sentences", "bytes", "files"}}.

  The corpus is a pure function of the arguments: `target_megabytes` of UTF-8
  shared out by `LANGUAGE_SIZES`, documents dealt round-robin over
  `files_per_language` files; `verbose` prints each language's figures.
  """
  mix = (parallel_fraction, code_switched_fraction)
  _check_arguments(languages, target_megabytes, files_per_language, *mix)
  total_weight = sum(LANGUAGE_SIZES[lang] for lang in languages)
  stats = {}
  with outputs.atomic_directory(output_dir, overwrite=overwrite) as tmp:
    for lang in languages:
      rng = random.Random(zlib.crc32(f"{seed}:{lang}".encode()))
      budget = int(target_megabytes * 1e6 * LANGUAGE_SIZES[lang] / total_weight)
      documents = _sample_documents(rng, lang, budget, *mix)
      texts = ["\n".join(doc) + "\n\n" for doc in documents]
      for i in range(files_per_language):
        fileio.write_text(fileio.join(tmp, lang, f"part-{i:05d}.txt"),
                          "".join(texts[i::files_per_language]))
      stats[lang] = {"documents": len(documents),
                     "sentences": sum(len(doc) for doc in documents),
                     "bytes": sum(len(t.encode("utf-8")) for t in texts),
                     "files": files_per_language}
      if verbose:
        print(f"demo corpus {lang}: {len(documents)} documents, "
              f"{stats[lang]['sentences']} sentences, "
              f"{stats[lang]['bytes'] / 1e6:.2f} MB", flush=True)
  return stats

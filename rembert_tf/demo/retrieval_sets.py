"""Tatoeba- and BUCC-like retrieval sets in the demo's languages, in XTREME's download layout.

Each sentence is a fresh clause rendered in English and another demo
language, written as XTREME's download script leaves the real sets:
`tatoeba/<l>-en.{<l>,en}` with gold in `labels/tatoeba/test-<l>.tsv`, and
`bucc2018/<l>-en.{dev,test}.{<l>,en,gold}` (aligned pairs among unaligned
sentences, BUCC-style ids).

Example:
```python
from rembert_tf.demo import retrieval_sets
retrieval_sets.write_retrieval_sets("ret", languages=("es", "zh"),
                                    num_sentences=200)
# ret/download/tatoeba/es-en.es, ..., /tmp/ret/labels/tatoeba/test-es.tsv
```
"""
import random
from typing import Dict, List, Sequence, Tuple

from rembert_tf.common import fileio
from rembert_tf.demo import frame_sampling
from rembert_tf.demo import grammar
from rembert_tf.demo import lexicon as lx

DEFAULT_LANGUAGES = tuple(l for l in lx.LANGUAGES if l != "en")


def sample_parallel(rng: random.Random, lang: str, count: int
                    ) -> List[Tuple[str, str]]:
  """`count` (sentence in `lang`, English) pairs, no sentence twice on a side."""
  pairs, seen_source, seen_english = [], set(), set()
  while len(pairs) < count:
    frame = frame_sampling.sample_frame(rng)
    source, english = grammar.render(frame, lang), grammar.render(frame, "en")
    if source in seen_source or english in seen_english:
      continue
    seen_source.add(source)
    seen_english.add(english)
    pairs.append((source, english))
  return pairs


def _lines(values) -> str:
  return "".join(f"{v}\n" for v in values)


def write_tatoeba(root, lang: str, pairs: Sequence[Tuple[str, str]]) -> None:
  english_order = sorted(range(len(pairs)), key=lambda i: pairs[i][1])
  fileio.write_text(fileio.join(root, "download", "tatoeba", f"{lang}-en.{lang}"),
                    _lines(source for source, _ in pairs))
  fileio.write_text(fileio.join(root, "download", "tatoeba", f"{lang}-en.en"),
                    _lines(pairs[i][1] for i in english_order))
  fileio.write_text(fileio.join(root, "labels", "tatoeba", f"test-{lang}.tsv"),
                    _lines(english_order))


def write_bucc_split(root, lang: str, split: str, rng: random.Random,
                     aligned: Sequence[Tuple[str, str]],
                     unaligned: Sequence[Tuple[str, str]]) -> None:
  """Aligned pairs plus each side's share of `unaligned`, shuffled, with ids."""
  sides: Dict[str, List[Tuple[str, int]]] = {lang: [], "en": []}
  for k, (source, english) in enumerate(aligned):
    sides[lang].append((source, k))
    sides["en"].append((english, k))
  for k, (source, english) in enumerate(unaligned):
    sides[lang if k % 2 else "en"].append((source if k % 2 else english, -1))
  ids = {}
  for side, rows in sides.items():
    rng.shuffle(rows)
    ids[side] = {k: f"{side}-{i + 1:06d}" for i, (_, k) in enumerate(rows)
                 if k >= 0}
    fileio.write_text(
        fileio.join(root, "download", "bucc2018", f"{lang}-en.{split}.{side}"),
        "".join(f"{side}-{i + 1:06d}\t{text}\n"
                for i, (text, _) in enumerate(rows)))
  fileio.write_text(
      fileio.join(root, "download", "bucc2018", f"{lang}-en.{split}.gold"),
      "".join(f"{ids[lang][k]}\t{ids['en'][k]}\n" for k in range(len(aligned))))


def write_retrieval_sets(root, languages: Sequence[str] = DEFAULT_LANGUAGES,
                         num_sentences: int = 500, bucc_aligned: int = 100,
                         unaligned: int = 2, seed: int = 0) -> str:
  """ROOT/download/{tatoeba,bucc2018} and ROOT/labels/tatoeba; returns ROOT.

  BUCC's dev and test sets each hold `bucc_aligned` aligned pairs and
  `unaligned` x `bucc_aligned` sentences without a translation per side;
  test's gold is kept (`<l>-en.test.gold`), which XTREME's download deletes.
  """
  for lang in languages:
    rng = random.Random(f"{seed}-{lang}")
    write_tatoeba(root, lang, sample_parallel(rng, lang, num_sentences))
    # Each unaligned sentence is one side of a pair whose other side is
    # left out; both sides get `unaligned` per aligned pair.
    per_split = bucc_aligned * (1 + 2 * unaligned)
    pairs = sample_parallel(rng, lang, 2 * per_split)
    for split, chunk in (("dev", pairs[:per_split]),
                         ("test", pairs[per_split:])):
      write_bucc_split(root, lang, split, rng, chunk[:bucc_aligned],
                       chunk[bucc_aligned:])
  return fileio.as_str(root)

"""BUCC and Tatoeba as TFDS examples (for `tfds_testlib`), and the same Tatoeba
sentences in XTREME's download layout.

Sentences are pairs of the demo grammar (`retrieval_sets.sample_parallel`,
exact translations), fixed by their seeds:

| TFDS dataset:split          | holds                                          |
| --------------------------- | ---------------------------------------------- |
| tatoeba/tatoeba_es:train    | 20 es-en pairs (also written as download files) |
| tatoeba/tatoeba_zh:train    | 16 zh-en pairs (also written as download files) |
| tatoeba/tatoeba_ru:train    | 12 English sentences paired with themselves    |
| tatoeba/tatoeba_ar:test     | a split Tatoeba does not read: `train` missing |
| bucc/bucc_zh:validation     | 10 zh-en pairs, BUCC-style ids                 |
| bucc/bucc_zh:test           | 12 other zh-en pairs                           |
| bucc/bucc_ru:{validation,test} | English sentences paired with themselves   |
"""
import random
from typing import Dict, List, Tuple

from rembert_tf.common import fileio
from rembert_tf.demo import retrieval_sets

TATOEBA_SIZES = {"es": 20, "zh": 16}
IDENTITY = "ru"


def tatoeba_pairs(lang: str) -> List[Tuple[str, str]]:
  if lang == IDENTITY:
    english = retrieval_sets.sample_parallel(random.Random("identity"), "es", 12)
    return [(e, e) for _, e in english]
  return retrieval_sets.sample_parallel(random.Random(f"tatoeba-{lang}"), lang,
                                        TATOEBA_SIZES[lang])


def _tatoeba_rows(pairs) -> List[dict]:
  return [{"source_sentence": s, "target_sentence": t,
           "source_language": "x", "target_language": "en"} for s, t in pairs]


def bucc_pairs(lang: str, split: str) -> List[Tuple[str, str, str, str]]:
  """(source id, source, English id, English) of the split's aligned pairs;
  the English ids in another order than the source ids."""
  rng = random.Random(f"bucc-{lang}")
  pairs = retrieval_sets.sample_parallel(rng, "zh", 22)
  if lang == IDENTITY:
    pairs = [(e, e) for _, e in pairs]
  pairs = pairs[:10] if split == "validation" else pairs[10:]
  english_ids = list(range(1, len(pairs) + 1))
  rng.shuffle(english_ids)
  return [(f"{lang}-{i + 1:06d}", s, f"en-{english_ids[i]:06d}", e)
          for i, (s, e) in enumerate(pairs)]


def tfds_examples() -> Dict[Tuple[str, str, str], List[dict]]:
  """{(builder, config, split): examples} of the table above."""
  examples = {("tatoeba", f"tatoeba_{lang}", "train"):
                  _tatoeba_rows(tatoeba_pairs(lang))
              for lang in (*TATOEBA_SIZES, IDENTITY)}
  examples[("tatoeba", "tatoeba_ar", "test")] = _tatoeba_rows(
      tatoeba_pairs("es")[:3])
  for lang in ("zh", IDENTITY):
    for split in ("validation", "test"):
      examples[("bucc", f"bucc_{lang}", split)] = [
          {"source_id": s_id, "source_sentence": s, "target_id": t_id,
           "target_sentence": t}
          for s_id, s, t_id, t in bucc_pairs(lang, split)]
  return examples


def write_tatoeba_download(root) -> None:
  """ROOT/download/tatoeba/<l>-en.{<l>,en} and ROOT/labels/tatoeba of the
  TFDS Tatoeba pairs, line i of one side translating line i of the other."""
  for lang in TATOEBA_SIZES:
    pairs = tatoeba_pairs(lang)
    for side, lines in ((lang, [s for s, _ in pairs]),
                        ("en", [e for _, e in pairs])):
      fileio.write_text(
          fileio.join(root, "download", "tatoeba", f"{lang}-en.{side}"),
          "".join(f"{line}\n" for line in lines))
    fileio.write_text(fileio.join(root, "labels", "tatoeba", f"test-{lang}.tsv"),
                      "".join(f"{i}\n" for i in range(len(pairs))))

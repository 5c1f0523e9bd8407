"""The demo corpus generator: deterministic, six scripts, NLI frames."""
import collections
import dataclasses
import random
import unicodedata

import pytest

import data_testlib
from rembert_tf.data import demo_corpus


def _scripts(text):
  names = set()
  for ch in text:
    if ch.isalpha():
      name = unicodedata.name(ch, "")
      names.add(name.split()[0])
  return names


def test_every_language_uses_its_script():
  rng = random.Random(0)
  frame = demo_corpus.sample_frame(rng, subject="farmer")
  expected = {"en": "LATIN", "es": "LATIN", "ru": "CYRILLIC", "el": "GREEK",
              "ar": "ARABIC", "hi": "DEVANAGARI", "zh": "CJK"}
  for lang, script in expected.items():
    assert _scripts(demo_corpus.render(frame, lang)) == {script}, lang
  with pytest.raises(ValueError, match="unknown demo language"):
    demo_corpus.render(frame, "xx")


def test_deterministic_and_layout(tmp_path):
  a = demo_corpus.generate_corpus(tmp_path / "a", target_megabytes=0.05, seed=3)
  b = demo_corpus.generate_corpus(tmp_path / "b", target_megabytes=0.05, seed=3)
  assert a == b
  for lang in demo_corpus.LANGUAGES:
    for name in ("part-00000.txt", "part-00001.txt"):
      text_a = (tmp_path / "a" / lang / name).read_text()
      assert text_a == (tmp_path / "b" / lang / name).read_text()
      documents = text_a.strip("\n").split("\n\n")
      assert all(doc.strip() for doc in documents)
  assert a["en"]["bytes"] > a["hi"]["bytes"]  # Unequal sizes by default.
  c = demo_corpus.generate_corpus(tmp_path / "c", target_megabytes=0.05, seed=4)
  assert (tmp_path / "c" / "en" / "part-00000.txt").read_text() != (
      tmp_path / "a" / "en" / "part-00000.txt").read_text()


def test_grammar_is_learnable_structure():
  """Frequent, predictable function words: far above a unigram baseline."""
  text = (data_testlib.corpus_dir() / "en" / "part-00000.txt").read_text()
  words = text.split()
  counts = collections.Counter(words)
  assert counts.most_common(1)[0][1] / len(words) < 0.2
  # Bigram predictability: the best next word given the previous one.
  following = collections.defaultdict(collections.Counter)
  for prev, nxt in zip(words, words[1:]):
    following[prev][nxt] += 1
  hits = sum(c.most_common(1)[0][1] for c in following.values())
  assert hits / (len(words) - 1) > 0.3


def test_nli_pairs_follow_the_frames():
  rng = random.Random(5)
  for label in demo_corpus.NLI_LABELS * 20:
    premise, hypothesis, got = demo_corpus.make_nli_pair(rng, label)
    assert got == label and premise != hypothesis
    changed = {f.name for f in dataclasses.fields(premise)
               if getattr(premise, f.name) != getattr(hypothesis, f.name)}
    if label == "contradiction":
      assert changed in ({"negated"}, {"location"})
      if changed == {"location"}:
        assert not premise.negated and hypothesis.location is not None
    if label == "entailment":
      assert "negated" not in changed
      if premise.negated:  # Only event modifiers added.
        assert changed <= {"location", "manner", "time"}
        assert all(getattr(premise, f) is None for f in changed)
      else:  # Only modifiers dropped.
        assert all(getattr(hypothesis, f) is None for f in changed)
  rows_en = demo_corpus.nli_examples(30, seed=2, language="en")
  rows_zh = demo_corpus.nli_examples(30, seed=2, language="zh")
  assert [r["label"] for r in rows_en] == [r["label"] for r in rows_zh]
  assert collections.Counter(r["label"] for r in rows_en) == {
      "entailment": 10, "neutral": 10, "contradiction": 10}
  assert rows_en[0]["premise"] != rows_zh[0]["premise"]


def test_parallel_documents_pair_each_sentence_with_its_english_rendering(tmp_path):
  rng = random.Random(3)
  lines = demo_corpus.sample_parallel_document(rng, "ru", num_sentences=4)
  assert len(lines) == 8
  for source, pivot in zip(lines[::2], lines[1::2]):
    assert _scripts(source) <= {"CYRILLIC", "LATIN"} and "CYRILLIC" in _scripts(source)
    assert _scripts(pivot) == {"LATIN"}
  stats = demo_corpus.generate_corpus(tmp_path / "p", target_megabytes=0.05,
                                      seed=1, languages=("en", "el"),
                                      parallel_fraction=1.0)
  greek = (tmp_path / "p" / "el" / "part-00000.txt").read_text()
  assert all(len(doc.splitlines()) % 2 == 0 for doc in greek.strip().split("\n\n"))
  english = (tmp_path / "p" / "en" / "part-00000.txt").read_text()
  assert "GREEK" not in _scripts(english)  # English stays monolingual.
  assert stats["el"]["documents"] > 0

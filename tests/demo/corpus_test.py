"""The demo's lexicon, grammar, corpus and NLI pairs: deterministic, six scripts."""
import collections
import dataclasses
import pathlib
import random
import re
import subprocess
import sys
import unicodedata

import pytest

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.demo import corpus
from rembert_tf.demo import frame_sampling
from rembert_tf.demo import grammar
from rembert_tf.demo import lexicon
from rembert_tf.demo import nli

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = {"en": "LATIN", "es": "LATIN", "ru": "CYRILLIC", "el": "GREEK",
           "ar": "ARABIC", "hi": "DEVANAGARI", "zh": "CJK"}


def _scripts(text):
  return {unicodedata.name(ch, "").split()[0] for ch in text if ch.isalpha()}


def test_every_language_uses_its_script():
  frame = frame_sampling.sample_frame(random.Random(0), subject="farmer")
  for lang, script in SCRIPTS.items():
    assert _scripts(grammar.render(frame, lang)) == {script}, lang
  with pytest.raises(ValueError, match="unknown demo language 'xx'"):
    grammar.render(frame, "xx")


def test_loanwords_and_names_are_latin_in_every_language():
  frame = grammar.Frame(subject="Mira", verb="buy", object="radio",
                        location="hotel", tense="past")
  for lang, script in SCRIPTS.items():
    sentence = grammar.render(frame, lang)
    assert {"Mira", "radio", "hotel"} <= set(re.findall("[A-Za-z]+", sentence))
    assert _scripts(sentence) == {script, "LATIN"}, sentence


def test_code_switching_swaps_content_words_negation_and_preposition():
  frame = grammar.Frame(subject="cat", verb="eat", object="apple",
                        tense="future", negated=True, location="river")
  keys = corpus.switchable_keys(frame)
  assert keys == ["v:eat", "n:cat", "n:apple", "p:river", "f:not_future", "f:in"]
  content = [k for k in keys if not k.startswith("f:")]
  sentence = grammar.render(frame, "ru", lexicon.lexicon("ru").switched(content))
  assert sentence.split()[:4] == ["Cat", "не", "будет", "eat"]  # host negation
  assert "apple" in sentence and _scripts(sentence) == {"LATIN", "CYRILLIC"}
  # The negation and the preposition switch too, in the host's word order.
  sentence = grammar.render(frame, "ru", lexicon.lexicon("ru").switched(keys))
  assert sentence == "Cat not будет eat apple in river."
  # The plain lexicon is untouched by switching.
  assert _scripts(grammar.render(frame, "ru")) == {"CYRILLIC"}
  # The other way round: English grammar, Russian words (negation included).
  borrowed = lexicon.lexicon("en").borrowing("ru", keys)
  english = grammar.render(frame, "en", borrowed).split()
  assert english[:4] == ["The", lexicon.lexicon("ru").form("n:cat"), "will", "не"]
  assert english[-3:-1] == ["в", "the"]
  # Arabic negates each tense with its own word; each is one switchable key.
  for tense, word in (("past", "لم"), ("present", "لا"), ("future", "لن")):
    negated = dataclasses.replace(frame, tense=tense)
    assert word in grammar.render(negated, "ar").split()
    assert "not" in grammar.render(
        negated, "ar", lexicon.lexicon("ar").switched(["f:not_" + tense])).split()
  # Every content word switched: Hindi sentences with English words only
  # ("bear swim।") and English sentences with Hindi words only.
  document = corpus.sample_code_switched_document(random.Random(2), "hi", 1.0,
                                                  num_sentences=6)
  assert len(document) == 6
  assert any(line.endswith("।") for line in document)
  assert any(line.endswith(".") for line in document)
  for line in document:
    if line.endswith("।"):  # Hindi grammar: content words in English.
      assert re.findall("[A-Za-z]+", line), line
    else:  # English grammar: content words in Devanagari.
      assert "DEVANAGARI" in _scripts(line), line


def _words(sentence):
  return [w.strip(".।").lower() for w in sentence.split()]


def test_switched_words_keep_their_own_languages_inflection():
  # A switched word is the word its own language writes in that clause, so
  # code-switching puts into the other language's sentences the very tokens
  # of the monolingual text (never a bare stem no sentence contains).
  frame = grammar.Frame(subject="cat", verb="eat", object="apple", tense="past",
                        location="river", manner="quickly", negated=True)
  keys = corpus.switchable_keys(frame)
  for lang in ("es", "ru", "el", "ar", "hi"):
    forms = grammar.word_forms(frame, lang)
    assert set(keys) <= set(forms)
    native = _words(grammar.render(frame, lang))
    borrowed = _words(grammar.render(
        frame, "en", lexicon.lexicon("en").borrowing(lang, keys, forms)))
    for key in keys:
      assert forms[key].lower() in native and forms[key].lower() in borrowed
  # Russian: nouns and the past verb take endings the bare stems lack.
  ru = lexicon.lexicon("ru")
  borrowed = _words(grammar.render(frame, "en", lexicon.lexicon("en").borrowing(
      "ru", keys, grammar.word_forms(frame, "ru"))))
  assert ru.form("v:eat") not in borrowed and ru.form("n:apple") not in borrowed
  # The other way round: English words as English inflects them ("ate").
  positive = dataclasses.replace(frame, negated=False)
  switched = grammar.render(positive, "ru", ru.switched(
      ["v:eat", "n:apple"], grammar.word_forms(positive, "en")))
  assert "ate" in _words(switched) and "apple" in _words(switched)
  # Documents: no bare Spanish stem of a word Spanish inflects (nouns,
  # places, adjectives, verbs; time words take no ending) in any sentence.
  stems = {lexicon.lexicon("es").form(k) for k in lexicon.concept_keys()
           if k[0] in "npav"}
  document = corpus.sample_code_switched_document(random.Random(4), "es", 1.0,
                                                  num_sentences=12)
  assert not stems & {w for line in document for w in _words(line)}


def test_corpus_is_deterministic_and_laid_out_per_language(tmp_path):
  a = corpus.generate_corpus(tmp_path / "a", target_megabytes=0.05, seed=3)
  b = corpus.generate_corpus(tmp_path / "b", target_megabytes=0.05, seed=3)
  assert a == b
  for lang in lexicon.LANGUAGES:
    for name in ("part-00000.txt", "part-00001.txt"):
      text_a = (tmp_path / "a" / lang / name).read_text()
      assert text_a == (tmp_path / "b" / lang / name).read_text()
      assert all(doc.strip() for doc in text_a.strip("\n").split("\n\n"))
  assert a["en"]["bytes"] > a["hi"]["bytes"]  # Unequal sizes by default.
  corpus.generate_corpus(tmp_path / "c", target_megabytes=0.05, seed=4)
  assert (tmp_path / "c" / "en" / "part-00000.txt").read_text() != (
      tmp_path / "a" / "en" / "part-00000.txt").read_text()


def test_corpus_on_a_remote_file_system():
  with pytest.raises(errors.UsageError, match="the root of a bucket"):
    corpus.generate_corpus("ram://demo_corpus_test", languages=("el",))
  stats = corpus.generate_corpus("ram://demo_corpus_test/c", languages=("el",),
                                 target_megabytes=0.01, files_per_language=1)
  text = fileio.read_text("ram://demo_corpus_test/c/el/part-00000.txt")
  assert len(text.encode("utf-8")) == stats["el"]["bytes"]


@pytest.mark.parametrize("kwargs, message", [
    ({"target_megabytes": -1}, "--megabytes is -1; give a size above 0"),
    ({"target_megabytes": 0}, "--megabytes is 0"),
    ({"files_per_language": 0}, "--files_per_language is 0"),
    ({"languages": ("en", "fr")}, "unknown demo language 'fr'"),
    ({"parallel_fraction": 0.8, "code_switched_fraction": 0.5}, "above 1"),
])
def test_bad_corpus_arguments_are_refused_before_writing(tmp_path, kwargs, message):
  with pytest.raises(errors.UsageError, match=message):
    corpus.generate_corpus(tmp_path / "out", **kwargs)
  assert not (tmp_path / "out").exists()


def test_make_demo_corpus_refuses_a_size_below_zero_in_one_line(tmp_path):
  done = subprocess.run(
      [sys.executable, str(REPO / "tools" / "make_demo_corpus.py"),
       f"--output_dir={tmp_path}/corpus", "--megabytes=-1"],
      capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 1
  # (TensorFlow's start-up lines, if any, come before the message.)
  assert "Traceback" not in done.stderr
  assert done.stderr.strip().splitlines()[-1] == (
      "rembert-make-demo-corpus: error: --megabytes -1.0: give a size above "
      "0 (e.g. --megabytes 2).")
  assert not (tmp_path / "corpus").exists()


def test_make_demo_corpus_writes_the_corpus_alone_and_its_log_beside(tmp_path):
  done = subprocess.run(
      [sys.executable, str(REPO / "tools" / "make_demo_corpus.py"),
       f"--output_dir={tmp_path}/corpus", "--megabytes=0.02",
       "--languages=en,el", "--files_per_language=1"],
      capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  corpus_dir = tmp_path / "corpus"
  assert sorted(str(p.relative_to(corpus_dir)) for p in corpus_dir.rglob("*")
                if p.is_file()) == ["el/part-00000.txt", "en/part-00000.txt"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "corpus.logs"]
  (log,) = (tmp_path / "corpus.logs").glob("rembert-make-demo-corpus-*.log")
  assert "(exit code 0)" in log.read_text()


def test_document_mix_follows_the_fractions(tmp_path):
  corpus.generate_corpus(tmp_path / "p", target_megabytes=0.1, seed=1,
                         languages=("en", "el"), parallel_fraction=1.0,
                         code_switched_fraction=0.0, files_per_language=1)
  greek = (tmp_path / "p" / "el" / "part-00000.txt").read_text()
  for doc in greek.strip().split("\n\n"):
    lines = doc.splitlines()
    assert len(lines) % 2 == 0
    assert all(_scripts(line) <= {"GREEK", "LATIN"} for line in lines[::2])
    assert all(_scripts(line) == {"LATIN"} for line in lines[1::2])
  english = (tmp_path / "p" / "en" / "part-00000.txt").read_text()
  assert "GREEK" not in _scripts(english)  # English stays monolingual.
  # The test fixture corpus: no parallel or code-switched documents, so each
  # language's text is its own script plus names, loanwords and digits.
  fixture = testlib.demo_corpus_dir()
  for line in (fixture / "ru" / "part-00000.txt").read_text().splitlines():
    latin = set(re.findall("[A-Za-z]+", line))
    assert latin <= set(lexicon.NAMES) | {"pizza", "tomato", "radio", "piano",
                                          "hotel"}, line


def test_grammar_is_learnable_structure():
  """Frequent, predictable function words: far above a unigram baseline."""
  text = (testlib.demo_corpus_dir() / "en" / "part-00000.txt").read_text()
  words = text.split()
  counts = collections.Counter(words)
  assert counts.most_common(1)[0][1] / len(words) < 0.2
  following = collections.defaultdict(collections.Counter)
  for prev, nxt in zip(words, words[1:]):
    following[prev][nxt] += 1
  hits = sum(c.most_common(1)[0][1] for c in following.values())
  assert hits / (len(words) - 1) > 0.3


def test_nli_pairs_follow_the_frames():
  rng = random.Random(5)
  for label in nli.NLI_LABELS * 20:
    premise, hypothesis, got = nli.make_nli_pair(rng, label)
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
  rows_en = nli.nli_examples(30, seed=2, language="en")
  rows_zh = nli.nli_examples(30, seed=2, language="zh")
  assert [r["label"] for r in rows_en] == [r["label"] for r in rows_zh]
  assert collections.Counter(r["label"] for r in rows_en) == {
      "entailment": 10, "neutral": 10, "contradiction": 10}
  assert rows_en[0]["premise"] != rows_zh[0]["premise"]


def test_xnli_files_in_the_download_layout():
  nli.write_xnli_files("ram://demo_nli_test", num_train=9, num_dev=6,
                       languages=["en", "hi"], seed=4)
  train = fileio.read_text("ram://demo_nli_test/xnli/train-en.tsv").splitlines()
  dev_hi = fileio.read_text("ram://demo_nli_test/xnli/dev-hi.tsv").splitlines()
  assert len(train) == 9 and len(dev_hi) == 6
  assert all(len(line.split("\t")) == 3 for line in train + dev_hi)
  assert {line.split("\t")[2] for line in dev_hi} <= set(nli.NLI_LABELS)
  assert not fileio.exists("ram://demo_nli_test/xnli/dev-ru.tsv")


def test_a_second_corpus_into_the_same_folder_needs_overwrite(tmp_path):
  out = tmp_path / "corpus"
  small = dict(target_megabytes=0.01, files_per_language=1)
  corpus.generate_corpus(out, languages=("en", "el"), **small)
  first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.txt")}
  with pytest.raises(errors.OutputExistsError,
                     match=f"{out} already exists; .*--overwrite"):
    corpus.generate_corpus(out, languages=("ru",), **small)
  assert {p.relative_to(out): p.read_bytes()
          for p in out.rglob("*.txt")} == first
  corpus.generate_corpus(out, languages=("ru",), overwrite=True, **small)
  assert sorted(p.name for p in out.iterdir()) == ["ru"]  # One corpus only.
  assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]

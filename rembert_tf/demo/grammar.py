"""The demo's grammar: one clause meaning (`Frame`) rendered in seven languages.

A `Frame` holds a clause's meaning as concept names; `render` writes it in
any demo language with that language's word order and agreement (the table
in docs/demo.md), with word forms from `rembert_tf.demo.lexicon`.

Example:
```python
import random
from rembert_tf.demo import frame_sampling, grammar, lexicon
frame = frame_sampling.sample_frame(random.Random(0), subject="farmer")
for lang in lexicon.LANGUAGES:
  print(lang, grammar.render(frame, lang))
# Code-switched both ways, each word inflected by its own grammar:
verb = {"v:" + frame.verb}
print(grammar.render(frame, "hi", lexicon.lexicon("hi").switched(
    verb, grammar.word_forms(frame, "en"))))
print(grammar.render(frame, "en", lexicon.lexicon("en").borrowing(
    "hi", verb, grammar.word_forms(frame, "hi"))))
```
"""
import dataclasses
from typing import Dict, List, Optional

from rembert_tf.demo import lexicon as lx


@dataclasses.dataclass(frozen=True)
class Frame:
  """One clause's meaning. Values are concept names (the lexicon's tables);
  `subject` is a noun or a name from lexicon.NAMES, `object_count` 2..9 a
  quantity (countable nouns only), `*_definite` the/a (ignored for names);
  the time word agrees with `tense`."""
  subject: str
  verb: str
  object: Optional[str] = None
  subject_adjective: Optional[str] = None
  object_adjective: Optional[str] = None
  object_count: int = 1
  subject_definite: bool = True
  object_definite: bool = False
  tense: str = "present"
  time: Optional[str] = None
  location: Optional[str] = None
  manner: Optional[str] = None
  negated: bool = False


# ---------------------------------------------------------------------------
# Renderers. Each returns a clause's parts, lists of words keyed by `_ORDER`'s
# letters: S subject, V verb, O object, L place (M, the manner, is `_MANNER`'s).

Parts = Dict[str, Optional[List[str]]]
# Word order after the time word, which comes first in every language.
_ORDER = {"en": "SVOML", "es": "SVOLM", "ru": "SVOLM", "el": "SVOLM",
          "ar": "VSOLM", "hi": "SLOMV", "zh": "SLMVO"}
# The manner word: its ending, then the words after it.
_MANNER = {"en": ("",), "es": ("mente",), "ru": ("о",), "el": ("ως",),
           "ar": ("اً",), "hi": ("", "से"), "zh": ("", "地")}


def _phrases(frame: Frame, np, name=lambda key, case: [key]) -> Parts:
  """The subject's and the object's noun phrases, from a language's
  `np(key, adjective, definite, count, case)` for a noun and `name(key,
  case)` for a protagonist's name (by default the name alone)."""
  def phrase(key, adjective, definite, count, case):
    if key in lx.NAME_GENDER:
      return name(key, case)
    return np(key, adjective, definite, count, case)
  return {"S": phrase(frame.subject, frame.subject_adjective,
                      frame.subject_definite, 1, "nom"),
          "O": frame.object and phrase(frame.object, frame.object_adjective,
                                       frame.object_definite,
                                       frame.object_count, "acc")}


def _negated(frame: Frame, lex: lx.Lexicon, verb: List[str]) -> List[str]:
  """`verb` after the negation of the frame's tense, if the frame is negated."""
  return [lex.function_word("f:not_" + frame.tense)] + verb if frame.negated else verb


def _en(frame: Frame, lex: lx.Lexicon) -> Parts:
  # English words take the clause's English inflection (`english=`); a word
  # borrowed from another language is written as that language wrote it.
  def np(key, adjective, definite, count, unused_case):
    words = [lex.form("a:" + adjective)] if adjective else []
    if count > 1:
      return [str(count)] + words + [lex.form("n:" + key, english=lx.plural(key))]
    words.append(lex.form("n:" + key))
    if definite:
      article = "the"
    elif not lx.NOUNS[key].countable:
      article = "some"
    else:
      article = "an" if words[0][0] in "aeiou" else "a"
    return [article] + words
  verb, key = lx.VERBS[frame.verb], "v:" + frame.verb
  base = lex.form(key)
  if frame.negated:
    auxiliary = {"past": "did", "present": "does", "future": "will"}
    verbs = [auxiliary[frame.tense]] + _negated(frame, lex, [base])
  elif frame.tense == "future":
    verbs = ["will", base]
  else:
    verbs = [lex.form(key, english=(verb.past if frame.tense == "past"
                                    else verb.third_person))]
  return dict(_phrases(frame, np), V=verbs,
              L=frame.location and [lex.function_word("f:in"), "the",
                                    lex.form("p:" + frame.location)])


def _es(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, definite, count, unused_case):
    g, plural = lx.gender(key), count > 1
    ending = ("o" if g == "m" else "a") + ("s" if plural else "")
    if plural:
      words = [str(count)]
    elif definite:
      words = ["lo" if g == "m" else "la"]
    else:
      words = ["un" if g == "m" else "una"]
    words.append(lex.form("n:" + key, suffix=ending))
    if adjective:
      words.append(lex.form("a:" + adjective, suffix=ending))
    return words
  verb = lex.form("v:" + frame.verb, suffix={
      "past": "ó", "present": "a", "future": "ará"}[frame.tense])
  m = frame.location and lx.gender(frame.location) == "m"
  return dict(_phrases(frame, np), V=_negated(frame, lex, [verb]),
              L=frame.location and [
                  lex.function_word("f:in"), "lo" if m else "la",
                  lex.form("p:" + frame.location, suffix="o" if m else "a")])


def _ru(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, unused_definite, count, case):
    g, plural = lx.gender(key), count > 1
    words = [str(count)] if plural else []
    if adjective:
      if plural:
        ending = "ые"
      elif g == "f":
        ending = "ую" if case == "acc" else "ая"
      else:
        ending = "ый"
      words.append(lex.form("a:" + adjective, suffix=ending))
    if plural:
      ending = "ы"
    elif g == "f":
      ending = {"nom": "а", "acc": "у"}[case]
    else:
      ending = ""
    return words + [lex.form("n:" + key, suffix=ending)]
  key, g = "v:" + frame.verb, lx.gender(frame.subject)
  if frame.tense == "past":
    verb = [lex.form(key, suffix="ал" if g == "m" else "ала")]
  elif frame.tense == "future":
    verb = ["будет", lex.form(key, suffix="ать")]
  else:
    verb = [lex.form(key, suffix="ет")]
  m = frame.location and lx.gender(frame.location) == "m"
  return dict(_phrases(frame, np), V=_negated(frame, lex, verb),
              L=frame.location and [
                  lex.function_word("f:in"),
                  lex.form("p:" + frame.location, suffix="е" if m else "и")])


_EL_ARTICLES = {"m": {"nom": "ο", "acc": "τον"}, "f": {"nom": "η", "acc": "την"}}


def _el(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, definite, count, case):
    g = lx.gender(key)
    if count > 1:
      words = [str(count)]
      ending = "οι" if g == "m" else "ες"
    else:
      words = [_EL_ARTICLES[g][case] if definite else
               "ένας" if g == "m" else "μια"]
      ending = ("ος" if case == "nom" else "ο") if g == "m" else "α"
    if adjective:
      words.append(lex.form("a:" + adjective, suffix=ending))
    return words + [lex.form("n:" + key, suffix=ending)]
  def name(key, case):  # a Greek name takes the article
    return [_EL_ARTICLES[lx.gender(key)][case], key]
  key = "v:" + frame.verb
  if frame.tense == "past":
    verb = [lex.form(key, prefix="ε", suffix="ε")]
  else:
    verb = (["θα"] if frame.tense == "future" else []) + [
        lex.form(key, suffix="ει")]
  m = frame.location and lx.gender(frame.location) == "m"
  return dict(_phrases(frame, np, name), V=_negated(frame, lex, verb),
              L=frame.location and [
                  lex.function_word("f:in", "στο" if m else "στη"),
                  lex.form("p:" + frame.location, suffix="ο" if m else "α")])


def _ar(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, definite, count, unused_case):
    g, plural = lx.gender(key), count > 1
    if plural:
      ending = "ات" if g == "f" else "ون"
    else:
      ending = "ة" if g == "f" else ""
    prefix = "ال" if definite and not plural else ""
    words = [str(count)] if plural else []
    words.append(lex.form("n:" + key, prefix=prefix, suffix=ending))
    if adjective:
      words.append(lex.form("a:" + adjective, prefix=prefix, suffix=ending))
    return words
  key = "v:" + frame.verb
  person = "ي" if lx.gender(frame.subject) == "m" else "ت"
  if frame.negated or frame.tense == "present":
    # The negations of every tense take the present form.
    verb = _negated(frame, lex, [lex.form(key, prefix=person)])
  elif frame.tense == "past":
    verb = [lex.form(key, suffix="" if person == "ي" else "ت")]
  else:
    verb = [lex.form(key, prefix="س" + person)]
  return dict(_phrases(frame, np), V=verb,
              L=frame.location and [lex.function_word("f:in"),
                                    lex.form("p:" + frame.location, prefix="ال")])


def _hi(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, unused_definite, count, case):
    g, plural = lx.gender(key), count > 1
    if plural:
      noun_end, adjective_end = ("े", "े") if g == "m" else ("ियाँ", "ी")
    else:
      noun_end, adjective_end = ("ा", "ा") if g == "m" else ("ी", "ी")
    words = [str(count)] if plural else []
    if adjective:
      words.append(lex.form("a:" + adjective, suffix=adjective_end))
    words.append(lex.form("n:" + key, suffix=noun_end))
    if case == "acc" and lx.noun_class(key) in lx.ANIMATE:
      words.append("को")
    return words
  m = lx.gender(frame.subject) == "m"
  ending = {"past": "ा" if m else "ी", "present": "ता" if m else "ती",
            "future": "ेगा" if m else "ेगी"}[frame.tense]
  verb = [lex.form("v:" + frame.verb, suffix=ending)]
  if frame.tense == "present" and not frame.negated:
    verb.append("है")  # "nahin" drops the auxiliary.
  parts = dict(_phrases(frame, np), V=_negated(frame, lex, verb),
               L=frame.location and [lex.form("p:" + frame.location, suffix="ा"),
                                     lex.function_word("f:in")])
  if frame.tense == "past" and frame.object:
    parts["S"].append("ने")  # the ergative subject of a past transitive verb
  return parts


_ZH_CLASSIFIERS = {"human": "位", "animal": "只", "food": "份", "object": "件",
                   "text": "本"}


def _zh(frame: Frame, lex: lx.Lexicon) -> Parts:
  def np(key, adjective, definite, count, unused_case):
    classifier = _ZH_CLASSIFIERS[lx.NOUNS[key].noun_class]
    words = []
    if count > 1:
      words += [str(count), classifier]
    elif definite:
      words += ["这", classifier]
    if adjective:
      words += [lex.form("a:" + adjective), "的"]
    return words + [lex.form("n:" + key)]
  stem = lex.form("v:" + frame.verb)
  if frame.negated:
    verb = _negated(frame, lex, ["会", stem] if frame.tense == "future" else [stem])
  else:
    verb = {"past": [stem, "了"], "present": [stem],
            "future": ["会", stem]}[frame.tense]
  return dict(_phrases(frame, np), V=verb,
              L=frame.location and [lex.function_word("f:in"),
                                    lex.form("p:" + frame.location)])


_RENDERERS = {"en": _en, "es": _es, "ru": _ru, "el": _el, "ar": _ar,
              "hi": _hi, "zh": _zh}


def _words(frame: Frame, lang: str, lexicon: lx.Lexicon) -> List[str]:
  parts = _RENDERERS[lang](frame, lexicon)
  if frame.manner:
    suffix, *after = _MANNER[lang]
    parts["M"] = [lexicon.form("m:" + frame.manner, suffix=suffix)] + after
  words = lexicon.form("t:" + frame.time).split() if frame.time else []
  for part in _ORDER[lang]:
    words += parts.get(part) or []
  return words


def word_forms(frame: Frame, lang: str) -> Dict[str, str]:
  """Each concept and function-word key of `frame` -> its word in `lang`, as
  `render(frame, lang)` inflects it ("ate", "dogs"): what a code-switching
  writer inserts into a clause of another language."""
  lexicon = lx.lexicon(lang).recording()
  written = _words(frame, lang, lexicon)
  forms = {}
  for key, candidates in lexicon.written.items():
    # A renderer may form several words per key (a base form before the
    # inflected one); the one in the sentence is the form.
    used = [c for c in candidates if all(p in written for p in c.split())]
    forms[key] = (used or candidates)[-1]
  return forms


def render(frame: Frame, lang: str,
           lexicon: Optional[lx.Lexicon] = None) -> str:
  """The sentence of `frame` in language `lang`; `lexicon` (default
  `lexicon.lexicon(lang)`): the word forms, e.g. a code-switched one."""
  lexicon = lexicon or lx.lexicon(lang)  # Refuses an unknown language.
  words = _words(frame, lang, lexicon)
  if lang == "zh":
    text = ""
    for word in words:  # No spaces in CJK, except around Latin names.
      if text and (word.isascii() or text[-1].isascii()):
        text += " "
      text += word
    return text + "。"
  text = " ".join(words)
  if lang in ("en", "es", "ru", "el"):
    return text[0].upper() + text[1:] + "."
  return text + ("।" if lang == "hi" else ".")

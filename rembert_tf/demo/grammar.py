"""The demo's grammar: one clause meaning (`Frame`) rendered in seven languages.

A `Frame` holds a clause's meaning (subject, verb, object, adjectives,
quantity, tense, time, place, manner, negation) as concept names; `render`
writes it in any demo language with that language's rules:

| code | script     | word order | agreement a model can learn                                |
| ---- | ---------- | ---------- | ---------------------------------------------------------- |
| en   | Latin      | S V O      | a/an/the, 3sg -s, past/future with the time word           |
| es   | Latin      | S V O      | gendered articles, adjective after noun agrees (o/a/s)     |
| ru   | Cyrillic   | S V O      | adjective gender endings, past verb agrees with subject    |
| el   | Greek      | S V O      | nominative/accusative articles by gender                   |
| ar   | Arabic     | V S O      | al- prefix on noun and adjective, verb prefix by gender    |
| hi   | Devanagari | S O V      | ergative ne in the past, ko on animate objects, postposed  |
| zh   | CJK        | S V O      | classifiers chosen by noun class, le / mei / hui / bu      |

`rembert_tf.demo.frame_sampling` draws frames that respect selectional
restrictions. Word forms come from `rembert_tf.demo.lexicon`.

Example:
```python
import random
from rembert_tf.demo import frame_sampling, grammar, lexicon
frame = frame_sampling.sample_frame(random.Random(0), subject="farmer")
for lang in lexicon.LANGUAGES:
  print(lang, grammar.render(frame, lang))
# Code-switched: the Hindi clause with its verb in English, and the
# English clause with its verb in Hindi, each inflected by its own grammar.
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
  """One clause's meaning. Values are concept names (`lexicon.concepts()`).

  Attributes:
    subject: a noun ("farmer") or a name from lexicon.NAMES ("Mira").
    verb: a verb key ("eat"); intransitive verbs take no object.
    object: a noun key or None.
    subject_adjective, object_adjective: adjective keys or None.
    object_count: 1, or 2..9 for a quantity (countable nouns only).
    subject_definite, object_definite: the/a (ignored for names).
    tense: "past", "present" or "future" (the time word must agree).
    time, location, manner: keys or None.
    negated: the clause is negated.
  """
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

  def replace(self, **changes) -> "Frame":
    return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------------------
# Renderers. Each returns the list of words of one sentence (no punctuation).

def _check_frame(frame: Frame):
  if frame.verb not in lx.VERBS:
    raise ValueError(f"unknown verb {frame.verb!r}; see lexicon.concepts()['verbs'].")
  if frame.tense not in lx.TENSES:
    raise ValueError(f"tense must be one of {lx.TENSES}, got {frame.tense!r}.")
  if frame.time is not None and lx.TIMES[frame.time][0] != frame.tense:
    raise ValueError(f"time {frame.time!r} is {lx.TIMES[frame.time][0]}, but the "
                     f"frame's tense is {frame.tense!r}.")
  transitive = lx.VERBS[frame.verb][4] is not None
  if transitive != (frame.object is not None):
    raise ValueError(f"verb {frame.verb!r} {'needs' if transitive else 'takes no'}"
                     " object.")


def _negation(frame: Frame, lex: lx.Lexicon) -> str:
  return lex.function_word("f:not_" + frame.tense)


def _en(frame: Frame, lex: lx.Lexicon) -> List[str]:
  word = lex.word  # English inflection, or a borrowed word
  def np(key, adjective, definite, count):
    if key in lx.NAME_GENDER:
      return [key]
    _, singular, plural, _, countable = lx.NOUNS[key]
    words = ([word("a:" + adjective, lx.ADJECTIVES[adjective][0])]
             if adjective else [])
    if count > 1:
      return [str(count)] + words + [word("n:" + key, plural)]
    words = words + [word("n:" + key, singular)]
    if definite:
      article = "the"
    elif not countable:
      article = "some"
    else:
      article = "an" if words[0][0] in "aeiou" else "a"
    return [article] + words
  base, third, past, _, _, _ = lx.VERBS[frame.verb]
  verb_key = "v:" + frame.verb
  base = word(verb_key, base)
  negation = _negation(frame, lex)
  if frame.tense == "past":
    verb = ["did", negation, base] if frame.negated else [word(verb_key, past)]
  elif frame.tense == "future":
    verb = ["will", negation, base] if frame.negated else ["will", base]
  else:
    verb = ["does", negation, base] if frame.negated else [word(verb_key, third)]
  words = []
  if frame.time:
    words += word("t:" + frame.time, lx.TIMES[frame.time][1]).split()
  words += np(frame.subject, frame.subject_adjective, frame.subject_definite, 1)
  words += verb
  if frame.object:
    words += np(frame.object, frame.object_adjective, frame.object_definite,
                frame.object_count)
  if frame.manner:
    words.append(word("m:" + frame.manner, lx.MANNERS[frame.manner]))
  if frame.location:
    words += [lex.function_word("f:in"), "the", word("p:" + frame.location,
                                lx.PLACES[frame.location][0])]
  return words


def _es(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def np(key, adjective, definite, count):
    if key in lx.NAME_GENDER:
      return [key]
    g = lx.gender(key)
    vowel = "o" if g == "m" else "a"
    plural = count > 1
    noun = lex.form("n:" + key, suffix=vowel + ("s" if plural else ""))
    words = ([str(count)] if plural else
             [("lo" if g == "m" else "la") if definite else
              ("un" if g == "m" else "una")])
    words.append(noun)
    if adjective:
      words.append(lex.form("a:" + adjective,
                            suffix=vowel + ("s" if plural else "")))
    return words
  verb = lex.form("v:" + frame.verb, suffix={
      "past": "ó", "present": "a", "future": "ará"}[frame.tense])
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += np(frame.subject, frame.subject_adjective, frame.subject_definite, 1)
  words += ([_negation(frame, lex)] if frame.negated else []) + [verb]
  if frame.object:
    words += np(frame.object, frame.object_adjective, frame.object_definite,
                frame.object_count)
  if frame.location:
    g = lx.gender(frame.location)
    words += [lex.function_word("f:in"), "lo" if g == "m" else "la",
              lex.form("p:" + frame.location, suffix="o" if g == "m" else "a")]
  if frame.manner:
    words.append(lex.form("m:" + frame.manner, suffix="mente"))
  return words


def _ru(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def noun(key, case, plural):
    if key in lx.NAME_GENDER:
      return key
    if plural:
      ending = "ы"
    elif lx.gender(key) == "f":
      ending = {"nom": "а", "acc": "у", "loc": "е"}[case]
    else:
      ending = {"nom": "", "acc": "", "loc": "е"}[case]
    return lex.form("n:" + key, suffix=ending)
  def adjective(key, g, plural, case):
    if plural:
      ending = "ые"
    elif g == "f":
      ending = "ую" if case == "acc" else "ая"
    else:
      ending = "ый"
    return lex.form("a:" + key, suffix=ending)
  def np(key, adj, case, count):
    words = [str(count)] if count > 1 else []
    if adj and key not in lx.NAME_GENDER:
      words.append(adjective(adj, lx.gender(key), count > 1, case))
    return words + [noun(key, case, count > 1)]
  verb_key, g = "v:" + frame.verb, lx.gender(frame.subject)
  if frame.tense == "past":
    verb = [lex.form(verb_key, suffix="ал" if g == "m" else "ала")]
  elif frame.tense == "future":
    verb = ["будет", lex.form(verb_key, suffix="ать")]
  else:
    verb = [lex.form(verb_key, suffix="ет")]
  if frame.negated:
    verb = [_negation(frame, lex)] + verb
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += np(frame.subject, frame.subject_adjective, "nom", 1) + verb
  if frame.object:
    words += np(frame.object, frame.object_adjective, "acc", frame.object_count)
  if frame.location:
    ending = "е" if lx.gender(frame.location) == "m" else "и"
    words += [lex.function_word("f:in"),
              lex.form("p:" + frame.location, suffix=ending)]
  if frame.manner:
    words.append(lex.form("m:" + frame.manner, suffix="о"))
  return words


def _el(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def np(key, adj, case, definite, count):
    if key in lx.NAME_GENDER:
      article = {"m": {"nom": "ο", "acc": "τον"}, "f": {"nom": "η", "acc": "την"}}
      return [article[lx.gender(key)][case], key]
    g, plural = lx.gender(key), count > 1
    if plural:
      article = ("οι" if case == "nom" else ("τους" if g == "m" else "τις"))
      ending = "οι" if g == "m" else "ες"
    else:
      article = {"m": {"nom": "ο", "acc": "τον"},
                 "f": {"nom": "η", "acc": "την"}}[g][case]
      if not definite:
        article = "ένας" if g == "m" else "μια"
      ending = ("ος" if case == "nom" else "ο") if g == "m" else "α"
    words = [str(count)] if plural else [article]
    if adj:
      words.append(lex.form("a:" + adj, suffix=ending))
    return words + [lex.form("n:" + key, suffix=ending)]
  verb_key = "v:" + frame.verb
  verb = {"past": [lex.form(verb_key, prefix="ε", suffix="ε")],
          "present": [lex.form(verb_key, suffix="ει")],
          "future": ["θα", lex.form(verb_key, suffix="ει")]}[frame.tense]
  if frame.negated:
    verb = [_negation(frame, lex)] + verb
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += np(frame.subject, frame.subject_adjective, "nom",
              frame.subject_definite, 1) + verb
  if frame.object:
    words += np(frame.object, frame.object_adjective, "acc",
                frame.object_definite, frame.object_count)
  if frame.location:
    g = lx.gender(frame.location)
    words += [lex.function_word("f:in", "στο" if g == "m" else "στη"),
              lex.form("p:" + frame.location, suffix="ο" if g == "m" else "α")]
  if frame.manner:
    words.append(lex.form("m:" + frame.manner, suffix="ως"))
  return words


def _ar(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def np(key, adj, definite, count):
    if key in lx.NAME_GENDER:
      return [key]
    g, plural = lx.gender(key), count > 1
    ending = ("ات" if g == "f" else "ون") if plural else ("ة" if g == "f" else "")
    prefix = "ال" if definite and not plural else ""
    words = [str(count)] if plural else []
    words.append(lex.form("n:" + key, prefix=prefix, suffix=ending))
    if adj:
      words.append(lex.form("a:" + adj, prefix=prefix, suffix=ending))
    return words
  verb_key = "v:" + frame.verb
  person = "ي" if lx.gender(frame.subject) == "m" else "ت"
  present = lex.form(verb_key, prefix=person)
  if frame.negated:
    verb = [_negation(frame, lex), present]
  else:
    verb = {"past": [lex.form(verb_key, suffix="" if person == "ي" else "ت")],
            "present": [present],
            "future": [lex.form(verb_key, prefix="س" + person)]}[frame.tense]
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += verb
  words += np(frame.subject, frame.subject_adjective, frame.subject_definite, 1)
  if frame.object:
    words += np(frame.object, frame.object_adjective, frame.object_definite,
                frame.object_count)
  if frame.location:
    words += [lex.function_word("f:in"),
              lex.form("p:" + frame.location, prefix="ال")]
  if frame.manner:
    words.append(lex.form("m:" + frame.manner, suffix="اً"))
  return words


def _hi(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def np(key, adj, count):
    if key in lx.NAME_GENDER:
      return [key]
    g, plural = lx.gender(key), count > 1
    if plural:
      noun_end, adj_end = ("े", "े") if g == "m" else ("ियाँ", "ी")
    else:
      noun_end, adj_end = ("ा", "ा") if g == "m" else ("ी", "ी")
    words = [str(count)] if plural else []
    if adj:
      words.append(lex.form("a:" + adj, suffix=adj_end))
    return words + [lex.form("n:" + key, suffix=noun_end)]
  g = lx.gender(frame.subject)
  ending = {"past": "ा" if g == "m" else "ी",
            "present": "ता" if g == "m" else "ती",
            "future": "ेगा" if g == "m" else "ेगी"}[frame.tense]
  verb = [lex.form("v:" + frame.verb, suffix=ending)]
  if frame.tense == "present":
    verb.append("है")
  if frame.negated:
    verb = [_negation(frame, lex)] + verb
    if frame.tense == "present":
      verb = verb[:-1]  # "nahin" drops the auxiliary.
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += np(frame.subject, frame.subject_adjective, 1)
  if frame.tense == "past" and frame.object:
    words.append("ने")
  if frame.location:
    words += [lex.form("p:" + frame.location, suffix="ा"),
              lex.function_word("f:in")]
  if frame.object:
    words += np(frame.object, frame.object_adjective, frame.object_count)
    if lx.noun_class(frame.object) in lx.ANIMATE:
      words.append("को")
  if frame.manner:
    words += [lex.form("m:" + frame.manner), "से"]
  return words + verb


_ZH_CLASSIFIERS = {"human": "位", "animal": "只", "food": "份", "object": "件",
                   "text": "本"}


def _zh(frame: Frame, lex: lx.Lexicon) -> List[str]:
  def np(key, adj, definite, count):
    if key in lx.NAME_GENDER:
      return [key]
    classifier = _ZH_CLASSIFIERS[lx.NOUNS[key][0]]
    words = []
    if count > 1:
      words += [str(count), classifier]
    elif definite:
      words += ["这", classifier]
    if adj:
      words += [lex.form("a:" + adj), "的"]
    return words + [lex.form("n:" + key)]
  stem = lex.form("v:" + frame.verb)
  if frame.negated:
    verb = ([_negation(frame, lex), "会", stem] if frame.tense == "future"
            else [_negation(frame, lex), stem])
  else:
    verb = {"past": [stem, "了"], "present": [stem],
            "future": ["会", stem]}[frame.tense]
  words = [lex.form("t:" + frame.time)] if frame.time else []
  words += np(frame.subject, frame.subject_adjective, frame.subject_definite, 1)
  if frame.location:
    words += [lex.function_word("f:in"), lex.form("p:" + frame.location)]
  if frame.manner:
    words += [lex.form("m:" + frame.manner), "地"]
  words += verb
  if frame.object:
    words += np(frame.object, frame.object_adjective, frame.object_definite,
                frame.object_count)
  return words


class _RecordingLexicon(lx.Lexicon):
  """A lexicon that remembers every word it gave each key."""

  def __init__(self, base: lx.Lexicon):
    super().__init__(base.lang, base._stems, base._english, base._forms)  # pylint: disable=protected-access
    self.candidates: Dict[str, List[str]] = {}

  def _keep(self, key: str, word: str) -> str:
    self.candidates.setdefault(key, []).append(word)
    return word

  def form(self, key: str, prefix: str = "", suffix: str = "") -> str:
    return self._keep(key, super().form(key, prefix, suffix))

  def word(self, key: str, english: str) -> str:
    return self._keep(key, super().word(key, english))

  def function_word(self, key: str, native: Optional[str] = None) -> str:
    return self._keep(key, super().function_word(key, native))


def word_forms(frame: Frame, lang: str) -> Dict[str, str]:
  """Each concept and function-word key of `frame` -> its word in `lang`.

  The words as `render(frame, lang)` writes them, inflected for this clause
  ("ate", "dogs"; Spanish noun endings, Arabic verb prefixes): what a
  code-switching writer inserts into a clause of another language.
  """
  lexicon = _RecordingLexicon(lx.lexicon(lang))
  _check_frame(frame)
  written = _RENDERERS[lang](frame, lexicon)
  forms = {}
  for key, candidates in lexicon.candidates.items():
    # Renderers may form several words per key (every tense's verb, a base
    # form before the inflected one); the one in the sentence is the form.
    used = [c for c in candidates if all(p in written for p in c.split())]
    forms[key] = (used or candidates)[-1]
  return forms


_RENDERERS = {"en": _en, "es": _es, "ru": _ru, "el": _el, "ar": _ar,
              "hi": _hi, "zh": _zh}
_END = {"hi": "।", "zh": "。"}


def render(frame: Frame, lang: str,
           lexicon: Optional[lx.Lexicon] = None) -> str:
  """The sentence of `frame` in language `lang` (one of LANGUAGES).

  `lexicon`: the word forms to use (default `lexicon.lexicon(lang)`; pass
  `lexicon.lexicon(lang).switched(keys)` for a code-switched sentence).
  """
  lexicon = lexicon or lx.lexicon(lang)  # Refuses an unknown language.
  _check_frame(frame)
  words = _RENDERERS[lang](frame, lexicon)
  if lang == "zh":
    text = ""
    for word in words:  # No spaces in CJK, except around Latin names.
      if text and (word.isascii() or text[-1].isascii()):
        text += " "
      text += word
    return text + "。"
  text = " ".join(words)
  if lang in ("en", "es", "ru", "el"):
    text = text[0].upper() + text[1:]
  return text + _END.get(lang, ".")

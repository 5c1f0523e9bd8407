"""The demo's concepts and their word forms in seven languages.

English forms are plain English; the other six languages are synthetic,
their forms invented deterministically from per-script syllable inventories
and named after the language whose script they use. They share only what
real multilingual text shares: digits, names, loanwords (`LOANWORDS`) and
code-switching (`Lexicon.switched`, `Lexicon.borrowing`), where a switched
word is written as its own language inflects it in that clause.

A concept key is `KIND:NAME`, KIND one of `n` (noun), `p` (place), `t` (time
word), `m` (manner), `a` (adjective), `v` (verb): `n:cat`, `v:eat`; a name's
English form is the name, `_` written as a space.

Example:
```python
from rembert_tf.demo import lexicon
ru = lexicon.lexicon("ru")
ru.form("n:cat", suffix="а")          # the invented stem plus an ending
ru.form("n:radio", suffix="а")        # 'radio': loanwords take no endings
ru.switched({"n:cat"}).form("n:cat")  # 'cat' (code-switched)
lexicon.lexicon("en").borrowing("ru", {"n:cat"}).form("n:cat")  # 'лыдоз'
# As the other language's clause inflects it (`grammar.word_forms`):
lexicon.lexicon("en").borrowing("ru", {"n:cat"}, {"n:cat": "лыдоза"}).form("n:cat")  # 'лыдоза'
```
"""
import functools
import random
import zlib
from typing import Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Optional, Tuple

LANGUAGES = ("en", "es", "ru", "el", "ar", "hi", "zh")
TENSES = ("past", "present", "future")
ANIMATE = ("human", "animal")

# ---------------------------------------------------------------------------
# Concepts. The order of each table is the order the samplers draw from.


class Noun(NamedTuple):
  noun_class: str   # human, animal, food, object or text
  gender: str       # m or f, for the gendered languages
  countable: bool   # uncountable nouns take no quantity ("some bread")


# Nouns by class: NAME/GENDER, "*" marking an uncountable noun.
_NOUN_TABLE = {
    "human": "teacher/f doctor/m farmer/m child/m merchant/m sailor/m "
             "painter/f baker/f student/f king/m queen/f soldier/m",
    "animal": "cat/f dog/m horse/m bird/f fox/f goat/f bear/m wolf/m",
    "food": "bread/m* apple/f soup/f* rice/m* cheese/m* cake/m pear/f egg/m "
            "honey/m* pizza/f tomato/m",
    "object": "box/f key/f cup/f lamp/f rope/f basket/m hammer/m coin/f "
              "chair/f bag/m radio/m piano/m",
    "text": "book/m letter/f map/m poem/m",
}
NOUNS = {entry.split("/")[0]: Noun(cls, entry.split("/")[1][0],
                                   not entry.endswith("*"))
         for cls, entries in _NOUN_TABLE.items() for entry in entries.split()}
# English plurals other than NOUN + "s".
_PLURALS = {"child": "children", "fox": "foxes", "wolf": "wolves",
            "tomato": "tomatoes", "box": "boxes"}
# Places and their genders.
PLACES = {"garden": "m", "kitchen": "f", "market": "m", "river": "f",
          "forest": "m", "school": "f", "harbor": "m", "village": "f",
          "house": "f", "field": "m", "hotel": "m"}
# Time words and the tense they go with.
TIMES = {"yesterday": "past", "last_night": "past", "last_winter": "past",
         "today": "present", "now": "present", "every_morning": "present",
         "tomorrow": "future", "next_week": "future", "soon": "future"}
MANNERS = ("quickly", "slowly", "quietly", "happily", "carefully")
# Adjectives and the noun classes they go with.
ADJECTIVES = {
    "old": ("human", "object", "text"), "young": ANIMATE, "tall": ("human",),
    "kind": ("human",), "tired": ANIMATE, "clever": ANIMATE,
    "small": ("animal", "object"), "big": ("animal", "object"),
    "black": ("animal", "object"), "white": ("animal", "object"),
    "hungry": ANIMATE, "wild": ("animal",), "fresh": ("food",),
    "sweet": ("food",), "warm": ("food",), "cold": ("food",),
    "red": ("object", "food"), "heavy": ("object",), "new": ("object", "text"),
    "broken": ("object",), "long": ("text",), "short": ("text",),
}


class Verb(NamedTuple):
  third_person: str                   # English present, 3rd person singular
  past: str                           # English past
  subjects: Tuple[str, ...]           # noun classes that do it
  objects: Optional[Tuple[str, ...]]  # noun classes it is done to; None: intransitive
  places: Tuple[str, ...]             # where it usually happens


_ANY = ("human", "animal", "food", "object", "text")
_GOODS = ("food", "object", "text", "animal")
# Verbs by their English base form.
VERBS = {
    "eat": Verb("eats", "ate", ANIMATE, ("food",), ("kitchen", "garden")),
    "cook": Verb("cooks", "cooked", ("human",), ("food",), ("kitchen",)),
    "buy": Verb("buys", "bought", ("human",), _GOODS, ("market",)),
    "sell": Verb("sells", "sold", ("human",), _GOODS, ("market", "harbor")),
    "read": Verb("reads", "read", ("human",), ("text",), ("school", "house")),
    "write": Verb("writes", "wrote", ("human",), ("text",), ("school", "house")),
    "carry": Verb("carries", "carried", ("human",), ("object", "food", "text"),
                  ("village", "harbor")),
    "find": Verb("finds", "found", ANIMATE, _GOODS, ("forest", "field")),
    "lose": Verb("loses", "lost", ("human",), ("object", "text"),
                 ("market", "forest")),
    "see": Verb("sees", "saw", ANIMATE, _ANY, ()),
    "chase": Verb("chases", "chased", ANIMATE, ("animal",), ("field", "forest")),
    "feed": Verb("feeds", "fed", ("human",), ("animal",), ("field", "garden")),
    "wash": Verb("washes", "washed", ("human",), ("object", "animal"),
                 ("river", "kitchen")),
    "paint": Verb("paints", "painted", ("human",), ("object",), ("house",)),
    "open": Verb("opens", "opened", ("human",), ("object", "text"), ("house",)),
    "hide": Verb("hides", "hid", ANIMATE, ("object", "food"), ("forest", "garden")),
    "sleep": Verb("sleeps", "slept", ANIMATE, None, ("house", "forest")),
    "sing": Verb("sings", "sang", ("human",), None, ("school", "village")),
    "run": Verb("runs", "ran", ANIMATE, None, ("field", "forest")),
    "swim": Verb("swims", "swam", ANIMATE, None, ("river",)),
    "wait": Verb("waits", "waited", ("human",), None, ("harbor", "market")),
    "laugh": Verb("laughs", "laughed", ("human",), None, ("village",)),
    "work": Verb("works", "worked", ("human",), None, ("field", "market")),
    "dance": Verb("dances", "danced", ("human",), None, ("village",)),
}
# Protagonist names (Latin script, shared by every language) and genders.
NAME_GENDER = {"Arlo": "m", "Mira": "f", "Tevin": "m", "Sola": "f",
               "Dario": "m", "Lumi": "f", "Kasper": "m", "Nadia": "f",
               "Oren": "m", "Pia": "f", "Ruben": "m", "Yara": "f"}
NAMES = tuple(NAME_GENDER)

# Concepts every language writes in English (Latin script, no endings), as
# real languages borrow "pizza", "radio" or "hotel".
LOANWORDS: FrozenSet[str] = frozenset(
    {"n:pizza", "n:tomato", "n:radio", "n:piano", "p:hotel"})

# Function words that code-switching swaps too (`f:` keys): the negation (by
# tense: Arabic and Chinese negate each tense with another word) and the
# locative preposition, fixed per language. Switched negations tie the
# languages' negations together: what an NLI classifier needs most.
FUNCTION_WORDS = {
    "f:not_past": {"en": "not", "es": "no", "ru": "не", "el": "δεν",
                   "ar": "لم", "hi": "नहीं", "zh": "没"},
    "f:not_present": {"en": "not", "es": "no", "ru": "не", "el": "δεν",
                      "ar": "لا", "hi": "नहीं", "zh": "不"},
    "f:not_future": {"en": "not", "es": "no", "ru": "не", "el": "δεν",
                     "ar": "لن", "hi": "नहीं", "zh": "不"},
    "f:in": {"en": "in", "es": "en", "ru": "в", "el": "στο", "ar": "في",
             "hi": "में", "zh": "在"},
}


def concept_keys() -> Tuple[str, ...]:
  """Every `KIND:NAME` key a lexicon has a form for."""
  return tuple(f"{kind}:{name}" for kind, table in (
      ("n", NOUNS), ("p", PLACES), ("t", TIMES), ("m", MANNERS),
      ("a", ADJECTIVES), ("v", VERBS)) for name in table)


def english_form(key: str) -> str:
  """The English word(s) of a key (singular noun, verb base form)."""
  if key in FUNCTION_WORDS:
    return FUNCTION_WORDS[key]["en"]
  return key.split(":", 1)[1].replace("_", " ")


def plural(noun: str) -> str:
  return _PLURALS.get(noun, noun + "s")


def noun_class(name: str) -> str:
  """human / animal / food / object / text of a noun or a protagonist's name."""
  return "human" if name in NAME_GENDER else NOUNS[name].noun_class


def gender(name: str) -> str:
  """m / f of a name, a place or a noun (for the gendered languages)."""
  if name in NAME_GENDER:
    return NAME_GENDER[name]
  return PLACES[name] if name in PLACES else NOUNS[name].gender


def verbs_for(subject: str) -> List[str]:
  """The verbs whose subject can be `subject` (a noun or a name)."""
  cls = noun_class(subject)
  return [k for k, verb in VERBS.items() if cls in verb.subjects]


def nouns_of(classes: Iterable[str], other_than: str = "") -> List[str]:
  """The nouns of `classes`, in table order, without `other_than`."""
  return [k for k, noun in NOUNS.items()
          if noun.noun_class in classes and k != other_than]


def times_of(tense: str) -> List[str]:
  return [k for k, t in TIMES.items() if t == tense]


# ---------------------------------------------------------------------------
# Invented word forms.

_SYLLABLES = {
    "es": (list("bdfglmnprstv") + ["ch"], list("aeiou")),
    "ru": (list("бвгдзклмнпрстфхчш"), list("аеиоуы")),
    "el": (list("βγδζθκλμνξπρστφχ"), list("αεηιουω")),
    "ar": (list("بتجدرزسشعفقكلمنه"), ["", "ا", "و", "ي", ""]),
    "hi": (list("कखगजटडतदनपबमरलवसह"), ["", "ा", "ि", "ी", "ु", "े", "ो"]),
}
# CJK: concept characters are drawn from this block; the grammar's own
# characters are excluded so they stay unambiguous.
_ZH_FUNCTION_CHARACTERS = frozenset("了没会不在这个位只份件本地的。说和很也")
_ZH_BLOCK = (0x4E00, 0x6FFF)


def _invent_stem(lang: str, key: str, attempt: int, num_syllables: int) -> str:
  seed = "\x1f".join((lang, key, str(attempt))).encode("utf-8")
  rng = random.Random(zlib.crc32(seed))
  if lang == "zh":
    chars = []
    while len(chars) < num_syllables:
      c = chr(rng.randint(*_ZH_BLOCK))
      if c not in _ZH_FUNCTION_CHARACTERS:
        chars.append(c)
    return "".join(chars)
  consonants, vowels = _SYLLABLES[lang]
  out = [rng.choice(consonants) + rng.choice(vowels)
         for _ in range(num_syllables)]
  if lang == "ar":
    out.append(rng.choice(consonants))
  else:
    # Stems end in a consonant so the per-language endings attach cleanly.
    out.append(rng.choice([c for c in consonants if len(c) == 1]))
  return "".join(out)


def _invent_stems(lang: str) -> Dict[str, str]:
  """Deterministic invented stems, unique within the language."""
  stems, used = {}, set()
  for key in concept_keys():
    length = 1 if (lang == "zh" and key[0] in "va") else 2
    attempt = 0
    while True:
      stem = _invent_stem(lang, key, attempt, length + attempt // 8)
      if stem not in used:
        break
      attempt += 1
    used.add(stem)
    stems[key] = stem
  return stems


class Lexicon:
  """One language's word forms; some concepts may come from another language.

  `lang`: the language whose grammar uses the lexicon; `english`: the
  concepts written in English; `forms`: whole words from another language's
  rendering of the same clause. `written`, when a dict, collects every word
  given, by key (`grammar.word_forms`).
  """

  def __init__(self, lang: str, stems: Dict[str, str],
               english: FrozenSet[str] = LOANWORDS,
               forms: Optional[Mapping[str, str]] = None):
    self.lang = lang
    self._stems = stems
    self._english = english
    self._forms = dict(forms or {})
    self.written: Optional[Dict[str, List[str]]] = None

  def _give(self, key: str, word: str) -> str:
    if self.written is not None:
      self.written.setdefault(key, []).append(word)
    return word

  def form(self, key: str, prefix: str = "", suffix: str = "",
           english: Optional[str] = None) -> str:
    """The word of `key` with the language's affixes; `english`: the word as
    this English clause inflects it, when the lexicon writes `key` in English.

    A word from another language (a loanword, a code-switched word) takes no
    affixes: it stays one word in its own script, as borrowed words often do.
    """
    if key in self._forms:
      return self._give(key, self._forms[key])
    if key in self._english:
      return self._give(key, english or english_form(key))
    if self.lang == "en":
      return self._give(key, self._stems[key])
    return self._give(key, prefix + self._stems[key] + suffix)

  def function_word(self, key: str, native: Optional[str] = None) -> str:
    """The function word `key` (`FUNCTION_WORDS`) as this lexicon writes it;
    `native`: the host language's form where its grammar inflects it (Greek
    "στο" / "στη")."""
    if native is not None and self.lang != "en" and key not in self._english:
      return self._give(key, native)
    return self.form(key)  # the stems hold each language's FUNCTION_WORDS

  def recording(self) -> "Lexicon":
    """This lexicon, collecting the words it gives in `written`."""
    copy = Lexicon(self.lang, self._stems, self._english, self._forms)
    copy.written = {}
    return copy

  def switched(self, keys: Iterable[str],
               forms: Optional[Mapping[str, str]] = None) -> "Lexicon":
    """This lexicon with `keys` written in English too (code-switching);
    `forms`: the English words of the same clause by key (inflected)."""
    keys = frozenset(keys)
    return Lexicon(self.lang, self._stems, self._english | keys,
                   {k: v for k, v in (forms or {}).items() if k in keys})

  def borrowing(self, donor: str, keys: Iterable[str],
                forms: Optional[Mapping[str, str]] = None) -> "Lexicon":
    """The English lexicon with `keys` in the words of `donor` (code-switching);
    `forms`: `donor`'s words of the same clause by key, as its grammar
    inflects them (else the bare stem)."""
    if self.lang != "en":
      raise ValueError("borrowing() is for the English lexicon; use switched().")
    keys = frozenset(keys) - LOANWORDS
    return Lexicon("en", lexicon(donor)._stems, self._english - keys,
                   {k: v for k, v in (forms or {}).items() if k in keys})


@functools.lru_cache(maxsize=None)
def lexicon(lang: str) -> Lexicon:
  """The lexicon of `lang` (one of LANGUAGES), loanwords in English."""
  if lang not in LANGUAGES:
    raise ValueError(f"unknown demo language {lang!r}; choose from "
                     f"{', '.join(LANGUAGES)}.")
  if lang == "en":
    return Lexicon(lang, {}, frozenset(concept_keys()) | frozenset(FUNCTION_WORDS))
  stems = _invent_stems(lang)
  stems.update({key: forms[lang] for key, forms in FUNCTION_WORDS.items()})
  return Lexicon(lang, stems)

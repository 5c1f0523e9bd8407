"""The demo's concepts and their word forms in seven languages.

English forms are plain English; the other six languages are synthetic,
their forms invented deterministically from per-script syllable inventories
and named after the language whose script they use. They share only what
real multilingual text shares: digits, names, loanwords (`LOANWORDS`) and
code-switching (`Lexicon.switched`, `Lexicon.borrowing`), where a switched
word is written as its own language inflects it in that clause.

A concept key is `KIND:NAME`, KIND one of `n` (noun), `p` (place), `t` (time
word), `m` (manner), `a` (adjective), `v` (verb): `n:cat`, `v:eat`.

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

lexicon.english_form("t:last_night")  # 'last night'
```
"""
import functools
import random
import zlib
from typing import Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

LANGUAGES = ("en", "es", "ru", "el", "ar", "hi", "zh")
TENSES = ("past", "present", "future")

# ---------------------------------------------------------------------------
# Concepts (English forms written for this module).
# Nouns: key -> (class, singular, plural, gender for gendered languages, countable)
NOUNS = {
    # people
    "teacher": ("human", "teacher", "teachers", "f", True),
    "doctor": ("human", "doctor", "doctors", "m", True),
    "farmer": ("human", "farmer", "farmers", "m", True),
    "child": ("human", "child", "children", "m", True),
    "merchant": ("human", "merchant", "merchants", "m", True),
    "sailor": ("human", "sailor", "sailors", "m", True),
    "painter": ("human", "painter", "painters", "f", True),
    "baker": ("human", "baker", "bakers", "f", True),
    "student": ("human", "student", "students", "f", True),
    "king": ("human", "king", "kings", "m", True),
    "queen": ("human", "queen", "queens", "f", True),
    "soldier": ("human", "soldier", "soldiers", "m", True),
    # animals
    "cat": ("animal", "cat", "cats", "f", True),
    "dog": ("animal", "dog", "dogs", "m", True),
    "horse": ("animal", "horse", "horses", "m", True),
    "bird": ("animal", "bird", "birds", "f", True),
    "fox": ("animal", "fox", "foxes", "f", True),
    "goat": ("animal", "goat", "goats", "f", True),
    "bear": ("animal", "bear", "bears", "m", True),
    "wolf": ("animal", "wolf", "wolves", "m", True),
    # food
    "bread": ("food", "bread", "breads", "m", False),
    "apple": ("food", "apple", "apples", "f", True),
    "soup": ("food", "soup", "soups", "f", False),
    "rice": ("food", "rice", "rice", "m", False),
    "cheese": ("food", "cheese", "cheeses", "m", False),
    "cake": ("food", "cake", "cakes", "m", True),
    "pear": ("food", "pear", "pears", "f", True),
    "egg": ("food", "egg", "eggs", "m", True),
    "honey": ("food", "honey", "honey", "m", False),
    "pizza": ("food", "pizza", "pizzas", "f", True),      # loanword
    "tomato": ("food", "tomato", "tomatoes", "m", True),  # loanword
    # objects
    "box": ("object", "box", "boxes", "f", True),
    "key": ("object", "key", "keys", "f", True),
    "cup": ("object", "cup", "cups", "f", True),
    "lamp": ("object", "lamp", "lamps", "f", True),
    "rope": ("object", "rope", "ropes", "f", True),
    "basket": ("object", "basket", "baskets", "m", True),
    "hammer": ("object", "hammer", "hammers", "m", True),
    "coin": ("object", "coin", "coins", "f", True),
    "chair": ("object", "chair", "chairs", "f", True),
    "bag": ("object", "bag", "bags", "m", True),
    "radio": ("object", "radio", "radios", "m", True),    # loanword
    "piano": ("object", "piano", "pianos", "m", True),    # loanword
    # texts
    "book": ("text", "book", "books", "m", True),
    "letter": ("text", "letter", "letters", "f", True),
    "map": ("text", "map", "maps", "m", True),
    "poem": ("text", "poem", "poems", "m", True),
}
# Places: key -> (English, gender)
PLACES = {
    "garden": ("garden", "m"), "kitchen": ("kitchen", "f"),
    "market": ("market", "m"), "river": ("river", "f"),
    "forest": ("forest", "m"), "school": ("school", "f"),
    "harbor": ("harbor", "m"), "village": ("village", "f"),
    "house": ("house", "f"), "field": ("field", "m"),
    "hotel": ("hotel", "m"),  # loanword
}
# Time words by tense.
TIMES = {
    "yesterday": ("past", "yesterday"), "last_night": ("past", "last night"),
    "last_winter": ("past", "last winter"),
    "today": ("present", "today"), "now": ("present", "now"),
    "every_morning": ("present", "every morning"),
    "tomorrow": ("future", "tomorrow"), "next_week": ("future", "next week"),
    "soon": ("future", "soon"),
}
MANNERS = {"quickly": "quickly", "slowly": "slowly", "quietly": "quietly",
            "happily": "happily", "carefully": "carefully"}
# Adjectives: key -> (English, noun classes it goes with)
ADJECTIVES = {
    "old": ("old", ("human", "object", "text")),
    "young": ("young", ("human", "animal")),
    "tall": ("tall", ("human",)),
    "kind": ("kind", ("human",)),
    "tired": ("tired", ("human", "animal")),
    "clever": ("clever", ("human", "animal")),
    "small": ("small", ("animal", "object")),
    "big": ("big", ("animal", "object")),
    "black": ("black", ("animal", "object")),
    "white": ("white", ("animal", "object")),
    "hungry": ("hungry", ("human", "animal")),
    "wild": ("wild", ("animal",)),
    "fresh": ("fresh", ("food",)),
    "sweet": ("sweet", ("food",)),
    "warm": ("warm", ("food",)),
    "cold": ("cold", ("food",)),
    "red": ("red", ("object", "food")),
    "heavy": ("heavy", ("object",)),
    "new": ("new", ("object", "text")),
    "broken": ("broken", ("object",)),
    "long": ("long", ("text",)),
    "short": ("short", ("text",)),
}
ANY = ("human", "animal", "food", "object", "text")
ANIMATE = ("human", "animal")
# Verbs: key -> (base, 3sg, past, subject classes, object classes or None,
#                preferred places)
VERBS = {
    "eat": ("eat", "eats", "ate", ANIMATE, ("food",), ("kitchen", "garden")),
    "cook": ("cook", "cooks", "cooked", ("human",), ("food",), ("kitchen",)),
    "buy": ("buy", "buys", "bought", ("human",),
            ("food", "object", "text", "animal"), ("market",)),
    "sell": ("sell", "sells", "sold", ("human",),
             ("food", "object", "text", "animal"), ("market", "harbor")),
    "read": ("read", "reads", "read", ("human",), ("text",), ("school", "house")),
    "write": ("write", "writes", "wrote", ("human",), ("text",),
              ("school", "house")),
    "carry": ("carry", "carries", "carried", ("human",),
              ("object", "food", "text"), ("village", "harbor")),
    "find": ("find", "finds", "found", ANIMATE,
             ("object", "food", "text", "animal"), ("forest", "field")),
    "lose": ("lose", "loses", "lost", ("human",), ("object", "text"),
             ("market", "forest")),
    "see": ("see", "sees", "saw", ANIMATE, ANY, ()),
    "chase": ("chase", "chases", "chased", ANIMATE, ("animal",),
              ("field", "forest")),
    "feed": ("feed", "feeds", "fed", ("human",), ("animal",),
             ("field", "garden")),
    "wash": ("wash", "washes", "washed", ("human",), ("object", "animal"),
             ("river", "kitchen")),
    "paint": ("paint", "paints", "painted", ("human",), ("object",),
              ("house",)),
    "open": ("open", "opens", "opened", ("human",), ("object", "text"),
             ("house",)),
    "hide": ("hide", "hides", "hid", ANIMATE, ("object", "food"),
             ("forest", "garden")),
    "sleep": ("sleep", "sleeps", "slept", ANIMATE, None, ("house", "forest")),
    "sing": ("sing", "sings", "sang", ("human",), None, ("school", "village")),
    "run": ("run", "runs", "ran", ANIMATE, None, ("field", "forest")),
    "swim": ("swim", "swims", "swam", ANIMATE, None, ("river",)),
    "wait": ("wait", "waits", "waited", ("human",), None, ("harbor", "market")),
    "laugh": ("laugh", "laughs", "laughed", ("human",), None, ("village",)),
    "work": ("work", "works", "worked", ("human",), None, ("field", "market")),
    "dance": ("dance", "dances", "danced", ("human",), None, ("village",)),
}
# Protagonist names: Latin script, shared by every language.
NAMES = ("Arlo", "Mira", "Tevin", "Sola", "Dario", "Lumi", "Kasper", "Nadia",
         "Oren", "Pia", "Ruben", "Yara")
NAME_GENDER = {"Arlo": "m", "Mira": "f", "Tevin": "m", "Sola": "f",
                "Dario": "m", "Lumi": "f", "Kasper": "m", "Nadia": "f",
                "Oren": "m", "Pia": "f", "Ruben": "m", "Yara": "f"}


# Concepts every language writes in English (Latin script, no endings), as
# real languages borrow "pizza", "radio" or "hotel".
LOANWORDS: FrozenSet[str] = frozenset(
    {"n:pizza", "n:tomato", "n:radio", "n:piano", "p:hotel"})


# Function words that code-switching swaps too (`f:` keys): the negation
# (by tense: Arabic and Chinese negate each tense with another word) and the
# locative preposition. Their forms are fixed per language (the grammars use
# them); English writes "not" and "in". A bilingual writer's "not" inside a
# Russian clause puts it where "не" stands, which ties the two together: the
# languages' negations are what an NLI classifier needs most.
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
FUNCTION_KEYS: FrozenSet[str] = frozenset(FUNCTION_WORDS)


def concepts() -> Dict[str, Tuple[str, ...]]:
  """Concept names by kind (nouns, places, times, manners, adjectives, verbs, names)."""
  return {"nouns": tuple(NOUNS), "places": tuple(PLACES),
          "times": tuple(TIMES), "manners": tuple(MANNERS),
          "adjectives": tuple(ADJECTIVES), "verbs": tuple(VERBS),
          "names": NAMES}


def concept_keys() -> Tuple[str, ...]:
  """Every `KIND:NAME` key a lexicon has a form for."""
  return (tuple("n:" + k for k in NOUNS) + tuple("p:" + k for k in PLACES) +
          tuple("t:" + k for k in TIMES) + tuple("m:" + k for k in MANNERS) +
          tuple("a:" + k for k in ADJECTIVES) + tuple("v:" + k for k in VERBS))


def english_form(key: str) -> str:
  """The English word(s) of a concept key (singular noun, verb base form)."""
  kind, name = key.split(":", 1)
  if kind == "n":
    return NOUNS[name][1]
  if kind == "p":
    return PLACES[name][0]
  if kind == "t":
    return TIMES[name][1]
  if kind == "m":
    return MANNERS[name]
  if kind == "a":
    return ADJECTIVES[name][0]
  if kind == "v":
    return VERBS[name][0]
  if key in FUNCTION_WORDS:
    return FUNCTION_WORDS[key]["en"]
  raise KeyError(f"unknown concept key {key!r}; see concept_keys().")


def noun_class(name: str) -> str:
  """human / animal / food / object / text of a noun or a protagonist's name."""
  return "human" if name in NAME_GENDER else NOUNS[name][0]


def gender(name: str) -> str:
  """m / f of a name, a place or a noun (for the gendered languages)."""
  if name in NAME_GENDER:
    return NAME_GENDER[name]
  if name in PLACES:
    return PLACES[name][1]
  return NOUNS[name][3]


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
ZH_FUNCTION_CHARACTERS = frozenset("了没会不在这个位只份件本地的。说和很也")
_ZH_BLOCK = (0x4E00, 0x6FFF)


def _stable_rng(*parts: str) -> random.Random:
  return random.Random(zlib.crc32("\x1f".join(parts).encode("utf-8")))


def _invent_stem(lang: str, key: str, attempt: int, num_syllables: int) -> str:
  rng = _stable_rng(lang, key, str(attempt))
  if lang == "zh":
    chars = []
    while len(chars) < num_syllables:
      c = chr(rng.randint(*_ZH_BLOCK))
      if c not in ZH_FUNCTION_CHARACTERS:
        chars.append(c)
    return "".join(chars)
  consonants, vowels = _SYLLABLES[lang]
  out = []
  for _ in range(num_syllables):
    out.append(rng.choice(consonants) + rng.choice(vowels))
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
      stem = _invent_stem(lang, key, attempt, length + (attempt // 8))
      if stem not in used:
        break
      attempt += 1
    used.add(stem)
    stems[key] = stem
  return stems


class Lexicon:
  """One language's word forms; some concepts may come from another language.

  `lang` is the language whose grammar uses the lexicon; `stems` the invented
  stems it draws on; `english` the concepts written in English.
  """

  def __init__(self, lang: str, stems: Dict[str, str],
               english: FrozenSet[str] = LOANWORDS,
               forms: Optional[Mapping[str, str]] = None):
    self.lang = lang
    self._stems = stems
    self._english = english
    # Whole words from another language's rendering of the same clause.
    self._forms = dict(forms or {})

  def is_english(self, key: str) -> bool:
    return key in self._english

  def form(self, key: str, prefix: str = "", suffix: str = "") -> str:
    """The word of `key` with the language's affixes.

    A word from another language (a loanword, a code-switched word) takes no
    affixes: it stays one word in its own script, as borrowed words often do.
    """
    if key in self._forms:
      return self._forms[key]
    if self.is_english(key):
      return english_form(key)
    if self.lang == "en":
      return self._stems[key]
    return prefix + self._stems[key] + suffix

  def word(self, key: str, english: str) -> str:
    """The word of `key` in an English clause; `english` is its English inflection."""
    return english if self.is_english(key) else self.form(key)

  def function_word(self, key: str, native: Optional[str] = None) -> str:
    """The function word `key` (`FUNCTION_KEYS`) as this lexicon writes it.

    `native`: the host language's own form where its grammar inflects it
    (Greek "στο" / "στη"); default the `FUNCTION_WORDS` form.
    """
    if native is not None and self.lang != "en" and not self.is_english(key):
      return native
    return self.form(key)  # the stems hold each language's FUNCTION_WORDS

  def switched(self, keys: Iterable[str],
               forms: Optional[Mapping[str, str]] = None) -> "Lexicon":
    """This lexicon with `keys` written in English too (code-switching).

    `forms`: the English words of the same clause by key (inflected); keys
    without one take the English base form.
    """
    keys = frozenset(keys)
    return Lexicon(self.lang, self._stems, self._english | keys,
                   {k: v for k, v in (forms or {}).items() if k in keys})

  def borrowing(self, donor: str, keys: Iterable[str],
                forms: Optional[Mapping[str, str]] = None) -> "Lexicon":
    """The English lexicon with `keys` in the words of `donor` (code-switching).

    `forms`: `donor`'s words of the same clause by key, inflected as
    `donor`'s grammar writes them; keys without one take the bare stem.
    """
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
    return Lexicon(lang, {}, frozenset(concept_keys()) | FUNCTION_KEYS)
  stems = _invent_stems(lang)
  stems.update({key: forms[lang] for key, forms in FUNCTION_WORDS.items()})
  return Lexicon(lang, stems)

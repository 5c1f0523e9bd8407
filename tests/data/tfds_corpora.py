"""Small corpora as TFDS builders hold them (wiki40b, wikipedia, mC4).

`examples()` is keyed by (builder, config, split) for `tfds_testlib.
mocked_tfds`; `SHARDS` splits wiki40b's English train split in two shards.
wiki40b's text carries its markup (`_START_ARTICLE_`, `_START_SECTION_`,
`_START_PARAGRAPH_` lines, `_NEWLINE_` inside a paragraph).
"""

_WORDS = {
    "en": "the cat sees the dog near the river and the old mill".split(),
    "de": "die katze sieht den hund am fluss und die alte mühle".split(),
    "sw": "paka anaona mbwa karibu na mto na kinu cha zamani".split(),
    "el": "η γάτα βλέπει τον σκύλο κοντά στο ποτάμι και τον μύλο".split(),
}


def sentences(lang: str, document: int, count: int):
  """`count` deterministic sentences of a language's words."""
  words = _WORDS[lang]
  return [" ".join(words[(document * 3 + i + k) % len(words)]
                   for k in range(4 + (document + i) % 5)) + "."
          for i in range(count)]


def wiki40b_text(lang: str, document: int) -> str:
  lines = sentences(lang, document, 4)
  return (f"\n_START_ARTICLE_\nTitle {document}\n_START_SECTION_\nSection\n"
          f"_START_PARAGRAPH_\n{lines[0]}_NEWLINE_{lines[1]}\n"
          f"_START_PARAGRAPH_\n{lines[2]} {lines[3]}")


def examples():
  """{(builder, config, split): examples}."""
  wiki40b = lambda lang, n: [  # noqa: E731
      {"wikidata_id": f"Q{d}", "text": wiki40b_text(lang, d), "version_id": "1"}
      for d in range(n)]
  mc4 = lambda lang, n: [  # noqa: E731
      {"text": "\n".join(sentences(lang, d, 3)), "timestamp": "2020",
       "url": f"https://{lang}.example/{d}", "content-length": "1",
       "content-type": "text/plain"} for d in range(n)]
  return {
      ("wiki40b", "en", "train"): wiki40b("en", 40),
      ("wiki40b", "de", "train"): wiki40b("de", 12),
      ("wikipedia", "20230601.sw", "train"): [
          {"title": f"t{d}", "text": "\n\n".join(sentences("sw", d, 3))}
          for d in range(10)],
      ("c4", "multilingual", "el"): mc4("el", 8),
      ("c4", "multilingual", "sw"): mc4("sw", 6),
      ("c4", "multilingual", "sw-validation"): mc4("sw", 2),
  }


SHARDS = {("wiki40b", "en", "train"): 2}


def examples_and_shards():
  """(examples, shards): what `tfds_testlib.mocked_tfds` takes."""
  return examples(), SHARDS

"""The same XTREME examples written both ways: XTREME's `download/` files and TFDS.

`write_download(root)` writes every fine-tuning task's examples in the layout
XTREME's download script leaves (test files keep their labels here, so both
sources carry the same labelled examples); `tfds_examples()` gives the same
examples as the TFDS builders hold them, keyed by (builder, config, split) as
written in the builders' own code (independently of the table under test):
xnli's examples hold every language at once, TyDi QA's training split holds
every language, xtreme_pos's Tamil config is `xtreme_pos_tl`, PAWS-X labels
are `different_meaning` / `paraphrase`, a UD-POS word keeps the space and
zero-width non-joiner XTREME's preprocessing removes.
"""
import json
import pathlib

# Languages written per task and split (train is English).
LANGUAGES = {
    "xnli": {"dev": ["en", "de", "ar"], "test": ["en", "de", "ar"]},
    "pawsx": {"dev": ["en", "de"], "test": ["de"]},
    "udpos": {"dev": ["en", "ta"], "test": ["tl"]},
    "panx": {"dev": ["en", "de"], "test": ["ar"]},
    "xquad": {"dev": ["en"], "test": ["zh", "ar"]},
    "mlqa": {"dev": ["zh"], "test": ["ar"]},
    "tydiqa": {"test": ["en", "ar"]},
}
XNLI_LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw",
                  "th", "tr", "ur", "vi", "zh")

_PAIRS = {
    "en": [("The cat sleeps.", "A cat is sleeping.", "entailment"),
           ("The dog runs.", "The dog sleeps.", "contradiction"),
           ("Paris is big.", "Paris is in France.", "neutral")],
    "de": [("Die Katze schläft.", "Eine Katze schläft.", "entailment"),
           ("Der Hund läuft.", "Der Hund schläft.", "contradiction"),
           ("Berlin ist groß.", "Berlin ist in Deutschland.", "neutral")],
    "ar": [("القطة تنام.", "القطة نائمة.", "entailment"),
           ("الكلب يجري.", "الكلب ينام.", "contradiction"),
           ("باريس كبيرة.", "باريس في فرنسا.", "neutral")],
}
_PAWS = {"entailment": "1", "contradiction": "0", "neutral": "0"}
_PAWS_NAMES = {"0": "different_meaning", "1": "paraphrase"}

_NER = {"en": [[("Ann", "B-PER"), ("Lee", "I-PER"), ("lives", "O"),
                ("in", "O"), ("Rome", "B-LOC"), (".", "O")],
               [("Paris", "B-LOC"), ("is", "O"), ("big", "O")]],
        "de": [[("Anna", "B-PER"), ("wohnt", "O"), ("in", "O"),
                ("Rom", "B-LOC")]],
        "ar": [[("باريس", "B-LOC"), ("عاصمة", "O"), ("فرنسا", "B-LOC")]]}
# (word as TFDS holds it, word as XTREME's preprocessing writes it, tag).
_POS = {"en": [[("The", "The", "DET"), ("cat", "cat", "NOUN"),
                ("sleeps", "sleeps", "VERB"), (".", ".", "PUNCT")],
               [("New York", "NewYork", "PROPN"), ("is", "is", "AUX"),
                ("big", "big", "ADJ")]],
        "ta": [[("பூனை", "பூனை", "NOUN"), ("தூங்குகிறது", "தூங்குகிறது", "VERB")]],
        "tl": [[("Ang", "Ang", "DET"), ("pusa\u200c", "pusa", "NOUN"),
                ("ay", "ay", "AUX"), ("natutulog", "natutulog", "VERB")]]}
# The builder's config of each language (its table swaps ta and tl).
POS_CONFIGS = {"en": "xtreme_pos_en", "ta": "xtreme_pos_tl",
               "tl": "xtreme_pos_ta"}

_EN_QA = [("The Eiffel Tower is in Paris. Paris is the capital of France.",
           [("s1", "Where is the Eiffel Tower?", "Paris"),
            ("s2", "What is the capital of France?", "Paris")]),
          ("Ann Lee lives in Rome. The cat sleeps on the red mat.",
           [("s3", "Where does Ann Lee live?", "Rome"),
            ("s4", "Where does the cat sleep?", "the red mat")])]
_QA = {"en": _EN_QA,
       "zh": [("北京是中国的首都。北京大学很有名。",
               [("z1", "中国的首都是哪里？", "北京"),
                ("z2", "什么大学很有名？", "北京大学")])],
       "ar": [("باريس عاصمة فرنسا. الكتاب الجديد على الطاولة.",
               [("a1", "ما هي عاصمة فرنسا؟", "باريس")])]}


def _write(path: pathlib.Path, text: str):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _squad_text(paragraphs, id_prefix="") -> str:
  data = [{"title": f"t{i}", "paragraphs": [{"context": context, "qas": [
      {"id": id_prefix + qid, "question": question,
       "answers": [{"text": answer, "answer_start": context.index(answer)}]}
      for qid, question, answer in qas]}]}
          for i, (context, qas) in enumerate(paragraphs)]
  return json.dumps({"version": "1.1", "data": data}, ensure_ascii=False)


def _tagged_text(sentences, column) -> str:
  """As XTREME's preprocessing writes UD-POS: `word<TAB>tag` lines, a blank
  line between sentences, none after the last."""
  lines = ["\n".join(f"{s[column]}\t{s[-1]}" for s in sentence)
           for sentence in sentences]
  return "\n\n".join(lines) + "\n"


def write_download(root: pathlib.Path) -> pathlib.Path:
  """Every task's examples in XTREME's download/ layout under root."""
  pairs = lambda lang, label=lambda l: l: "".join(  # noqa: E731
      f"{a}\t{b}\t{label(l)}\n" for a, b, l in _PAIRS[lang])
  _write(root / "xnli/train-en.tsv", pairs("en"))
  _write(root / "pawsx/train-en.tsv", pairs("en", _PAWS.get))
  for split, languages in LANGUAGES["xnli"].items():
    for lang in languages:
      _write(root / f"xnli/{split}-{lang}.tsv", pairs(lang))
  for split, languages in LANGUAGES["pawsx"].items():
    for lang in languages:
      _write(root / f"pawsx/{split}-{lang}.tsv", pairs(lang, _PAWS.get))
  for task, table, column in (("panx", _NER, 0), ("udpos", _POS, 1)):
    _write(root / f"{task}/train-en.tsv", _tagged_text(table["en"], column))
    for split, languages in LANGUAGES[task].items():
      for lang in languages:
        _write(root / f"{task}/{split}-{lang}.tsv",
               _tagged_text(table[lang], column))
  _write(root / "squad/train-v1.1.json", _squad_text(_QA["en"]))
  _write(root / "squad/dev-v1.1.json", _squad_text(_QA["en"][:1]))
  for lang in LANGUAGES["xquad"]["test"]:
    _write(root / f"xquad/xquad.{lang}.json", _squad_text(_QA[lang]))
  for split, languages in LANGUAGES["mlqa"].items():
    for lang in languages:
      _write(root / f"mlqa/MLQA_V1/{split}/{split}-context-{lang}-question-"
             f"{lang}.json", _squad_text(_QA[lang]))
  _write(root / "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json",
         _squad_text(_QA["en"]))
  for lang in LANGUAGES["tydiqa"]["test"]:
    _write(root / f"tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{lang}.dev.json",
           _squad_text(_QA[lang], id_prefix=f"{lang}-"))
  return root


def _squad_examples(paragraphs, id_prefix=""):
  return [{"id": id_prefix + qid, "title": "t", "context": context,
           "question": question,
           "answers": {"text": [answer],
                       "answer_start": [context.index(answer)]}}
          for context, qas in paragraphs for qid, question, answer in qas]


def _xnli_examples(languages):
  """xnli's examples: premise and hypothesis in every language at once."""
  count = len(_PAIRS["en"])
  rows = []
  for i in range(count):
    premise = {l: (_PAIRS[l][i][0] if l in languages else f"filler {l}")
               for l in XNLI_LANGUAGES}
    hypothesis = {l: (_PAIRS[l][i][1] if l in languages else f"filler {l}")
                  for l in XNLI_LANGUAGES}
    rows.append({"premise": premise, "hypothesis": hypothesis,
                 "label": _PAIRS["en"][i][2]})
  return rows


def _ner_example(sentence, lang):
  return {"tokens": [w for w, _ in sentence], "tags": [t for _, t in sentence],
          "langs": [lang] * len(sentence), "spans": ["None"]}


def tfds_examples():
  """{(builder, config, split): examples} of every fine-tuning task."""
  ex = {("multi_nli", None, "train"): [
      {"premise": a, "hypothesis": b, "label": l} for a, b, l in _PAIRS["en"]]}
  ex[("xnli", None, "validation")] = _xnli_examples(LANGUAGES["xnli"]["dev"])
  ex[("xnli", None, "test")] = _xnli_examples(LANGUAGES["xnli"]["test"])
  paws = lambda lang: [{"sentence1": a, "sentence2": b,  # noqa: E731
                        "label": _PAWS_NAMES[_PAWS[l]]} for a, b, l in _PAIRS[lang]]
  ex[("paws_x_wiki", "en", "train")] = paws("en")
  for split, tfds_split in (("dev", "validation"), ("test", "test")):
    for lang in LANGUAGES["pawsx"][split]:
      ex[("paws_x_wiki", lang, tfds_split)] = paws(lang)
    for lang in LANGUAGES["panx"][split]:
      ex[("wikiann", lang, tfds_split)] = [_ner_example(s, lang)
                                           for s in _NER[lang]]
  ex[("wikiann", "en", "train")] = [_ner_example(s, "en") for s in _NER["en"]]
  pos = lambda lang: [{"tokens": [w[0] for w in s],  # noqa: E731
                       "upos": [w[2] for w in s]} for s in _POS[lang]]
  ex[("xtreme_pos", "xtreme_pos_en", "train")] = pos("en")
  for split in ("dev", "test"):
    for lang in LANGUAGES["udpos"][split]:
      ex[("xtreme_pos", POS_CONFIGS[lang], split)] = pos(lang)
  ex[("squad", "v1.1", "train")] = _squad_examples(_QA["en"])
  ex[("squad", "v1.1", "validation")] = _squad_examples(_QA["en"][:1])
  for lang in LANGUAGES["xquad"]["test"]:
    ex[("xquad", lang, "test")] = _squad_examples(_QA[lang])
  for split, tfds_split in (("dev", "validation"), ("test", "test")):
    for lang in LANGUAGES["mlqa"][split]:
      ex[("mlqa", lang, tfds_split)] = _squad_examples(_QA[lang])
  # TyDi QA's training split holds every language; XTREME trains on English.
  ex[("tydi_qa", "goldp", "train")] = (
      _squad_examples(_QA["en"][:1], "english-") +
      _squad_examples(_QA["ar"], "arabic-") +
      _squad_examples(_QA["en"][1:], "english-"))
  for lang in LANGUAGES["tydiqa"]["test"]:
    ex[("tydi_qa", "goldp", f"validation-{lang}")] = _squad_examples(
        _QA[lang], id_prefix=f"{lang}-")
  return ex


# Retrieval: BUCC's aligned pairs (TFDS holds these only) and Tatoeba's.
BUCC_PAIRS = [("de-000001", "Die Katze schläft.", "en-000007", "The cat sleeps."),
              ("de-000004", "Der Hund läuft.", "en-000002", "The dog runs.")]
TATOEBA_PAIRS = [("Guten Morgen.", "Good morning."), ("Danke.", "Thank you.")]


def retrieval_examples():
  """{(builder, config, split): examples} of BUCC (de) and Tatoeba (de)."""
  bucc = [{"source_id": s_id, "source_sentence": s, "target_id": t_id,
           "target_sentence": t} for s_id, s, t_id, t in BUCC_PAIRS]
  return {("bucc", "bucc_de", "validation"): bucc,
          ("bucc", "bucc_de", "test"): bucc[::-1],
          ("tatoeba", "tatoeba_de", "train"): [
              {"source_sentence": s, "target_sentence": t,
               "source_language": "de", "target_language": "en"}
              for s, t in TATOEBA_PAIRS]}

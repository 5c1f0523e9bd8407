"""Fixtures for the XTREME fine-tuning tests: a tiny SentencePiece model and a
small `download/` folder in the benchmark's real layout (en, de, ar, zh)."""
import json
import pathlib

import pytest

SENTENCES = {
    "en": ["The cat sleeps on the red mat.", "A dog runs in the park.",
           "Ann Lee lives in Rome.", "Paris is the capital of France.",
           "The Eiffel Tower is in Paris.", "Berlin is a big city."],
    "de": ["Die Katze schläft auf der roten Matte.", "Ein Hund läuft im Park.",
           "Anna wohnt in Rom.", "Berlin ist eine große Stadt."],
    "ar": ["القطة تنام على الحصيرة.", "الكلب يجري في الحديقة.",
           "باريس عاصمة فرنسا.", "الكتاب الجديد على الطاولة."],
    "zh": ["猫睡在红色的垫子上。", "北京是中国的首都。", "狗在公园里跑。",
           "北京大学很有名。"],
}


def _write(path: pathlib.Path, text: str):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _squad(paragraphs):
  """[(context, [(qid, question, answer_text)])] -> SQuAD v1.1 JSON text."""
  data = [{"title": f"t{i}", "paragraphs": [{"context": context, "qas": [
      {"id": qid, "question": question,
       "answers": [{"text": answer, "answer_start": context.index(answer)}]}
      for qid, question, answer in qas]}]}
      for i, (context, qas) in enumerate(paragraphs)]
  return json.dumps({"version": "1.1", "data": data}, ensure_ascii=False)


UDPOS = {"en": [[("The", "DET"), ("cat", "NOUN"), ("sleeps", "VERB"),
                 ("on", "ADP"), ("the", "DET"), ("red", "ADJ"), ("mat", "NOUN"),
                 (".", "PUNCT")],
                [("Ann", "PROPN"), ("lives", "VERB"), ("in", "ADP"),
                 ("Rome", "PROPN"), (".", "PUNCT")]] * 3,
          "de": [[("Anna", "PROPN"), ("wohnt", "VERB"), ("in", "ADP"),
                  ("Rom", "PROPN"), (".", "PUNCT")]],
          "ar": [[("باريس", "PROPN"), ("عاصمة", "NOUN"), ("فرنسا", "PROPN")]]}


def _write_udpos(d: pathlib.Path):
  """udpos/ as XTREME's preprocessing writes it: `word<TAB>tag` lines (test:
  the word only), a blank line between sentences and none after the last."""
  for lang, sentences in UDPOS.items():
    tagged = "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s)
                         for s in sentences) + "\n"
    words = "\n\n".join("\n".join(w for w, _ in s) for s in sentences) + "\n"
    if lang == "en":
      _write(d / "udpos/train-en.tsv", tagged)
    _write(d / f"udpos/dev-{lang}.tsv", tagged)
    _write(d / f"udpos/test-{lang}.tsv", words)


@pytest.fixture(scope="session")
def sp_model(tmp_path_factory):
  import sentencepiece as spm
  d = tmp_path_factory.mktemp("spm")
  corpus = d / "corpus.txt"
  lines = [s for group in SENTENCES.values() for s in group] * 3
  corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
  spm.SentencePieceTrainer.train(
      input=str(corpus), model_prefix=str(d / "sentencepiece"),
      vocab_size=200, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1,
      eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
      character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
  return d / "sentencepiece.model"


@pytest.fixture(scope="session")
def download_dir(tmp_path_factory):
  """XTREME download/ layout: xnli, pawsx, udpos, panx, squad, xquad, mlqa,
  tydiqa."""
  d = tmp_path_factory.mktemp("download")
  pairs = {"en": [("The cat sleeps.", "A cat is sleeping.", "entailment"),
                  ("The dog runs.", "The dog sleeps.", "contradiction"),
                  ("Paris is big.", "Paris is in France.", "neutral"),
                  ("Berlin is a city.", "Berlin is a city.", "entailment")] * 2,
           "de": [("Die Katze schläft.", "Eine Katze schläft.", "entailment"),
                  ("Der Hund läuft.", "Der Hund schläft.", "contradiction")],
           "ar": [("القطة تنام.", "القطة نائمة.", "entailment"),
                  ("الكلب يجري.", "الكلب ينام.", "contradiction"),
                  ("باريس كبيرة.", "باريس في فرنسا.", "neutral")]}
  for lang, rows in pairs.items():
    if lang == "en":
      _write(d / "xnli/train-en.tsv",
             "".join(f"{a}\t{b}\t{l}\n" for a, b, l in rows))
    _write(d / f"xnli/dev-{lang}.tsv",
           "".join(f"{a}\t{b}\t{l}\n" for a, b, l in rows))
    _write(d / f"xnli/test-{lang}.tsv", "".join(f"{a}\t{b}\n" for a, b, _ in rows))
    labels = {"entailment": "1", "contradiction": "0", "neutral": "0"}
    if lang == "en":
      _write(d / "pawsx/train-en.tsv",
             "".join(f"{a}\t{b}\t{labels[l]}\n" for a, b, l in rows))
    if lang != "ar":
      _write(d / f"pawsx/dev-{lang}.tsv",
             "".join(f"{a}\t{b}\t{labels[l]}\n" for a, b, l in rows))
  ner = {"en": [[("Ann", "B-PER"), ("Lee", "I-PER"), ("lives", "O"),
                 ("in", "O"), ("Rome", "B-LOC"), (".", "O")],
                [("Paris", "B-LOC"), ("is", "O"), ("the", "O"),
                 ("capital", "O"), ("of", "O"), ("France", "B-LOC")]] * 3,
         "de": [[("Anna", "B-PER"), ("wohnt", "O"), ("in", "O"),
                 ("Rom", "B-LOC")]],
         "ar": [[("باريس", "B-LOC"), ("عاصمة", "O"), ("فرنسا", "B-LOC")]]}
  for lang, sentences in ner.items():
    text = "".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n"
                   for s in sentences)
    if lang == "en":
      _write(d / "panx/train-en.tsv", text)
    _write(d / f"panx/dev-{lang}.tsv", text)
    _write(d / f"panx/test-{lang}.tsv", "".join(
        "".join(f"{w}\n" for w, _ in s) + "\n" for s in sentences))
  _write_udpos(d)
  en_qa = [("The Eiffel Tower is in Paris. Paris is the capital of France.",
            [("s1", "Where is the Eiffel Tower?", "Paris"),
             ("s2", "What is the capital of France?", "Paris")]),
           ("Ann Lee lives in Rome. The cat sleeps on the red mat.",
            [("s3", "Where does Ann Lee live?", "Rome"),
             ("s4", "Where does the cat sleep?", "the red mat")])]
  _write(d / "squad/train-v1.1.json", _squad(en_qa * 2))
  _write(d / "squad/dev-v1.1.json", _squad(en_qa))
  zh_qa = [("北京是中国的首都。北京大学很有名。",
            [("z1", "中国的首都是哪里？", "北京")])]
  ar_qa = [("باريس عاصمة فرنسا. الكتاب الجديد على الطاولة.",
            [("a1", "ما هي عاصمة فرنسا؟", "باريس")])]
  for name, qa in (("en", en_qa), ("zh", zh_qa), ("ar", ar_qa)):
    _write(d / f"xquad/xquad.{name}.json", _squad(qa))
    _write(d / f"mlqa/MLQA_V1/dev/dev-context-{name}-question-{name}.json",
           _squad(qa))
  _write(d / "tydiqa/tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json",
         _squad(en_qa * 2))
  for name, qa in (("en", en_qa), ("ar", ar_qa)):
    _write(d / f"tydiqa/tydiqa-goldp-v1.1-dev/tydiqa.goldp.{name}.dev.json",
           _squad(qa))
  return d


@pytest.fixture(scope="session")
def tiny_cfg():
  """A one-layer decoupled RemBERT small enough for a few-second fine-tune."""
  from rembert_tf.modeling import rembert_config
  return rembert_config.load_model_config(
      "tiny", {"max_position_embeddings": 64, "vocab_size": 256,
               "hidden_size": 64, "intermediate_size": 128,
               "input_embedding_size": 32, "output_embedding_size": 96,
               "num_hidden_layers": 1})


@pytest.fixture(scope="session")
def checkpoint_dir(tiny_cfg, sp_model, tmp_path_factory):
  """A rembert_tf checkpoint dir, as a pre-training model_dir leaves it."""
  import shutil
  from rembert_tf.checkpoints import checkpoint_layout
  from rembert_tf.checkpoints import checkpoint_writing
  from rembert_tf.modeling import rembert_config
  from rembert_tf.modeling import rembert_encoder
  d = tmp_path_factory.mktemp("pretrain_dir")
  encoder = rembert_encoder.build_encoder(tiny_cfg)
  rembert_config.save_model_config(tiny_cfg, d / checkpoint_layout.MODEL_CONFIG_FILE)
  checkpoint_writing.write_encoder_checkpoint(encoder, d, step=7)
  shutil.copy(sp_model, d / checkpoint_layout.SENTENCEPIECE_FILE)
  return d


@pytest.fixture(scope="session")
def xnli_records(sp_model, download_dir, tmp_path_factory):
  from rembert_tf.data import finetuning_data
  d = tmp_path_factory.mktemp("xnli_records")
  finetuning_data.create_finetuning_data(
      "xnli", download_dir, sp_model, d, seq_length=24, splits=("dev",),
      progress=lambda s: None)
  return d / "xnli"

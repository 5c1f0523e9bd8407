"""BUCC and Tatoeba read from XTREME's download layout; missing files named with the fix."""
import pytest

from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.retrieval import bitext


def _write(path, text):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


@pytest.fixture
def download(tmp_path):
  d = tmp_path / "download"
  for split in ("dev", "test"):
    _write(d / f"bucc2018/de-en.{split}.de",
           "de-000001\tDer Hund schläft.\nde-000002\tDie Katze läuft.\n")
    _write(d / f"bucc2018/de-en.{split}.en",
           "en-000007\tThe cat runs.\nen-000009\tThe dog sleeps.\n"
           "en-000010\tRain.\n")
  _write(d / "bucc2018/de-en.dev.gold",
         "de-000001\ten-000009\nde-000002\ten-000007\n")
  _write(d / "tatoeba/fr-en.fr", "Le chat court.\nIl pleut.\n")
  _write(d / "tatoeba/fr-en.en", "It rains.\nThe cat runs.\n")
  _write(d / "tatoeba/de-en.en", "x\n")
  return d


def test_reads_both_tasks(download):
  source = bitext.DownloadSource(download)
  dev = source("bucc2018", "dev", "de")
  assert dev.source_ids == ("de-000001", "de-000002")
  assert dev.target_sentences == ("The cat runs.", "The dog sleeps.", "Rain.")
  assert dev.gold == frozenset({("de-000001", "en-000009"),
                                ("de-000002", "en-000007")})
  assert source("bucc2018", "test", "de").gold is None  # XTREME deletes it
  tatoeba = source("tatoeba", "test", "fr")
  assert tatoeba.source_ids == ("0", "1") and tatoeba.gold is None
  assert tatoeba.target_sentences == ("It rains.", "The cat runs.")
  assert source.discover_languages("tatoeba") == ["de", "fr"]
  assert source.discover_languages("bucc2018") == ["de"]


def test_the_layout_is_the_task_tables():
  """Where the files lie is read from the tasks' entries, as fine-tuning's."""
  bucc = xtreme_tasks.get("bucc2018").download
  assert bucc.ids_in_lines
  assert bucc.path("download", "dev", "gold", "de") == (
      "download/bucc2018/de-en.dev.gold")
  assert ("test", "gold") not in bucc.required  # XTREME's script deletes it
  tatoeba = xtreme_tasks.get("tatoeba").download
  assert not tatoeba.ids_in_lines and set(tatoeba.files) == {"test"}
  assert tatoeba.path("download", "test", "source", "fr") == (
      "download/tatoeba/fr-en.fr")


def test_missing_files_are_named_with_the_fix(download):
  source = bitext.DownloadSource(download)
  source.check("bucc2018", ["de"])
  (download / "bucc2018/de-en.dev.gold").unlink()
  with pytest.raises(bitext.RetrievalDataError,
                     match=r"Missing .*bucc2018/de-en.dev.gold \(a BUCC "
                     r"language without a sample set, de\): the threshold is "
                     r"chosen on BUCC's sample set"):
    source.check("bucc2018", ["de"])
  with pytest.raises(bitext.RetrievalDataError,
                     match=r"Missing .*tatoeba/de-en.de \(tatoeba test source "
                     r"file, de\): run XTREME's download script"):
    source.check("tatoeba", ["fr", "de"])


def test_malformed_lines_are_named(download):
  _write(download / "bucc2018/de-en.test.en", "en-000001 no tab here\n")
  with pytest.raises(bitext.RetrievalDataError,
                     match=r"de-en.test.en: line 1 has no tab; each line must "
                     r"be `<id><TAB><sentence>`"):
    bitext.DownloadSource(download)("bucc2018", "test", "de")
  (download / "tatoeba/fr-en.fr").write_bytes(b"\xff\xfe bad")
  with pytest.raises(bitext.RetrievalDataError, match=(
      r"fr-en.fr:1: not UTF-8 text \(invalid start byte at byte 0 of the "
      r"file, byte 0 of line 1\); save the file as UTF-8.")):
    bitext.DownloadSource(download)("tatoeba", "test", "fr")


# (file to write, its text, the line's parts): inputs that cannot be scored.
UNSCORABLE = [
    ("bucc2018/de-en.dev.gold", "de-000005\ten-000009\nde-000002\ten-000070\n",
     ["bucc2018/de-en.dev.gold: 2 of its 2 gold pairs name sentence ids that "
      "are not in ", "(e.g. de-000002 en-000070); the gold file and the "
      "sentence files must come from the same download."]),
    ("bucc2018/de-en.dev.gold", "de-000001\ten-000009\nde-000002\ten-000077\n",
     ["1 of its 2 gold pairs name sentence ids"]),
    ("bucc2018/de-en.dev.gold", "",
     ["bucc2018/de-en.dev.gold: the gold alignment holds no pair; give the "
      "gold file of "]),
    ("tatoeba/fr-en.en", "It rains.\nThe cat runs.\nOne more.\n",
     ["tatoeba/fr-en.fr / ", "tatoeba/fr-en.en: 2 fr sentences but 3 English "
      "ones; Tatoeba's two files are parallel line by line"]),
]


@pytest.mark.parametrize("name, text, parts", UNSCORABLE,
                         ids=["gold_matches_nothing", "gold_partly_elsewhere",
                              "gold_empty", "tatoeba_sides_differ"])
def test_inputs_that_cannot_be_scored_are_named(download, name, text, parts):
  _write(download / name, text)
  task, lang, split = (("tatoeba", "fr", "test") if "tatoeba" in name
                       else ("bucc2018", "de", "dev"))
  with pytest.raises(bitext.RetrievalDataError) as e:
    bitext.DownloadSource(download)(task, split, lang)
  message = str(e.value)
  assert "\n" not in message
  for part in parts:
    assert part in message, (part, message)


def test_retrieval_reads_every_input_before_embedding_any(download, tmp_path):
  from rembert_tf.retrieval import retrieval_runner  # pylint: disable=g-import-not-at-top

  class NeverEmbeds:
    source, layer, num_layers, seq_length = "none", 1, 1, 8

    def embed(self, sentences, description):
      raise AssertionError(f"embedded {description} before every check")

  _write(download / "tatoeba/fr-en.en", "Only one.\n")
  with pytest.raises(bitext.RetrievalDataError, match="1 English ones"):
    retrieval_runner.run_retrieval(
        {"bucc2018": ["de"], "tatoeba": ["fr"]}, bitext.DownloadSource(download),
        NeverEmbeds(), None, tmp_path / "out", progress=lambda line: None)
  assert not (tmp_path / "out").exists()

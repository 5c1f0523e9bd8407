"""`bitext.TfdsSource`: Bitexts from prepared TFDS, the prepared languages,
the checks made before any work."""
import pytest

import retrieval_tfds_fixtures as fixtures
import tfds_testlib
from rembert_tf.data import tfds_reader
from rembert_tf.retrieval import bitext


def test_reads_bitexts_and_finds_the_prepared_languages(tmp_path):
  with tfds_testlib.mocked_tfds(tmp_path, fixtures.tfds_examples()):
    source = bitext.TfdsSource(tmp_path)
    tatoeba = source("tatoeba", "test", "es")
    sample = source("bucc2018", "dev", "zh")
    languages = {task: source.discover_languages(task)
                 for task in ("tatoeba", "bucc2018")}
    source.check("bucc2018", ["ru", "zh"])
    with pytest.raises(tfds_reader.TfdsError, match="has no split 'train'"):
      source.check("tatoeba", ["es", "ar"])
  pairs = fixtures.tatoeba_pairs("es")
  assert (tatoeba.task, tatoeba.split, tatoeba.language) == ("tatoeba", "test",
                                                             "es")
  assert tatoeba.source_sentences == tuple(s for s, _ in pairs)
  assert tatoeba.target_sentences == tuple(e for _, e in pairs)
  assert tatoeba.gold == {(str(i), str(i)) for i in range(len(pairs))}
  assert tatoeba.origin == "tatoeba/tatoeba_es:train"
  bucc = fixtures.bucc_pairs("zh", "validation")
  assert sample.source_ids == tuple(p[0] for p in bucc)
  assert sample.gold == {(p[0], p[2]) for p in bucc}
  # The benchmark's order; tatoeba_ar has no `train` split and is left out.
  assert languages == {"tatoeba": ["es", "ru", "zh"], "bucc2018": ["ru", "zh"]}


def test_nothing_prepared_names_the_layout_and_the_build_command(tmp_path):
  source = bitext.TfdsSource(tmp_path / "tfds")
  assert source.discover_languages("bucc2018") == []
  line = source.nothing_found("bucc2018")
  assert line.startswith(f"No bucc2018 dataset prepared in {tmp_path / 'tfds'} "
                         "(TFDS layout: dev: bucc/bucc_<lang>:validation; "
                         "test: bucc/bucc_<lang>:test)")
  assert (f"`tfds build bucc --config bucc_<lang> --data_dir {tmp_path / 'tfds'}`"
          in line)
  with pytest.raises(tfds_reader.TfdsError,
                     match="tatoeba/tatoeba_de is not prepared in .*"
                           "`tfds build tatoeba --config tatoeba_de"):
    source.check("tatoeba", ["de"])
  assert not (tmp_path / "tfds").exists()  # checking writes nothing

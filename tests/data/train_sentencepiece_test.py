"""SentencePiece training: language-balanced sample, ids, metadata, bad input."""
import hashlib
import json
import shutil

import pytest

import data_testlib
import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.data import sentencepiece_sample
from rembert_tf.data import sentencepiece_training
from rembert_tf.data import text_inputs
from rembert_tf.data import tokenizer


def test_trained_model_and_smoothed_sample(tmp_path):
  corpus = tmp_path / "c"
  for lang, word, n in (("en", "alpha beta gamma delta", 900),
                        ("ru", "альфа бета гамма дельта", 100)):
    (corpus / lang).mkdir(parents=True)
    (corpus / lang / "a.txt").write_text(
        "\n".join(f"{word} {i % 13}" for i in range(n)) + "\n")
  meta = sentencepiece_training.train_sentencepiece(
      [str(corpus / "{lang}" / "*.txt")], tmp_path / "spm", 36,
      language_sampling_alpha=0.5, verbose=False)
  model = tmp_path / "spm" / "sentencepiece.model"
  sp = tokenizer.load_sentencepiece(model)
  assert sp.GetPieceSize() == 36 == meta["vocab_size"]
  assert json.loads((tmp_path / "spm" / "sentencepiece.json").read_text())[
      "sha256"] == fileio.sha256(model)
  sample = meta["sample"]["languages"]
  # Shares follow bytes ** 0.5: ru rises well above its natural byte share.
  n_en = (corpus / "en" / "a.txt").stat().st_size
  n_ru = (corpus / "ru" / "a.txt").stat().st_size
  expected = n_ru ** 0.5 / (n_ru ** 0.5 + n_en ** 0.5)
  share = sample["ru"]["sample_lines"] / (sample["ru"]["sample_lines"] +
                                          sample["en"]["sample_lines"])
  assert abs(share - expected) < 0.01
  assert share > n_ru / (n_ru + n_en) + 0.1
  assert sample["ru"]["sample_lines"] > sample["ru"]["lines"]  # Repeated.
  assert not list((tmp_path / "spm").glob(".*"))  # No temporary leftovers.
  with pytest.raises(FileExistsError, match="--overwrite"):
    sentencepiece_training.train_sentencepiece(
        [str(corpus / "{lang}" / "*.txt")], tmp_path / "spm", 36, verbose=False)


def test_bad_input(tmp_path):
  with pytest.raises(text_inputs.TextInputError, match="matches no files"):
    sentencepiece_training.train_sentencepiece(
        [str(tmp_path / "{lang}" / "*.txt")], tmp_path / "o", 100, verbose=False)
  (tmp_path / "en").mkdir()
  (tmp_path / "en" / "a.txt").write_text("\n\n")
  with pytest.raises(text_inputs.TextInputError, match="no text"):
    sentencepiece_training.train_sentencepiece(
        [str(tmp_path / "{lang}" / "*.txt")], tmp_path / "o", 100, verbose=False)
  assert not (tmp_path / "o" / "sentencepiece.model").exists()


def test_frequent_words_are_single_pieces():
  """Whole-word seeds counted by token frequency (small vocabularies)."""
  sp = tokenizer.load_sentencepiece(data_testlib.sentencepiece_model())
  for word in ("▁the", "▁in", "▁में", "▁في", "▁θα", "▁будет"):
    assert sp.encode(word.lstrip("▁"), out_type=str) == [word], word


def test_seed_pieces_split_like_sentencepiece(tmp_path):
  sample = tmp_path / "s.txt"
  sample.write_text("निखवी। the village.\nthe village, the 7 cats\n", encoding="utf-8")
  n = sentencepiece_training.write_seed_pieces(sample, tmp_path / "seeds.tsv")
  seeds = dict(line.split("\t") for line in
               (tmp_path / "seeds.tsv").read_text(encoding="utf-8").splitlines())
  assert seeds == {"▁the": "3", "▁village": "2"} and n == 2


def _two_language_corpus(root):
  for lang, word, n in (("en", "alpha beta gamma delta", 900),
                        ("ru", "альфа бета гамма дельта", 100)):
    (root / lang).mkdir(parents=True)
    (root / lang / "a.txt").write_text(
        "\n".join(f"{word} {i % 13}" for i in range(n)) + "\n")
  return [str(root / "{lang}" / "*.txt")]


def test_beam_drawn_sample_and_model_on_another_filesystem(tmp_path):
  pytest.importorskip("apache_beam")
  inputs = _two_language_corpus(tmp_path / "c")
  out = "ram://spm_test/beam"
  meta = sentencepiece_training.train_sentencepiece(
      inputs, out, 36, language_sampling_alpha=0.5, sample_with_beam=True,
      runner="DirectRunner", verbose=False)
  sp = tokenizer.load_sentencepiece(f"{out}/sentencepiece.model")
  assert sp.GetPieceSize() == 36
  assert fileio.read_json(f"{out}/sentencepiece.json")["sha256"] == meta["sha256"]
  sample = meta["sample"]["languages"]
  n_en = (tmp_path / "c" / "en" / "a.txt").stat().st_size
  n_ru = (tmp_path / "c" / "ru" / "a.txt").stat().st_size
  expected = n_ru ** 0.5 / (n_ru ** 0.5 + n_en ** 0.5)
  share = sample["ru"]["sample_lines"] / meta["sample"]["lines"]
  # Quotas hold in expectation: about 1000 lines, the share within a few %.
  assert abs(share - expected) < 0.05
  assert abs(meta["sample"]["lines"] - 1000) < 80
  assert sample["ru"]["sample_lines"] > sample["ru"]["lines"]  # Repeated.
  again = sentencepiece_training.train_sentencepiece(
      inputs, tmp_path / "again", 36, language_sampling_alpha=0.5,
      sample_with_beam=True, verbose=False)
  assert again["sample"] == meta["sample"]  # Deterministic for a seed,
  assert again["sha256"] == meta["sha256"]  # and so is the model.


@pytest.mark.parametrize("seed_pieces", ["words", "sentencepiece"])
def test_same_input_and_flags_give_a_byte_identical_model(seed_pieces, tmp_path):
  inputs = _two_language_corpus(tmp_path / "c")
  models = []
  for run in ("first", "second"):
    meta = sentencepiece_training.train_sentencepiece(
        inputs, tmp_path / run, 36, seed_pieces=seed_pieces, verbose=False)
    models.append((tmp_path / run / "sentencepiece.model").read_bytes())
    assert meta["sha256"] == hashlib.sha256(models[-1]).hexdigest()
  assert models[0] == models[1]
  # The trainer's paths are file names, not this run's temporary folder.
  assert b"rembert_tf-spm-" not in models[0] and b"sample.txt" in models[0]
  assert tokenizer.load_sentencepiece(tmp_path / "first" / "sentencepiece.model"
                                      ).GetPieceSize() == 36


def test_sample_only_step_writes_the_sample(tmp_path):
  inputs = _two_language_corpus(tmp_path / "c")
  files = text_inputs.resolve_inputs(inputs)
  summary = sentencepiece_training.draw_training_sample(
      files, str(tmp_path / "s" / "sample.txt"),
      sentencepiece_sample.SampleOptions(sample_size=300), log=lambda *a: None)
  lines = (tmp_path / "s" / "sample.txt").read_text().splitlines()
  assert len(lines) == summary["lines"] == 300
  assert json.loads((tmp_path / "s" / "sample.txt.json").read_text()) == summary


def _trio(directory):
  return {suffix: (directory / f"sentencepiece{suffix}").read_bytes()
          for suffix in sentencepiece_training.MODEL_SUFFIXES
          if (directory / f"sentencepiece{suffix}").exists()}


@pytest.mark.parametrize("fault", ["kill", "full_disk"])
def test_overwrite_cut_at_every_write_keeps_one_whole_trio(fault, tmp_path,
                                                           monkeypatch):
  """--overwrite killed (or out of space) at each write, rename and removal
  of the model, vocabulary and metadata: the old trio or the new one."""
  inputs = _two_language_corpus(tmp_path / "c")
  train = lambda out, seed, overwrite=False: (
      sentencepiece_training.train_sentencepiece(
          inputs, out, 36, seed=seed, overwrite=overwrite, verbose=False))
  train(tmp_path / "new", 2)
  new = _trio(tmp_path / "new")
  train(tmp_path / "old", 1)
  old = _trio(tmp_path / "old")
  assert old[".model"] != new[".model"]
  publish = sentencepiece_training._publish
  outcomes = []
  for step in range(1, 100):
    out = tmp_path / f"spm{step}"
    shutil.copytree(tmp_path / "old", out)
    with monkeypatch.context() as patch:
      faults = testlib.StepFaults(
          patch, at=step,
          **(dict(fault=testlib.disk_full, names=("rename", "open_file"))
             if fault == "full_disk" else {}))
      patch.setattr(sentencepiece_training, "_publish", lambda *a: (
          setattr(faults, "armed", True), publish(*a))[1])
      try:
        train(out, 2, overwrite=True)
      except testlib.Killed:
        pass
      except errors.InputError as e:
        assert fault == "full_disk" and "writing it failed: no space" in str(e)
    if faults.count < step:
      break
    with monkeypatch.context() as patch:  # The killed run is gone.
      patch.setattr(output_lock, "pid_running", lambda pid: False)
      with pytest.raises(errors.OutputExistsError, match="--overwrite"):
        train(out, 3)  # The next run finishes or undoes the swap first.
    outcomes.append("old" if _trio(out) == old else "new")
    assert _trio(out) in (old, new), step
    assert sorted(p.name for p in tmp_path.glob(f".spm{step}*")) == [], step
  assert step > 8 and {"old", "new"} <= set(outcomes)


def test_an_output_among_the_inputs_is_refused(tmp_path):
  inputs = _two_language_corpus(tmp_path / "c")
  (tmp_path / "c" / "en" / "sentencepiece.vocab").write_text("a b\n")
  with pytest.raises(errors.UsageError, match=r"the output .*/c/en/"
                     r"sentencepiece.vocab is --input .*sentencepiece.vocab"):
    sentencepiece_training.train_sentencepiece(
        [str(tmp_path / "c" / "{lang}" / "*")], tmp_path / "c" / "en", 36,
        overwrite=True, verbose=False)
  assert (tmp_path / "c" / "en" / "sentencepiece.vocab").read_text() == "a b\n"
def _corpus_with_long_lines(root, long_line_bytes, short_de_lines):
  """en: 40 ordinary lines; de: one line of `long_line_bytes` bytes, then
  `short_de_lines` ordinary ones."""
  for lang in ("en", "de"):
    (root / lang).mkdir(parents=True)
  (root / "en" / "a.txt").write_text(
      "".join(f"the cat {i} sat on the mat\n" for i in range(40)))
  (root / "de" / "a.txt").write_text(
      "x" * long_line_bytes + "\n" +
      "".join(f"die katze {i} sitzt\n" for i in range(short_de_lines)))
  return [f"{root}/{{lang}}/*.txt"]


SAMPLERS = [pytest.param(False, id="local"), pytest.param(True, id="beam")]


def _needs_sampler(sample_with_beam):
  if sample_with_beam:
    pytest.importorskip("apache_beam")


@pytest.mark.parametrize("sample_with_beam", SAMPLERS)
def test_a_language_of_lines_sentencepiece_skips_is_named(sample_with_beam,
                                                          tmp_path):
  _needs_sampler(sample_with_beam)
  inputs = _corpus_with_long_lines(tmp_path / "c", 20_000, 0)
  with pytest.raises(text_inputs.TextInputError) as e:
    sentencepiece_training.draw_training_sample(
        text_inputs.resolve_inputs(inputs), str(tmp_path / "s.txt"),
        sentencepiece_sample.SampleOptions(sample_size=300),
        sample_with_beam=sample_with_beam, log=lambda *a: None, inputs=inputs)
  assert str(e.value) == (
      f"inputs {inputs}: language de: every line is longer than 8192 bytes "
      "(the longest has 20000), and SentencePiece skips such lines. Split the "
      "text into lines: one sentence or paragraph per line, or leave de out "
      "(--languages).")
  assert not list(tmp_path.glob("s.txt*"))


@pytest.mark.parametrize("sample_with_beam", SAMPLERS)
def test_long_lines_are_not_sampled_and_do_not_weigh(sample_with_beam,
                                                      tmp_path):
  _needs_sampler(sample_with_beam)
  inputs = _corpus_with_long_lines(tmp_path / "c", 1_000_000, 4)
  summary = sentencepiece_training.draw_training_sample(
      text_inputs.resolve_inputs(inputs), str(tmp_path / "s.txt"),
      sentencepiece_sample.SampleOptions(sample_size=300),
      sample_with_beam=sample_with_beam, log=lambda *a: None)
  sample = (tmp_path / "s.txt").read_text()
  assert "xxxx" not in sample
  assert len(sample) < 300 * 40  # lines of the corpus, none of 1 MB
  de = summary["languages"]["de"]
  assert de["lines"] == 4 and de["input_bytes"] < 100
  assert de["longest_skipped_line_bytes"] == 1_000_000
  assert summary["languages"]["de"]["sample_lines"] < summary["languages"][
      "en"]["sample_lines"]

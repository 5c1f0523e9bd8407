"""Input specs, readers and language sampling (bad input included)."""
import json

import pytest

from rembert_tf.data import text_inputs


def _documents(unit, stats=None):
  return [d for _, d in unit.language_documents(stats or text_inputs.ReadStats())]


def _write(path, data: bytes):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return path


def test_language_from_path_pattern_and_explicit(tmp_path):
  _write(tmp_path / "c" / "en" / "a.txt", b"one\n")
  _write(tmp_path / "c" / "fr" / "b.txt", b"un\n")
  _write(tmp_path / "wiki" / "sw.jsonl", b"{}\n")
  files = text_inputs.resolve_inputs(
      [f"{tmp_path}/c/{{lang}}/*.txt", f"sw={tmp_path}/wiki/*.jsonl"])
  assert [(f.language, f.format) for f in files] == [
      ("en", "text"), ("fr", "text"), ("sw", "jsonl")]
  only = text_inputs.resolve_inputs([f"{tmp_path}/c/{{lang}}/*.txt"],
                                    languages=["fr"])
  assert [f.language for f in only] == ["fr"]


def test_missing_input_is_a_clear_error(tmp_path):
  with pytest.raises(text_inputs.TextInputError, match="matches no files"):
    text_inputs.resolve_inputs([f"{tmp_path}/none/{{lang}}/*.txt"])
  with pytest.raises(text_inputs.TextInputError, match="does not say its language"):
    text_inputs.resolve_inputs([f"{tmp_path}/*.txt"])
  with pytest.raises(text_inputs.TextInputError, match="no input"):
    text_inputs.resolve_inputs([])


def test_plain_text_documents_and_invalid_utf8(tmp_path):
  path = _write(tmp_path / "en" / "a.txt",
                b"first line\nsecond \xff\xfe line\n\n\n  \nnext doc\r\n")
  stats = text_inputs.ReadStats()
  docs = _documents(
      text_inputs.InputFile("en", str(path), "text"), stats)
  assert docs == [["first line", "second \ufffd\ufffd line"], ["next doc"]]
  assert stats.invalid_utf8_replacements == 2
  assert stats.documents == 2 and stats.lines == 3


def test_wikiextractor_jsonl(tmp_path):
  lines = [json.dumps({"id": "1", "url": "u", "title": "T",
                       "text": "T\n\nPara one.\nPara two."}),
           "not json", json.dumps({"id": "2", "text": ""}),
           json.dumps({"id": "3", "url": "u", "title": "X", "text": "Only."})]
  path = _write(tmp_path / "wiki_00.json", "\n".join(lines).encode())
  stats = text_inputs.ReadStats()
  docs = _documents(
      text_inputs.InputFile("en", str(path), "jsonl"), stats)
  assert docs == [["T", "Para one.", "Para two."], ["Only."]]
  assert stats.skipped_json_lines == 1


def test_smoothed_language_probabilities():
  q = text_inputs.smoothed_language_probabilities({"a": 900, "b": 100, "c": 0},
                                                  0.7)
  assert q["c"] == 0.0
  assert abs(sum(q.values()) - 1) < 1e-9
  assert 0.1 < q["b"] < 0.5  # Upweighted from its natural 0.1.
  uniform = text_inputs.smoothed_language_probabilities({"a": 9, "b": 1}, 0.0)
  assert uniform == {"a": 0.5, "b": 0.5}
  with pytest.raises(text_inputs.TextInputError, match="empty"):
    text_inputs.smoothed_language_probabilities({"a": 0}, 0.7)


def test_inputs_on_another_filesystem_gzipped_and_directories(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  fileio.write_bytes("ram://inputs_test/c/sw/a.txt", b"moja\nmbili\n\ntatu\n")
  fileio.write_bytes("ram://inputs_test/c/en/c4-en.json.gz", gzip.compress(
      (json.dumps({"text": "one\ntwo", "url": "u"}) + "\n").encode()))
  files = text_inputs.resolve_inputs(["ram://inputs_test/c/{lang}/*"])
  assert [(f.language, f.format) for f in files] == [("en", "jsonl"),
                                                     ("sw", "text")]
  assert _documents(files[0]) == [["one", "two"]]
  assert _documents(files[1]) == [["moja", "mbili"], ["tatu"]]
  sizes = [f.language_bytes() for f in files]
  assert sizes[1] == {"sw": 17} and sizes[0]["en"] == len(json.dumps(
      {"text": "one\ntwo", "url": "u"})) + 1  # Uncompressed bytes.
  with pytest.raises(text_inputs.TextInputError, match="is a directory"):
    text_inputs.resolve_inputs([f"en={tmp_path}"])
  with pytest.raises(text_inputs.TextInputError, match="matches only directories"):
    text_inputs.resolve_inputs(["ram://inputs_test/c/{lang}"])

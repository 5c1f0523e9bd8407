"""Tokenizer: fixed special ids, metadata file, clear errors."""
import json

import pytest
import sentencepiece as spm

import data_testlib
from rembert_tf.data import tokenizer


def test_special_ids_are_fixed():
  sp = tokenizer.load_sentencepiece(data_testlib.sentencepiece_model())
  assert sp.GetPieceSize() == data_testlib.TINY_VOCAB_SIZE
  assert [sp.IdToPiece(i) for i in range(5)] == [
      "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert (tokenizer.PAD_ID, tokenizer.UNK_ID, tokenizer.CLS_ID,
          tokenizer.SEP_ID, tokenizer.MASK_ID) == (0, 1, 2, 3, 4)
  # Control symbols are never produced from text.
  assert tokenizer.MASK_ID not in sp.encode("[MASK] [CLS]")


def test_metadata_json_next_to_model():
  model = data_testlib.sentencepiece_model()
  path = tokenizer.metadata_path(model)
  assert path.name == "sentencepiece.json"
  meta = json.loads(path.read_text())
  assert meta == tokenizer.read_tokenizer_metadata(model)
  assert meta["vocab_size"] == data_testlib.TINY_VOCAB_SIZE
  assert meta["mask_id"] == 4 and meta["pad_id"] == 0
  assert meta["sha256"] == tokenizer.file_sha256(model)


def test_stale_metadata_is_refused(tmp_path):
  model = tmp_path / "m.model"
  model.write_bytes(data_testlib.sentencepiece_model().read_bytes())
  (tmp_path / "m.json").write_text(json.dumps({"sha256": "0" * 64}))
  with pytest.raises(tokenizer.TokenizerError, match="sha256"):
    tokenizer.read_tokenizer_metadata(model)


def test_model_with_other_special_ids_is_refused(tmp_path):
  text = tmp_path / "t.txt"
  text.write_text("\n".join(f"word{i} other{i % 7} thing" for i in range(300)))
  spm.SentencePieceTrainer.Train(
      input=str(text), model_prefix=str(tmp_path / "bad"), vocab_size=40,
      minloglevel=2)  # Default ids: <unk>=0 <s>=1 </s>=2.
  with pytest.raises(tokenizer.TokenizerError, match="<pad>.*id 0"):
    tokenizer.load_sentencepiece(tmp_path / "bad.model")


def test_missing_model_names_the_file(tmp_path):
  with pytest.raises(tokenizer.TokenizerError, match="nope.model"):
    tokenizer.load_sentencepiece(tmp_path / "nope.model")

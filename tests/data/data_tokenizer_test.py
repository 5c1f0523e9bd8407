"""Tokenizer: special ids by piece name, metadata file, clear errors."""
import json

import pytest
import sentencepiece as spm

import data_testlib
import testlib
from rembert_tf.common import fileio
from rembert_tf.data import tokenizer


def test_special_ids_of_the_trained_model_are_the_fixed_layout():
  sp = tokenizer.load_sentencepiece(data_testlib.sentencepiece_model())
  assert sp.GetPieceSize() == data_testlib.SENTENCEPIECE_VOCAB_SIZE
  assert [sp.IdToPiece(i) for i in range(5)] == [
      "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  special = tokenizer.SpecialTokens.from_processor(sp)
  assert (special.pad_id, special.unk_id, special.cls_id, special.sep_id,
          special.mask_id) == (tokenizer.PAD_ID, tokenizer.UNK_ID,
                               tokenizer.CLS_ID, tokenizer.SEP_ID,
                               tokenizer.MASK_ID)
  # Control symbols are never produced from text.
  assert tokenizer.MASK_ID not in sp.encode("[MASK] [CLS]")


def test_metadata_json_next_to_model():
  model = data_testlib.sentencepiece_model()
  meta = json.loads(model.with_suffix(".json").read_text())
  assert meta == dict(vocab_size=data_testlib.SENTENCEPIECE_VOCAB_SIZE,
                      pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4,
                      sha256=fileio.sha256(model))


def test_special_tokens_of_this_projects_layout():
  special = tokenizer.SpecialTokens.from_model(data_testlib.sentencepiece_model())
  assert (special.pad_id, special.unk_id, special.cls_id, special.sep_id,
          special.mask_id) == (0, 1, 2, 3, 4)
  assert special.unmaskable_ids == (0, 2, 3, 4)
  assert special.vocab_size == data_testlib.SENTENCEPIECE_VOCAB_SIZE


def test_special_tokens_of_the_released_layout_are_found_by_name(tmp_path):
  model = testlib.released_layout_sentencepiece()
  special = tokenizer.SpecialTokens.from_model(model)
  assert (special.pad_id, special.unk_id, special.cls_id, special.sep_id,
          special.mask_id) == (0, 1, 312, 313, 314)
  assert special.unmaskable_ids == (0, 312, 313, 314)
  copy = tokenizer.copy_sentencepiece(model, tmp_path / "released.model")
  assert json.loads((tmp_path / "released.json").read_text())["cls_id"] == 312
  assert copy == str(tmp_path / "released.model")


def test_special_tokens_read_from_a_non_local_filesystem():
  data = data_testlib.sentencepiece_model().read_bytes()
  fileio.write_bytes("ram://tokenizer_test/sp.model", data)
  special = tokenizer.SpecialTokens.from_model("ram://tokenizer_test/sp.model")
  assert special.cls_id == 2
  assert special.vocab_size == data_testlib.SENTENCEPIECE_VOCAB_SIZE


def test_model_without_a_special_piece_names_piece_and_file(tmp_path):
  text = tmp_path / "t.txt"
  text.write_text("\n".join(f"word{i} other{i % 7} thing" for i in range(300)))
  spm.SentencePieceTrainer.Train(
      input=str(text), model_prefix=str(tmp_path / "bad"), vocab_size=40,
      minloglevel=2)  # Default pieces: <unk> <s> </s>, no [CLS]/[SEP]/[MASK].
  with pytest.raises(tokenizer.TokenizerError,
                     match=r"bad\.model: no special piece <pad> or \[PAD\], "
                     r"\[CLS\], \[SEP\], \[MASK\]"):
    tokenizer.SpecialTokens.from_model(tmp_path / "bad.model")


def test_missing_model_names_the_file(tmp_path):
  with pytest.raises(tokenizer.TokenizerError, match="nope.model"):
    tokenizer.load_sentencepiece(tmp_path / "nope.model")


def test_garbage_and_directories_are_refused(tmp_path):
  (tmp_path / "garbage.model").write_bytes(b"not a model at all")
  with pytest.raises(tokenizer.TokenizerError, match="garbage.model is not a SentencePiece model"):
    tokenizer.load_sentencepiece(tmp_path / "garbage.model")
  with pytest.raises(tokenizer.TokenizerError, match="is a directory"):
    tokenizer.load_sentencepiece(tmp_path)

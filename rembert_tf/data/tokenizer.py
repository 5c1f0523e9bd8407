"""The SentencePiece tokenizer every rembert_tf command shares, and its special tokens.

Builds on the `sentencepiece` library, as Model Garden's
`official/nlp/tools/tokenization.py` does; files through `common.fileio`.
Special ids are found by piece name (`SpecialTokens.from_model`), so models
this project trains and the released one (`[CLS]`=312, `[PAD]`) share one
lookup. `SentencePieceTokenizer` holds a model with its special ids. Next
to `<prefix>.model` lives `<prefix>.json` (vocab size, the ids, sha256).

Example:
<!-- snippet: not run: needs a SentencePiece model -->
```python
from rembert_tf.data import tokenizer
tokens = tokenizer.SentencePieceTokenizer("/tmp/spm/sentencepiece.model")
tokens.sentence_ids(["hello world"], seq_length=128)  # [[CLS] pieces [SEP]]
tokens.special.pad_id, tokens.encode("hello world")
```
"""
import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import sentencepiece as spm

from rembert_tf.common import errors
from rembert_tf.common import fileio

# Role -> accepted piece names, first match wins: the first is the piece of
# the models this project trains (rembert-train-sentencepiece), whose ids
# are the roles' order.
ROLE_PIECES = {
    "pad_id": ("<pad>", "[PAD]"),
    "unk_id": ("<unk>", "[UNK]"),
    "cls_id": ("[CLS]",),
    "sep_id": ("[SEP]",),
    "mask_id": ("[MASK]",),
}
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(ROLE_PIECES))


class TokenizerError(errors.RemBertError, ValueError):
  """A SentencePiece model is missing, unreadable or lacks a special piece."""


def load_sentencepiece(path) -> spm.SentencePieceProcessor:
  """Loads a SentencePiece model from any filesystem; TokenizerError naming
  the file when it is missing, a directory, or not a SentencePiece model."""
  path = fileio.as_str(path)
  # isdir / isfile, not exists: record-creation workers load the model too,
  # and these stay on the operating system for local paths (no TensorFlow).
  if fileio.isdir(path):
    raise TokenizerError(
        f"{path} is a directory, not a SentencePiece model; pass the .model "
        "file inside it (e.g. {}).".format(fileio.join(path, "sentencepiece.model")))
  if not fileio.isfile(path):
    raise TokenizerError(
        f"SentencePiece model {path} does not exist; train one with "
        "`rembert-train-sentencepiece --output_dir DIR` (it writes "
        "DIR/sentencepiece.model) or pass the model the checkpoint was "
        "trained with.")
  processor = spm.SentencePieceProcessor()
  try:
    processor.LoadFromSerializedProto(fileio.read_bytes(path))
  except (OSError, RuntimeError, TypeError) as e:
    raise TokenizerError(
        f"{path} is not a SentencePiece model ({' '.join(str(e).split())}); "
        "pass the .model file written by SentencePiece training.") from None
  return processor


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
  """The special ids of one SentencePiece model, found by piece name."""
  pad_id: int
  unk_id: int
  cls_id: int
  sep_id: int
  mask_id: int
  vocab_size: int

  @classmethod
  def from_processor(cls, processor: spm.SentencePieceProcessor,
                     source: str = "the SentencePiece model"
                     ) -> "SpecialTokens":
    """Looks each special piece up by name; a missing one is a TokenizerError."""
    ids = {role: _find_piece(processor, pieces)
           for role, pieces in ROLE_PIECES.items()}
    missing = [" or ".join(ROLE_PIECES[role]) for role, i in ids.items()
               if i is None]
    if missing:
      raise TokenizerError(
          f"{source}: no special piece {', '.join(missing)}. rembert_tf needs "
          "[CLS], [SEP], [MASK], a padding piece (<pad> or [PAD]) and an "
          "unknown piece (<unk> or [UNK]); use the SentencePiece model the "
          "checkpoint was trained with, or train one with "
          "rembert-train-sentencepiece.")
    return cls(vocab_size=processor.GetPieceSize(), **ids)

  @classmethod
  def from_model(cls, path) -> "SpecialTokens":
    return cls.from_processor(load_sentencepiece(path),
                              source=fileio.as_str(path))

  @property
  def unmaskable_ids(self) -> Tuple[int, ...]:
    """Ids a masking procedure must never select (the non-text pieces)."""
    return tuple(sorted({i for i in (self.pad_id, self.cls_id, self.sep_id,
                                     self.mask_id) if i >= 0}))

  def as_dict(self) -> Dict[str, int]:
    """{pad_id, unk_id, cls_id, sep_id, mask_id} (as in record metadata)."""
    return {role: getattr(self, role) for role in ROLE_PIECES}


def _find_piece(processor: spm.SentencePieceProcessor, pieces) -> Optional[int]:
  # PieceToId returns the unknown id for a missing piece: check the round trip.
  for piece in pieces:
    piece_id = processor.PieceToId(piece)
    if processor.IdToPiece(piece_id) == piece:
      return piece_id
  return None


class SentencePieceTokenizer:
  """A SentencePiece model with its special ids (`special`)."""

  def __init__(self, path):
    self.sp = load_sentencepiece(path)
    self.special = SpecialTokens.from_processor(self.sp,
                                                source=fileio.as_str(path))

  def encode(self, text: str) -> List[int]:
    return list(self.sp.encode(text))

  def sentence_ids(self, sentences: Sequence[str],
                   seq_length: int) -> List[List[int]]:
    """`[CLS] pieces [SEP]` per sentence, its pieces cut to fit seq_length."""
    limit = seq_length - 2
    return [[self.special.cls_id] + pieces[:limit] + [self.special.sep_id]
            for pieces in self.sp.EncodeAsIds(list(sentences))]


def special_ids() -> Dict[str, int]:
  """The special ids of the layout this project trains (not of any model)."""
  return {role: i for i, role in enumerate(ROLE_PIECES)}


def write_tokenizer_metadata(model_path) -> Dict[str, Any]:
  """Writes `<prefix>.json` beside `<prefix>.model` (atomically): its vocab
  size, special ids and sha256; returns them."""
  model_path = fileio.as_str(model_path)
  special = SpecialTokens.from_model(model_path)
  meta = dict(vocab_size=special.vocab_size, **special.as_dict(),
              sha256=fileio.sha256(model_path))
  fileio.write_json(model_path.removesuffix(".model") + ".json", meta)
  return meta


def copy_sentencepiece(model_path, target) -> str:
  """Copies a SentencePiece model to `target`, its `<prefix>.json` beside it."""
  target = fileio.as_str(target)
  fileio.copy(model_path, target)
  write_tokenizer_metadata(target)
  return target

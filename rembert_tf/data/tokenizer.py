"""The SentencePiece tokenizer every rembert_tf command shares, with fixed special ids.

A rembert_tf SentencePiece model is a unigram model whose special pieces sit at
fixed ids (bos/eos disabled):

| piece     | id |
| --------- | -- |
| `<pad>`   | 0  |
| `<unk>`   | 1  |
| `[CLS]`   | 2  |
| `[SEP]`   | 3  |
| `[MASK]`  | 4  |

`[CLS]`, `[SEP]` and `[MASK]` are SentencePiece *control* symbols: they own ids
but are never produced from text, so a literal "[MASK]" in a corpus stays text.
Next to `<prefix>.model` lives `<prefix>.json`:
`{"vocab_size", "pad_id", "unk_id", "cls_id", "sep_id", "mask_id", "sha256"}`.

Builds on the `sentencepiece` library directly (as Model Garden's
`official/nlp/tools/tokenization.py` and `official/nlp/data/train_sentencepiece.py`
do); the trainer that draws a language-balanced sample lives in
`rembert_tf.data.sentencepiece_training`.

Example:
```python
from rembert_tf.data import tokenizer
sp = tokenizer.load_sentencepiece("/tmp/spm/sentencepiece.model")  # checks the ids
ids = sp.encode("hello world")                   # list of int
meta = tokenizer.read_tokenizer_metadata("/tmp/spm/sentencepiece.model")
assert meta["mask_id"] == tokenizer.MASK_ID == 4
```
"""
import hashlib
import json
import os
import pathlib
from typing import Any, Dict, Union

import sentencepiece as spm

PAD_ID = 0
UNK_ID = 1
CLS_ID = 2
SEP_ID = 3
MASK_ID = 4

PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
CLS_PIECE = "[CLS]"
SEP_PIECE = "[SEP]"
MASK_PIECE = "[MASK]"

# piece -> fixed id, in id order.
SPECIAL_PIECES = {PAD_PIECE: PAD_ID, UNK_PIECE: UNK_ID, CLS_PIECE: CLS_ID,
                  SEP_PIECE: SEP_ID, MASK_PIECE: MASK_ID}
# The ids a masking procedure must never select.
UNMASKABLE_IDS = (PAD_ID, CLS_ID, SEP_ID, MASK_ID)
NUM_SPECIAL_IDS = len(SPECIAL_PIECES)

PathLike = Union[str, os.PathLike]


class TokenizerError(ValueError):
  """A SentencePiece model is missing or does not have the fixed special ids."""


def file_sha256(path: PathLike) -> str:
  """Hex sha256 of a file's bytes."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def metadata_path(model_path: PathLike) -> pathlib.Path:
  """`<prefix>.model` -> `<prefix>.json` (the tokenizer metadata file)."""
  model_path = pathlib.Path(model_path)
  if model_path.suffix == ".model":
    return model_path.with_suffix(".json")
  return model_path.with_name(model_path.name + ".json")


def special_ids() -> Dict[str, int]:
  return dict(pad_id=PAD_ID, unk_id=UNK_ID, cls_id=CLS_ID, sep_id=SEP_ID,
              mask_id=MASK_ID)


def load_sentencepiece(path: PathLike) -> spm.SentencePieceProcessor:
  """Loads a SentencePiece model and checks the fixed special ids.

  Raises:
    TokenizerError: naming the file and the first special piece whose id is
      wrong, with the fix (retrain with tools/train_sentencepiece.py).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise TokenizerError(
        f"SentencePiece model {path} does not exist; train one with "
        "`tools/train_sentencepiece.py --output_dir DIR` (it writes "
        "DIR/sentencepiece.model and DIR/sentencepiece.json).")
  processor = spm.SentencePieceProcessor()
  try:
    processor.Load(str(path))
  except (OSError, RuntimeError) as e:
    raise TokenizerError(f"{path} is not a SentencePiece model: {e}") from None
  vocab_size = processor.GetPieceSize()
  for piece, expected_id in SPECIAL_PIECES.items():
    actual = processor.PieceToId(piece)
    if expected_id >= vocab_size or processor.IdToPiece(expected_id) != piece:
      raise TokenizerError(
          f"{path}: special piece {piece!r} must have id {expected_id}, the "
          f"model has it at id {actual} (id {expected_id} is "
          f"{processor.IdToPiece(expected_id) if expected_id < vocab_size else None!r}). "
          "rembert_tf needs <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4; retrain "
          "with tools/train_sentencepiece.py.")
  return processor


def tokenizer_metadata(model_path: PathLike) -> Dict[str, Any]:
  """The metadata dict of a model file (computed from the model itself)."""
  processor = load_sentencepiece(model_path)
  meta = dict(vocab_size=processor.GetPieceSize())
  meta.update(special_ids())
  meta["sha256"] = file_sha256(model_path)
  return meta


def write_tokenizer_metadata(model_path: PathLike) -> Dict[str, Any]:
  """Writes `<prefix>.json` next to the model (atomically) and returns it."""
  meta = tokenizer_metadata(model_path)
  out = metadata_path(model_path)
  tmp = out.with_name(out.name + ".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=2, sort_keys=True)
  os.replace(tmp, out)
  return meta


def read_tokenizer_metadata(model_path: PathLike) -> Dict[str, Any]:
  """Reads `<prefix>.json`; falls back to computing it from the model file.

  Raises TokenizerError if the JSON's checksum does not match the model file.
  """
  path = metadata_path(model_path)
  if not path.exists():
    return tokenizer_metadata(model_path)
  with open(path, encoding="utf-8") as f:
    meta = json.load(f)
  actual = file_sha256(model_path)
  if meta.get("sha256") != actual:
    raise TokenizerError(
        f"{path}: field `sha256` is {meta.get('sha256')!r} but {model_path} "
        f"hashes to {actual!r}: the metadata belongs to another model. Delete "
        f"{path} (it is recomputed) or restore the matching model.")
  return meta


def train_sentencepiece(*args, **kwargs):
  """See `rembert_tf.data.sentencepiece_training.train_sentencepiece`."""
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  return sentencepiece_training.train_sentencepiece(*args, **kwargs)

"""Special token ids of a SentencePiece model, for packing and for HF configs.

A rembert_tf model (trained by `rembert_tf.data`) has the fixed ids of
`rembert_tf.data.tokenizer` (<pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4), and
those constants are used. Any other model (e.g. the released RemBERT's, whose
[CLS]/[SEP] are 312/313 and whose padding piece is `[PAD]`) is looked up by
piece name.

Example:
```python
ids = special_token_ids("runs/pretrain/sentencepiece.model")
ids["start_of_sequence_id"], ids["end_of_segment_id"], ids["padding_id"]
```
"""
from typing import Dict

import sentencepiece as spm

from rembert_tf.data import tokenizer

from rembert_tf.conversion import weight_layout

# Role -> accepted piece names, first match wins.
_PIECES = {
    "padding_id": ("<pad>", "[PAD]"),
    "start_of_sequence_id": ("[CLS]",),
    "end_of_segment_id": ("[SEP]",),
    "mask_id": ("[MASK]",),
}


def special_token_ids(sp_model_path) -> Dict[str, int]:
  """{start_of_sequence_id, end_of_segment_id, padding_id, mask_id, vocab_size}."""
  try:
    processor = tokenizer.load_sentencepiece(sp_model_path)
    return dict(start_of_sequence_id=tokenizer.CLS_ID,
                end_of_segment_id=tokenizer.SEP_ID,
                padding_id=tokenizer.PAD_ID, mask_id=tokenizer.MASK_ID,
                vocab_size=processor.GetPieceSize())
  except tokenizer.TokenizerError:
    pass  # Not a rembert_tf model: look the pieces up by name.
  processor = spm.SentencePieceProcessor()
  try:
    processor.Load(str(sp_model_path))
  except (OSError, RuntimeError) as e:
    raise weight_layout.ConversionError(
        f"{sp_model_path} is not a SentencePiece model: {e}") from None
  ids, missing = {}, []
  for role, pieces in _PIECES.items():
    for piece in pieces:
      piece_id = processor.PieceToId(piece)
      if processor.IdToPiece(piece_id) == piece and piece_id != processor.unk_id():
        ids[role] = piece_id
        break
    else:
      missing.append(f"{role} ({' or '.join(pieces)})")
  if missing:
    raise weight_layout.ConversionError(
        f"{sp_model_path}: no piece for {', '.join(missing)}. BERT packing "
        "needs [CLS], [SEP] and a padding piece; use the SentencePiece model "
        "the checkpoint was trained with.")
  ids["vocab_size"] = processor.GetPieceSize()
  return ids


def hf_token_ids(sp_model_path) -> Dict[str, int]:
  """pad/bos/eos token ids for a Hugging Face config.json."""
  ids = special_token_ids(sp_model_path)
  return dict(pad_token_id=ids["padding_id"],
              bos_token_id=ids["start_of_sequence_id"],
              eos_token_id=ids["end_of_segment_id"])

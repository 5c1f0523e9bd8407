"""RemBertTokenizer: SentencePiece with RemBERT's special pieces found by name.

Builds on `keras_hub.tokenizers.SentencePieceTokenizer` and keras-hub's
special-token registry, as keras-hub's ALBERT tokenizer does; each role's
piece is looked up by name (`[CLS]`, `[SEP]`, `<pad>`/`[PAD]`, `[MASK]`,
`<unk>`/`[UNK]`, first present wins), so the released model (ids 312, 313,
0, 314, 1) and the models this project trains (2, 3, 0, 4, 1) both work. The
unknown piece is not a special token (a masked-LM preprocessor may mask it).

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertTokenizer
tokenizer = RemBertTokenizer(proto="sentencepiece.model")
tokenizer(["Hello world", "Привет мир"])          # ragged piece ids
tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
ids, starts, ends = tokenizer.tokenize_with_char_offsets("Hello world")
```
"""
from typing import List, Tuple

import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone

# Role -> accepted piece names, first present wins.
SPECIAL_PIECES = {
    "cls_token": ("[CLS]",),
    "sep_token": ("[SEP]",),
    "pad_token": ("<pad>", "[PAD]"),
    "mask_token": ("[MASK]",),
}
UNKNOWN_PIECES = ("<unk>", "[UNK]")


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTokenizer(keras_hub.tokenizers.SentencePieceTokenizer):
  """RemBERT's SentencePiece tokenizer (see the module docstring).

  Args:
    proto: path to a SentencePiece `.model` file or its serialized bytes.
    **kwargs: as for `keras_hub.tokenizers.SentencePieceTokenizer`.
  """

  backbone_cls = rembert_backbone.RemBertBackbone

  def __init__(self, proto=None, **kwargs):
    for role, pieces in SPECIAL_PIECES.items():
      self._add_special_token(pieces[0], role)
    # keras-hub packers and masked-LM preprocessors read start / end tokens.
    self._add_special_token("[CLS]", "start_token")
    self._add_special_token("[SEP]", "end_token")
    super().__init__(proto=proto, **kwargs)
    if not hasattr(self, "unk_token_id"):   # no vocabulary yet (from_config)
      self.unk_token_id = None

  def _update_special_token_ids(self):
    """Picks each role's piece among its accepted names, then the ids."""
    vocabulary = set(self.get_vocabulary())
    for role, pieces in SPECIAL_PIECES.items():
      present = [p for p in pieces if p in vocabulary]
      if not present:
        raise ValueError(
            f"the SentencePiece model has no {' or '.join(pieces)} piece; "
            "RemBERT needs [CLS], [SEP], [MASK] and a padding piece (<pad> or "
            "[PAD]). Use the model the checkpoint was trained with.")
      setattr(self, role, present[0])
    unknown = [p for p in UNKNOWN_PIECES if p in vocabulary]
    self.unk_token_id = (self.token_to_id(unknown[0]) if unknown
                         else self._sentence_piece_spm.unk_id())
    super()._update_special_token_ids()

  def piece_ids(self, texts: List[str]) -> List[List[int]]:
    """The piece ids of each text in Python, as calling the tokenizer gives them."""
    self._check_vocabulary()
    return [list(ids) for ids in self._sentence_piece_spm.encode(
        list(texts), out_type=int)]

  def tokenize_with_char_offsets(self, text: str
                                 ) -> Tuple[List[int], List[int], List[int]]:
    """Piece ids of `text` with each piece's first and last character index.

    A piece's leading space ("▁") is not part of its span, so
    `text[start:end + 1]` is the piece's own text.
    """
    self._check_vocabulary()
    processor = self._sentence_piece_spm
    try:  # sentencepiece 0.2.1+ names the proto output `return_type`
      proto = processor.encode(text, return_type="proto")
    except (TypeError, ValueError):
      proto = processor.encode(text, out_type="immutable_proto")
    char_of_byte = []
    for index, char in enumerate(text):
      char_of_byte.extend([index] * len(char.encode("utf-8")))
    char_of_byte.append(len(text))
    ids, starts, ends = [], [], []
    for piece in proto.pieces:
      first = char_of_byte[piece.begin]
      last = char_of_byte[piece.end - 1] if piece.end > piece.begin else first
      first = min(first, len(text) - 1)
      last = min(max(last, first), len(text) - 1)
      while first < last and text[first].isspace():
        first += 1
      ids.append(piece.id)
      starts.append(first)
      ends.append(last)
    return ids, starts, ends

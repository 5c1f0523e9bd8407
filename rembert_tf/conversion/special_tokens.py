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

from rembert_tf.data import tokenizer

# Role -> accepted piece names, first match wins.
_PIECES = {
    "padding_id": ("<pad>", "[PAD]"),
    "start_of_sequence_id": ("[CLS]",),
    "end_of_segment_id": ("[SEP]",),
    "mask_id": ("[MASK]",),
}


def special_token_ids(sp_model_path) -> Dict[str, int]:
  """{start_of_sequence_id, end_of_segment_id, padding_id, mask_id, vocab_size}."""
  special = tokenizer.SpecialTokens.from_model(
      sp_model_path, required=("pad_id", "cls_id", "sep_id"))
  return dict(start_of_sequence_id=special.cls_id,
              end_of_segment_id=special.sep_id, padding_id=special.pad_id,
              mask_id=special.mask_id, vocab_size=special.vocab_size)


def hf_token_ids(sp_model_path) -> Dict[str, int]:
  """pad/bos/eos token ids for a Hugging Face config.json."""
  ids = special_token_ids(sp_model_path)
  return dict(pad_token_id=ids["padding_id"],
              bos_token_id=ids["start_of_sequence_id"],
              eos_token_id=ids["end_of_segment_id"])

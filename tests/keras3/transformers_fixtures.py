"""Writes Hugging Face folders with transformers' own `save_pretrained`, and their outputs.

Run by keras_backends_test.py in its own process (CPU PyTorch and
transformers; the test's process holds TensorFlow with tf-keras):
`python transformers_fixtures.py OUT VOCAB_SIZE`. Writes OUT/hf/NAME for

| NAME      | model                               | weights                          |
| --------- | ----------------------------------- | -------------------------------- |
| base      | RemBertModel                        | no prefix, with the pooler       |
| prefixed  | RemBertForSequenceClassification    | under `rembert.`, with the pooler|
| mlm       | RemBertForMaskedLM                  | under `rembert.`, no pooler      |
| bert      | BertModel (another architecture)    |                                  |

and OUT/reference.npz: the inputs and transformers' outputs of each.
"""
import pathlib
import sys

import numpy as np
import torch
import transformers


def _config(vocab_size):
  return transformers.RemBertConfig(
      vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=37, input_embedding_size=16,
      output_embedding_size=24, max_position_embeddings=64, pad_token_id=0,
      bos_token_id=None, eos_token_id=None, hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)


def main(out: pathlib.Path, vocab_size: int):
  torch.manual_seed(0)
  rng = np.random.default_rng(0)
  ids = rng.integers(5, vocab_size, size=(3, 12))
  types = np.zeros_like(ids)
  types[:, 7:] = 1
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  positions = np.tile(np.arange(4), (3, 1))
  reference = {"ids": ids, "types": types, "mask": mask,
               "positions": positions}
  feed = dict(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(types),
              attention_mask=torch.tensor(mask))
  config = _config(vocab_size)
  for name, cls in (("base", transformers.RemBertModel),
                    ("prefixed", transformers.RemBertForSequenceClassification),
                    ("mlm", transformers.RemBertForMaskedLM)):
    model = cls(config).eval()
    model.save_pretrained(out / "hf" / name)
    base = model if name == "base" else model.rembert
    with torch.no_grad():
      outputs = base(**feed)
      reference[f"{name}/sequence_output"] = outputs.last_hidden_state.numpy()
      if outputs.pooler_output is not None:
        reference[f"{name}/pooled_output"] = outputs.pooler_output.numpy()
      if name == "mlm":
        logits = model(**feed).logits.numpy()
        reference["mlm/mlm_logits"] = np.take_along_axis(
            logits, positions[..., None], axis=1)
  transformers.BertModel(transformers.BertConfig(
      vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=32)).save_pretrained(
          out / "hf" / "bert")
  np.savez(out / "reference.npz", **reference)


if __name__ == "__main__":
  main(pathlib.Path(sys.argv[1]), int(sys.argv[2]))

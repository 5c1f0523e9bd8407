"""The most-frequent-token baseline of masked-LM accuracy: always predicting
the token masked most often, on the batches training reads, weighted as
`masked_lm_accuracy` is."""
from typing import Any, Dict, Optional

import numpy as np

from rembert_tf.data import pretraining_input_pipeline


def masked_token_counts(data_config, vocab_size: int,
                        max_batches: Optional[int] = None) -> np.ndarray:
  """Weighted count of each token id among the masked positions (one pass)."""
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(
      data_config.replace(is_training=False)).load()
  counts = np.zeros([vocab_size], np.float64)
  for batch in dataset if max_batches is None else dataset.take(max_batches):
    ids = batch["masked_lm_ids"].numpy().reshape(-1)
    weights = batch["masked_lm_weights"].numpy().reshape(-1)
    np.add.at(counts, ids, weights)
  return counts


def most_frequent_token_baseline(eval_data_config, vocab_size: int,
                                 train_data_config=None,
                                 max_batches: Optional[int] = None
                                 ) -> Dict[str, Any]:
  """{"accuracy", "token_id", "num_predictions"} of always predicting one
  token: chosen on `train_data_config`'s predictions when given (the fair
  baseline), otherwise on the eval predictions themselves."""
  eval_counts = masked_token_counts(eval_data_config, vocab_size, max_batches)
  reference = (masked_token_counts(train_data_config, vocab_size, max_batches)
               if train_data_config is not None else eval_counts)
  token = int(np.argmax(reference))
  total = float(eval_counts.sum())
  return {"accuracy": float(eval_counts[token] / total) if total else 0.0,
          "token_id": token, "num_predictions": total}

"""rembert_tf: RemBERT (decoupled input/output embeddings) on TensorFlow 2 and Model Garden.

Data flow, by folder: `data/` (raw text -> SentencePiece -> TFRecords -> tf.data),
`pretraining/` (the MLM task and `rembert-train`), `export/` (encoder-only
SavedModel), `conversion/` (TF1 / Hugging Face checkpoints), `finetuning/` (XTREME tasks,
`rembert-finetune`), `evaluation/` (XTREME scorer). `modeling/` holds the
Keras layers and models all of them share.
"""
__version__ = "0.1.0"

from rembert_tf.common import worker_pool as _worker_pool  # pylint: disable=g-import-not-at-top

# In a worker process that re-runs a script without a `__main__` guard, the
# script's error reaches its parent as one line (common/worker_pool.py).
_worker_pool.watch_re_run()

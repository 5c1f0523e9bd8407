"""rembert_tf: RemBERT (decoupled input/output embeddings) on TensorFlow 2 and Model Garden.

Data flow, by folder: `data/` (raw text -> SentencePiece -> TFRecords -> tf.data),
`pretraining/` (the MLM task and `rembert-train`), `export/` (encoder-only
SavedModel), `conversion/` (TF1 / Hugging Face checkpoints), `finetuning/` (XTREME tasks,
`rembert-finetune`), `evaluation/` (XTREME scorer). `modeling/` holds the
Keras layers and models all of them share.
"""
__version__ = "0.1.0"

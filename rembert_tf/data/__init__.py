"""Data: raw text -> SentencePiece vocabulary -> pre-training TFRecords -> tf.data, and
XTREME's files -> fine-tuning TFRecords (docs/data.md).

Importing the package imports no module of it (and no TensorFlow).
"""

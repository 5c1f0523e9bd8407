"""Data: raw text -> SentencePiece vocabulary -> TFRecords -> tf.data (docs/data.md).

Importing the package imports no module of it (and no TensorFlow).
"""

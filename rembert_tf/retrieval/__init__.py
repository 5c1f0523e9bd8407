"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba.

Data: `bitext` (one task, split and language; the source signature),
`download_layout` (XTREME's download/ folder), `tfds_source` (prepared
TensorFlow Datasets). Model: `sentence_embedder`, `replica_batches`,
`nearest_neighbors`. Tasks: `tatoeba`, `bucc`; `retrieval_runner` runs them
all (`rembert-retrieve`).
"""

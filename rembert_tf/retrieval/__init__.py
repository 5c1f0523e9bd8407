"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba.

Modules, from data to results:
* `bitext`: one (task, split, language) of retrieval data, and the source
  signature any data source implements;
* `download_layout`: BUCC and Tatoeba read from XTREME's download/ folder,
  where the task table's entries say their files lie;
* `tfds_source`: BUCC and Tatoeba from prepared TensorFlow Datasets;
* `sentence_embedder`: mean-pooled, normalised hidden states of one layer;
* `replica_batches`: fixed-size batches under a tf.distribute strategy;
* `nearest_neighbors`: exact cosine k-nearest neighbours on the devices;
* `tatoeba`, `bucc`: the two tasks' predictions (nearest neighbour; margin
  mining with a threshold from the sample set);
* `retrieval_runner`: every task and language, predictions and scores
  written (the `rembert-retrieve` command).
"""

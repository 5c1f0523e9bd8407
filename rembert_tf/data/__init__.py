"""Pre-training data (the demo corpus generator is rembert_tf.demo.corpus): SentencePiece vocabulary, TFRecords from raw text, tf.data input.

Modules (none of them imports TensorFlow at package import time):
  tokenizer             special ids, `load_sentencepiece`, tokenizer metadata
  sentencepiece_training `train_sentencepiece` (language-balanced sample, fixed special ids)
  text_inputs           plain-text / JSON-lines (wikiextractor, C4/mC4, gzipped) readers,
                        `{lang}` path patterns, a language field, smoothed language sampling
  example_encoding      fast tf.train.Example encoding of fixed-length int / float features
  tfrecord_writer       TFRecord files without TensorFlow (numpy CRC32C)
  pretraining_data      `create_pretraining_data` (masking, packing, sharded TFRecords, metadata;
                        the local multiprocess engine and the steps both engines share)
  beam_pretraining_data the same records as an Apache Beam pipeline (imports apache_beam)
  beam_sentencepiece_sample the SentencePiece training sample drawn by Apache Beam
  pretraining_records   the record layout, `Masking`, metadata.json, staged output swapped in,
                        `write_pretraining_records` (fixtures from already tokenised examples)
  pretrain_dataloader   `RemBertPretrainDataLoader` (Model Garden InputReader; imports TF)
"""

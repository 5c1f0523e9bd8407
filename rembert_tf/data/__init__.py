"""Pre-training data: SentencePiece vocabulary, TFRecords from raw text, tf.data input.

Modules (none of them imports TensorFlow at package import time):
  tokenizer             special ids, `load_sentencepiece`, tokenizer metadata
  sentencepiece_training `train_sentencepiece` (language-balanced sample, fixed special ids)
  text_inputs           plain-text / wikiextractor JSON-lines readers, `{lang}` path patterns,
                        smoothed language sampling
  example_encoding      fast tf.train.Example encoding of fixed-length int / float features
  tfrecord_writer       TFRecord files without TensorFlow (numpy CRC32C)
  pretraining_data      `create_pretraining_data` (masking, packing, sharded TFRecords, metadata)
  pretraining_records   `write_pretraining_records` (fixtures from already tokenised examples)
  pretrain_dataloader   `RemBertPretrainDataLoader` (Model Garden InputReader; imports TF)
  demo_corpus           the embedded multilingual demo corpus generator
"""

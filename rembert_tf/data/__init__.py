"""Pre-training data (the demo corpus generator is rembert_tf.demo.corpus): raw text -> SentencePiece vocabulary -> TFRecords -> tf.data.

Modules, in the order the data flows (none of them imports TensorFlow at package
import time):
  text_inputs               plain-text / JSON-lines (wikiextractor, C4/mC4, gzipped) readers,
                            `{lang}` path patterns, a language field, smoothed language sampling
  tfds_text_inputs          `tfds:NAME/CONFIG[:SPLIT]` inputs: corpora prepared with TensorFlow
                            Datasets (wiki40b, wikipedia, mC4), one unit per shard
  tokenizer                 special ids, `load_sentencepiece`, tokenizer metadata
  sentencepiece_sample      the language-balanced SentencePiece training sample: its steps
                            (counts per file, one plan, lines drawn per file), run locally
  beam_sentencepiece_sample the same steps on Apache Beam, the same sample (imports apache_beam)
  sentencepiece_training    `train_sentencepiece` (draws the sample either way, fixed special ids)
  pretraining_instances     raw text -> packed, masked sequences: options, language plan, chunks,
                            shard order, metadata
  pretraining_record_format the record layout, `Masking`, metadata.json, staged output swapped in,
                            `write_pretraining_records` (fixtures from already tokenised examples)
  example_encoding          fast tf.train.Example encoding of fixed-length int / float features
  tfrecord_writer           TFRecord files without TensorFlow (numpy CRC32C)
  pretraining_record_engine the record engine: a file's records, a shard, metadata.json, and
                            their local multiprocess run
  beam_pretraining_records  the engine's steps as an Apache Beam pipeline (imports apache_beam)
  beam_runner               the Beam runner helpers both Beam pipelines use
  pretraining_record_creation `create_pretraining_data`: checks, then the local or the Beam engine
  pretraining_input_pipeline `RemBertPretrainDataLoader` (Model Garden InputReader; imports TF)
"""

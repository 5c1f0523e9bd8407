"""Pre-training data (the demo corpus generator is rembert_tf.demo.corpus): raw text -> SentencePiece vocabulary -> TFRecords -> tf.data.

Modules, in the order the data flows (none of them imports TensorFlow at package
import time):
  text_inputs               plain-text / JSON-lines (wikiextractor, C4/mC4, gzipped) readers,
                            `{lang}` path patterns, a language field, smoothed language sampling
  tfds_text_inputs          `tfds:NAME/CONFIG[:SPLIT]` inputs: corpora prepared with TensorFlow
                            Datasets (wiki40b, wikipedia, mC4), one unit per shard
  tokenizer                 special ids, `load_sentencepiece`, tokenizer metadata
  sentencepiece_sample      the language-balanced SentencePiece training sample, drawn locally
  beam_sentencepiece_sample the same sample drawn by Apache Beam (imports apache_beam)
  sentencepiece_training    `train_sentencepiece` (draws the sample either way, fixed special ids)
  pretraining_instances     raw text -> packed, masked sequences: options, language plan, chunks,
                            shard order, metadata (the steps both record engines share)
  pretraining_record_format the record layout, `Masking`, metadata.json, staged output swapped in,
                            `write_pretraining_records` (fixtures from already tokenised examples)
  example_encoding          fast tf.train.Example encoding of fixed-length int / float features
  tfrecord_writer           TFRecord files without TensorFlow (numpy CRC32C)
  local_pretraining_records the local multiprocess record engine
  beam_pretraining_records  the same records as an Apache Beam pipeline (imports apache_beam)
  beam_runner               the Beam runner helpers both Beam pipelines use
  pretraining_record_creation `create_pretraining_data`: checks, then the local or the Beam engine
  pretraining_input_pipeline `RemBertPretrainDataLoader` (Model Garden InputReader; imports TF)
"""

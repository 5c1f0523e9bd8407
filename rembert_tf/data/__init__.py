"""Data: raw text -> SentencePiece vocabulary -> TFRecords -> tf.data.

Modules import no TensorFlow at package import time. Text: `text_inputs`,
`tfds_text_inputs`; vocabulary: `tokenizer`, `sentencepiece_sample`,
`sentencepiece_training`; records: `pretraining_instances`,
`pretraining_record_format`, `example_encoding`, `tfrecord_writer`,
`pretraining_record_creation`; both run on `data_engine` (local processes or
Apache Beam); input: `pretraining_input_pipeline`. XTREME fine-tuning
records: `xtreme_readers`, `xtreme_tfds` (on `tfds_reader`), `xtreme_sources`,
`xtreme_records`, `finetuning_data`.
"""

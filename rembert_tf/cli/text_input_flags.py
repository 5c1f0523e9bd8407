"""The corpus flags of `rembert-train-sentencepiece` and `rembert-create-pretraining-data`.

Both read raw text the same way: the vocabulary and the records come from the
same documents.
"""
from absl import flags

from rembert_tf.cli import tfds_flags
from rembert_tf.data import text_inputs
from rembert_tf.data import tfds_text_inputs

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(tfds_flags)  # --tfds_data_dir, for tfds: inputs

flags.DEFINE_multi_string(
    "input", None, "Input spec(s): a glob with {lang} (corpus/{lang}/*.txt) or "
    "lang=glob, or a prepared TFDS dataset (tfds:wiki40b/{lang}, "
    "tfds:NAME/CONFIG[:SPLIT], lang=tfds:...); comma-separated or repeated.")
flags.DEFINE_string("tfds_text_feature", None, "The feature holding the text "
                    "of a tfds: input (default: text).")
flags.DEFINE_enum("input_format", "auto", list(text_inputs.FORMATS),
                  "text (blank line between documents), jsonl (wikiextractor, "
                  "C4/mC4) or auto (by suffix: .json/.jsonl[.gz] are jsonl; "
                  ".gz is read compressed).")
flags.DEFINE_string("language_field", None, "JSON lines: the field naming each "
                    "document's language (else the language of the --input "
                    "spec).")
flags.DEFINE_list("languages", None, "Keep only these languages.")
flags.DEFINE_float("alpha", 0.7, "Language sampling exponent (mBERT: 0.7; 1: "
                   "the natural mix).", lower_bound=0)


def tfds_options() -> tfds_text_inputs.TfdsTextOptions:
  """--tfds_data_dir and --tfds_text_feature, for the `tfds:` inputs."""
  return tfds_text_inputs.TfdsTextOptions(FLAGS.tfds_data_dir,
                                          FLAGS.tfds_text_feature)

r"""Trains the multilingual SentencePiece unigram model (fixed special ids).

Languages are balanced by exponentially smoothed sampling (p_l ** alpha) before
training; `<output_dir>/<model_prefix>.{model,vocab,json}` are written (the
JSON holds vocab_size, the special ids and the model's sha256).

Usage:
  python tools/train_sentencepiece.py --input 'corpus/{lang}/*.txt' \
      --output_dir /tmp/spm --vocab_size 250300
  python tools/train_sentencepiece.py --input en=wiki/en/*.json,sw=wiki/sw/*.json \
      --output_dir /tmp/spm --vocab_size 32000 --alpha 0.5
"""
import sys

from rembert_tf import cli
from absl import app
from absl import flags

from rembert_tf.data import sentencepiece_training
from rembert_tf.data import text_inputs

FLAGS = flags.FLAGS
flags.DEFINE_multi_string(
    "input", None, "Input spec(s): a glob with {lang} (corpus/{lang}/*.txt) or "
    "lang=glob; comma-separated or repeated.")
flags.DEFINE_string("output_dir", None, "Where the model files go.")
flags.DEFINE_integer("vocab_size", 250300, "Exact vocabulary size (250300 for "
                     "RemBERT-scale runs, 2000 for the demo).")
flags.DEFINE_string("model_prefix", "sentencepiece", "File name prefix.")
flags.DEFINE_enum("input_format", "auto", list(text_inputs.FORMATS),
                  "text (blank line between documents), jsonl (wikiextractor) "
                  "or auto (by suffix: .json/.jsonl are jsonl).")
flags.DEFINE_list("languages", None, "Keep only these languages.")
flags.DEFINE_float("alpha", 0.7, "Language sampling exponent (mBERT: 0.7).")
flags.DEFINE_integer("sample_size", 2_000_000, "Lines in the training sample.")
flags.DEFINE_float("character_coverage", 0.99995, "SentencePiece character "
                   "coverage (high: many scripts).")
flags.DEFINE_integer("num_threads", 0, "Trainer threads (0: all cores).")
flags.DEFINE_enum("seed_pieces", "auto", list(sentencepiece_training.SEED_PIECES),
                  "sentencepiece: the library's seed extraction (large vocabularies); "
                  "words: whole-word seeds by token frequency (small vocabularies); "
                  "auto: words when vocab_size <= 8000.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
flags.DEFINE_bool("overwrite", False, "Replace an existing model.")
flags.mark_flags_as_required(["input", "output_dir"])


def main(argv):
  del argv
  try:
    sentencepiece_training.train_sentencepiece(
        FLAGS.input, FLAGS.output_dir, FLAGS.vocab_size,
        model_prefix=FLAGS.model_prefix, input_format=FLAGS.input_format,
        languages=FLAGS.languages, language_sampling_alpha=FLAGS.alpha,
        sample_size=FLAGS.sample_size,
        character_coverage=FLAGS.character_coverage, seed=FLAGS.seed,
        num_threads=FLAGS.num_threads, seed_pieces=FLAGS.seed_pieces,
        overwrite=FLAGS.overwrite)
  except (ValueError, FileExistsError, RuntimeError) as e:
    print(f"train_sentencepiece: error: {e}", file=sys.stderr)
    return 1
  return 0


def run():
  cli.run_command(main, __doc__)


if __name__ == "__main__":
  run()

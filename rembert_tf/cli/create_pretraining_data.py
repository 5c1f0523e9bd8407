r"""Makes sharded pre-training TFRecords (BERT layout, MLM only) from raw text.

Reads plain text (one sentence/paragraph per line, blank line between
documents) or wikiextractor JSON-lines, one or more files per language; mixes
languages by smoothed sampling; tokenises with a rembert_tf SentencePiece model;
writes `pretrain-XXXXX-of-YYYYY.tfrecord` + `metadata.json`. Output is
identical for a seed whatever --num_workers is.

Usage:
  python tools/create_pretraining_data.py --input 'corpus/{lang}/*.txt' \
      --sentencepiece_model /tmp/spm/sentencepiece.model --output_dir /tmp/records \
      --seq_length 128 --max_predictions_per_seq 20 --num_workers 2
  # Unmasked layout for dynamic masking in the input pipeline:
  python tools/create_pretraining_data.py ... --unmasked
"""
import sys

from rembert_tf import cli
from absl import app
from absl import flags

from rembert_tf.data import pretraining_data
from rembert_tf.data import text_inputs

FLAGS = flags.FLAGS
flags.DEFINE_multi_string(
    "input", None, "Input spec(s): a glob with {lang} (corpus/{lang}/*.txt) or "
    "lang=glob; comma-separated or repeated.")
flags.DEFINE_string("output_dir", None, "Where shards and metadata.json go.")
flags.DEFINE_string("sentencepiece_model", None,
                    "Model from tools/train_sentencepiece.py.")
flags.DEFINE_enum("input_format", "auto", list(text_inputs.FORMATS),
                  "text, jsonl (wikiextractor) or auto (by suffix).")
flags.DEFINE_list("languages", None, "Keep only these languages.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence, [CLS]/[SEP] included.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Share of tokens predicted.")
flags.DEFINE_float("mask_token_rate", 0.8, "Predicted tokens replaced by [MASK].")
flags.DEFINE_float("random_token_rate", 0.1, "Predicted tokens replaced by a "
                   "random token (the rest are kept).")
flags.DEFINE_integer("dupe_factor", 1, "Passes over the largest language, each "
                     "masked differently (smaller languages get more).")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter sequence.")
flags.DEFINE_bool("unmasked", False, "Write the unmasked layout (dynamic "
                  "masking in the input pipeline: use_dynamic_masking=True).")
flags.DEFINE_float("alpha", 0.7, "Language sampling exponent (1: natural mix).")
flags.DEFINE_integer("num_output_shards", 8, "Shard files.")
flags.DEFINE_integer("num_workers", 1, "Worker processes.")
flags.DEFINE_integer("seed", 12345, "Random seed.")
flags.DEFINE_bool("overwrite", False, "Replace records already in output_dir.")
flags.mark_flags_as_required(["input", "output_dir", "sentencepiece_model"])


def main(argv):
  del argv
  try:
    pretraining_data.create_pretraining_data(
        FLAGS.input, FLAGS.output_dir, FLAGS.sentencepiece_model,
        seq_length=FLAGS.seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        mask_token_rate=FLAGS.mask_token_rate,
        random_token_rate=FLAGS.random_token_rate,
        dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
        unmasked=FLAGS.unmasked, language_sampling_alpha=FLAGS.alpha,
        input_format=FLAGS.input_format, languages=FLAGS.languages,
        num_output_shards=FLAGS.num_output_shards,
        num_workers=FLAGS.num_workers, seed=FLAGS.seed,
        overwrite=FLAGS.overwrite)
  except (ValueError, FileExistsError) as e:
    print(f"create_pretraining_data: error: {e}", file=sys.stderr)
    return 1
  return 0


def run():
  cli.run_command(main, __doc__)


if __name__ == "__main__":
  run()

r"""Makes sharded pre-training TFRecords (BERT layout, MLM only) from raw text.

Reads plain text, wikiextractor or C4/mC4 JSON lines (gzipped or not) on any
filesystem, or corpora prepared with TensorFlow Datasets; mixes languages by
smoothed sampling; writes `pretrain-XXXXX-of-YYYYY.tfrecord` +
`metadata.json`, identical for a seed whatever --num_workers and the engine:
local processes, or an Apache Beam runner (`--runner`; its pipeline options
follow a `--`).

Usage:
  rembert-create-pretraining-data --input 'corpus/{lang}/*.txt' \
      --sentencepiece_model /tmp/spm/sentencepiece.model --output_dir /tmp/records \
      --seq_length 128 --max_predictions_per_seq 20 --num_workers 2
  # Apache Beam (pip install 'rembert_tf[beam]'), here on Dataflow:
  rembert-create-pretraining-data --input 'gs://b/mc4/c4-{lang}.tfrecord-*.json.gz' \
      --sentencepiece_model gs://b/spm/sentencepiece.model --output_dir gs://b/records \
      --num_output_shards 2048 --runner DataflowRunner -- \
      --project=my-project --region=us-central1 --temp_location=gs://b/tmp \
      --setup_file=./setup.py --max_num_workers=64
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import text_input_flags  # noqa: E402  (--input, --tfds_data_dir, ...)
from rembert_tf.common import errors
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import pretraining_record_format

PROG = command_names.console_script(__spec__.name)  # rembert-create-pretraining-data
FLAGS = flags.FLAGS
flags.adopt_module_key_flags(text_input_flags)  # listed under --help
flags.DEFINE_string("output_dir", None, "Where shards and metadata.json go "
                    "(any filesystem: gs://...).")
flags.DEFINE_string("sentencepiece_model", None,
                    "SentencePiece model (special ids found by piece name).")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence, [CLS]/[SEP] included.",
                     lower_bound=3)
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.",
                     lower_bound=1)
flags.DEFINE_float("masked_lm_prob", 0.15, "Share of tokens predicted.",
                   upper_bound=1)
flags.DEFINE_float("mask_token_rate", 0.8, "Predicted tokens replaced by [MASK].",
                   lower_bound=0, upper_bound=1)
flags.DEFINE_float("random_token_rate", 0.1, "Predicted tokens replaced by a "
                   "random token (the rest are kept).", lower_bound=0,
                   upper_bound=1)
flags.DEFINE_integer("dupe_factor", 1, "Passes over the largest language, each "
                     "masked differently (smaller languages get more).",
                     lower_bound=1)
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter sequence.",
                   lower_bound=0, upper_bound=1)
flags.DEFINE_bool("unmasked", False, "Write the unmasked layout (dynamic "
                  "masking in the input pipeline: use_dynamic_masking=True).")
flags.DEFINE_integer("num_output_shards", 8, "Shard files.", lower_bound=1,
                     upper_bound=100_000)
flags.DEFINE_integer("num_workers", 1, "Worker processes (local engine) or "
                     "workers of Beam's local runner.", lower_bound=1)
flags.DEFINE_string("runner", None, "Apache Beam runner (DirectRunner, "
                    "DataflowRunner, FlinkRunner, SparkRunner); unset: the local "
                    "multiprocess engine. Beam pipeline options follow `--`.")
flags.DEFINE_integer("seed", 12345, "Random seed.", lower_bound=0)
flags.DEFINE_bool("overwrite", False, "Replace records already in output_dir "
                  "(the old ones stay until the new ones are complete).")


@errors.command(PROG)
def main(argv):
  beam_args = list(argv[1:])
  if beam_args and not FLAGS.runner:
    raise errors.UsageError(
        f"unexpected arguments {beam_args}: Beam pipeline options after `--` "
        "need --runner (e.g. --runner DataflowRunner).")
  masking = pretraining_record_format.Masking(
      masked_lm_prob=FLAGS.masked_lm_prob,
      mask_token_rate=FLAGS.mask_token_rate,
      random_token_rate=FLAGS.random_token_rate)
  pretraining_record_creation.create_pretraining_data(
      FLAGS.input, FLAGS.output_dir, FLAGS.sentencepiece_model,
      input_format=FLAGS.input_format, languages=FLAGS.languages,
      language_field=FLAGS.language_field,
      tfds=text_input_flags.tfds_options(), num_workers=FLAGS.num_workers,
      runner=FLAGS.runner, beam_args=beam_args, overwrite=FLAGS.overwrite,
      seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq, masking=masking,
      dupe_factor=FLAGS.dupe_factor, short_seq_prob=FLAGS.short_seq_prob,
      unmasked=FLAGS.unmasked, language_sampling_alpha=FLAGS.alpha,
      num_output_shards=FLAGS.num_output_shards, seed=FLAGS.seed)
  return 0


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True,
              required=["input", "output_dir", "sentencepiece_model"])


if __name__ == "__main__":
  run()

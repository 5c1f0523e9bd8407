r"""Trains the multilingual SentencePiece unigram model (fixed special ids).

Languages are balanced by smoothed sampling (p_l ** alpha) before training;
writes `<output_dir>/<model_prefix>.{model,vocab,json}`.

Usage:
  rembert-train-sentencepiece --input 'corpus/{lang}/*.txt' \
      --output_dir /tmp/spm --vocab_size 250300
  rembert-train-sentencepiece --input 'tfds:wikipedia/20230601.{lang}' \
      --tfds_data_dir gs://b/tensorflow_datasets --languages en,sw,yo \
      --output_dir /tmp/spm --vocab_size 32000
  # The sample drawn by Apache Beam (pip install 'rembert_tf[beam]'), where the
  # text is; Beam pipeline options follow `--`:
  rembert-train-sentencepiece --input 'gs://b/mc4/c4-{lang}.tfrecord-*.json.gz' \
      --output_dir gs://b/spm --vocab_size 250300 --sample_with_beam \
      --runner DataflowRunner --sample_path gs://b/spm/sample.txt -- \
      --project=my-project --region=us-central1 --temp_location=gs://b/tmp
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import text_input_flags  # noqa: E402  (--input, --tfds_data_dir, ...)
from rembert_tf.common import errors
from rembert_tf.data import sentencepiece_training

PROG = command_names.console_script(__spec__.name)  # rembert-train-sentencepiece
FLAGS = flags.FLAGS
flags.adopt_module_key_flags(text_input_flags)  # listed under --help
flags.DEFINE_string("output_dir", None, "Where the model files go (any "
                    "filesystem).")
flags.DEFINE_integer("vocab_size", 250300, "Exact vocabulary size (250300 for "
                     "RemBERT-scale runs, 2000 for the demo).",
                     lower_bound=1)
flags.DEFINE_string("model_prefix", "sentencepiece", "File name prefix.")
flags.DEFINE_integer("sample_size", 2_000_000, "Lines in the training sample.",
                     lower_bound=1)
flags.DEFINE_float("character_coverage", 0.99995, "SentencePiece character "
                   "coverage (high: many scripts).", upper_bound=1)
command.require("character_coverage", lambda coverage: coverage > 0,
                "must be above 0")
flags.DEFINE_integer(
    "num_threads", sentencepiece_training.DEFAULT_NUM_THREADS,
    "Trainer threads. The model depends on the thread count, not on the "
    "machine: the same input and flags give a byte-identical model.",
    lower_bound=1)
flags.DEFINE_enum("seed_pieces", "auto", list(sentencepiece_training.SEED_PIECES),
                  "sentencepiece: the library's seed extraction (large vocabularies); "
                  "words: whole-word seeds by token frequency (small vocabularies); "
                  "auto: words when vocab_size <= 8000.")
flags.DEFINE_bool("sample_with_beam", False, "Draw the training sample with an "
                  "Apache Beam pipeline (--runner; options after `--`).")
flags.DEFINE_string("runner", "DirectRunner", "Beam runner for "
                    "--sample_with_beam (DirectRunner, DataflowRunner, ...).")
flags.DEFINE_string("sample_path", None, "Where the sample is written (needed "
                    "for remote Beam runners: gs://...; default: a temporary "
                    "local file).")
flags.DEFINE_bool("sample_only", False, "Write the sample to --sample_path and "
                  "stop (train later on one machine with --input "
                  "xx=SAMPLE_PATH --alpha 1).")
flags.DEFINE_integer("seed", 0, "Sampling seed.", lower_bound=0)
flags.DEFINE_bool("overwrite", False, "Replace an existing model.")


@errors.command(PROG)
def main(argv):
  beam_args = list(argv[1:])
  if beam_args and not FLAGS.sample_with_beam:
    raise errors.UsageError(
        f"unexpected arguments {beam_args}: Beam pipeline options after `--` "
        "need --sample_with_beam.")
  if not FLAGS.output_dir and not FLAGS.sample_only:
    raise errors.UsageError("--output_dir is required (where the model goes).")
  sentencepiece_training.train_sentencepiece(
      FLAGS.input, FLAGS.output_dir, FLAGS.vocab_size,
      model_prefix=FLAGS.model_prefix, input_format=FLAGS.input_format,
      languages=FLAGS.languages, language_field=FLAGS.language_field,
      tfds=text_input_flags.tfds_options(), language_sampling_alpha=FLAGS.alpha,
      sample_size=FLAGS.sample_size,
      character_coverage=FLAGS.character_coverage, seed=FLAGS.seed,
      num_threads=FLAGS.num_threads, seed_pieces=FLAGS.seed_pieces,
      sample_with_beam=FLAGS.sample_with_beam, runner=FLAGS.runner,
      beam_args=beam_args, sample_path=FLAGS.sample_path,
      sample_only=FLAGS.sample_only, overwrite=FLAGS.overwrite)
  return 0


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True, required=["input"])


if __name__ == "__main__":
  run()

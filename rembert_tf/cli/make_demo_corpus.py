r"""Writes the embedded multilingual demo corpus (see rembert_tf/data/demo_corpus.py).

Usage:
  python tools/make_demo_corpus.py --output_dir /tmp/corpus --megabytes 2
  # -> /tmp/corpus/{en,es,ru,el,ar,hi,zh}/part-0000N.txt
"""
from rembert_tf import cli
from absl import app
from absl import flags

from rembert_tf.data import demo_corpus

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Corpus root; gets one folder per language.")
flags.DEFINE_float("megabytes", 2.0, "Approximate total size.")
flags.DEFINE_list("languages", list(demo_corpus.LANGUAGES), "Languages to write.")
flags.DEFINE_integer("files_per_language", 2, "Files per language.")
flags.DEFINE_integer("seed", 0, "Corpus seed.")
flags.mark_flag_as_required("output_dir")


def main(argv):
  del argv
  demo_corpus.generate_corpus(
      FLAGS.output_dir, languages=FLAGS.languages,
      target_megabytes=FLAGS.megabytes,
      files_per_language=FLAGS.files_per_language, seed=FLAGS.seed,
      verbose=True)


def run():
  cli.run_command(main, __doc__, "rembert-make-demo-corpus",
                  output_dir_flag="output_dir")


if __name__ == "__main__":
  run()

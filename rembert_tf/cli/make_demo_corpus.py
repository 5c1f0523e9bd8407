r"""Writes the embedded multilingual demo corpus (see rembert_tf/demo/corpus.py).

Seven languages in six scripts from one grammar: English and six synthetic
languages; the non-English ones mix monolingual, parallel (each sentence then
its English rendering) and code-switched documents.

With --xnli_dir it also writes XNLI-like sentence pairs from the same
grammar in XTREME's `download/` layout (English training pairs, dev pairs in
every language), the folder `rembert-finetune --task xnli --data_dir` reads.

Usage:
  rembert-make-demo-corpus --output_dir /tmp/corpus --megabytes 2
  # -> /tmp/corpus/{en,es,ru,el,ar,hi,zh}/part-0000N.txt
  rembert-make-demo-corpus --output_dir corpus --xnli_dir download
  # + download/xnli/{train-en,dev-en,dev-es,...}.tsv
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.demo import corpus
from rembert_tf.demo import lexicon
from rembert_tf.demo import nli

PROG = command_names.console_script(__spec__.name)  # rembert-make-demo-corpus
FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Corpus root (any file system); gets "
                    "one folder per language.")
flags.DEFINE_float("megabytes", 2.0, "Approximate total size (above 0).")
flags.DEFINE_list("languages", list(lexicon.LANGUAGES), "Languages to write.")
flags.DEFINE_integer("files_per_language", 2, "Files per language.",
                     lower_bound=1)
flags.DEFINE_integer("seed", 0, "Corpus seed.", lower_bound=0)
flags.DEFINE_float("parallel_fraction", corpus.PARALLEL_FRACTION,
                   "Share of each non-English language's documents that are "
                   "parallel (each sentence followed by its English rendering).",
                   lower_bound=0, upper_bound=1)
flags.DEFINE_float("code_switched_fraction", corpus.CODE_SWITCHED_FRACTION,
                   "Share of each non-English language's documents that are "
                   "code-switched (some content words in English).",
                   lower_bound=0, upper_bound=1)
command.require("megabytes", lambda size: size > 0,
                "give a size above 0 (e.g. --megabytes 2)")
flags.DEFINE_string("xnli_dir", None, "Also write XNLI-like pairs of the "
                    "--languages here, in XTREME's download/ layout "
                    "(XNLI_DIR/xnli/train-en.tsv, dev-LANG.tsv): the "
                    "--data_dir of rembert-finetune --task xnli.")
flags.DEFINE_integer("xnli_train_pairs", 4000, "English training pairs of "
                     "--xnli_dir.", lower_bound=1)
flags.DEFINE_integer("xnli_dev_pairs", 300, "Dev pairs per language of "
                     "--xnli_dir.", lower_bound=1)
flags.DEFINE_bool("overwrite", False, "Replace an existing --output_dir (the "
                  "new corpus is written aside and swapped in whole).")


@errors.command(PROG)
def main(argv):
  del argv
  if FLAGS.xnli_dir:  # before the corpus is written
    outputs.refuse_existing([FLAGS.xnli_dir], FLAGS.overwrite)
  corpus.generate_corpus(
      FLAGS.output_dir, languages=FLAGS.languages,
      target_megabytes=FLAGS.megabytes,
      files_per_language=FLAGS.files_per_language, seed=FLAGS.seed,
      parallel_fraction=FLAGS.parallel_fraction,
      code_switched_fraction=FLAGS.code_switched_fraction, verbose=True,
      overwrite=FLAGS.overwrite)
  if FLAGS.xnli_dir:
    with outputs.atomic_directory(FLAGS.xnli_dir,
                                  overwrite=FLAGS.overwrite) as tmp:
      nli.write_xnli_files(tmp, num_train=FLAGS.xnli_train_pairs,
                           num_dev=FLAGS.xnli_dev_pairs,
                           languages=FLAGS.languages, seed=FLAGS.seed)
    print(f"XNLI-like pairs: {fileio.join(FLAGS.xnli_dir, 'xnli')} "
          f"({FLAGS.xnli_train_pairs} English training pairs, "
          f"{FLAGS.xnli_dev_pairs} dev pairs in each of "
          f"{', '.join(FLAGS.languages)})", flush=True)


def run():
  command.run(main, __doc__, PROG, output_dir_flag="output_dir", artefact=True,
              required=["output_dir"])


if __name__ == "__main__":
  run()

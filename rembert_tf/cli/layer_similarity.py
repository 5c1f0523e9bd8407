r"""Linear CKA between every pair of layers of two checkpoints, on the same inputs.

Writes `layer_similarity.md` (the table), `layer_similarity.png` (heatmap) and
`layer_similarity.json` under --output_dir: pre-trained against fine-tuned
(--checkpoint_b, a fine-tuning run kept with --keep_checkpoints), two models
of one vocabulary, or one model on parallel sentences of two languages
(--sentences_b). docs/ablation.md has the details.

Example:

  rembert-layer-similarity --checkpoint runs/pretrain \
    --checkpoint_b runs/ft/xnli/runs/lr-2e-05_seed-0 \
    --sentences download/xnli/dev-en.tsv --output_dir runs/cka
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.common import errors  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-layer-similarity
FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "First checkpoint (table rows).")
flags.DEFINE_string("checkpoint_b", None, "Second checkpoint (columns); "
                    "default: the first.")
flags.DEFINE_string("sentences", None, "Inputs: one sentence per line (a TSV's "
                    "first column is used).")
flags.DEFINE_string("sentences_b", None, "Parallel inputs for --checkpoint_b "
                    "(e.g. in another language); default: --sentences.")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model "
                    "(default: the first checkpoint's sentencepiece.model).")
flags.DEFINE_string("model_config", None, "Model config (name or YAML) for a "
                    "checkpoint without one (default: the first's).")
flags.DEFINE_integer("seq_length", 128, "Pieces per sentence.")
flags.DEFINE_integer("max_sentences", 512, "Sentences read from each file.",
                     lower_bound=1)
flags.DEFINE_enum("pooling", "mean", ["mean", "tokens"], "mean: one vector per "
                  "sentence; tokens: every real token (same sentences only).")
flags.DEFINE_string("output_dir", None, "Where the table, heatmap and JSON go.")
flags.DEFINE_bool("overwrite", False, "Replace an earlier result in "
                  "--output_dir (its JSON, markdown and heatmap, as one set).")


def _read_sentences(flag: str):
  """The first column of each non-empty line, at most --max_sentences."""
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  path = FLAGS[flag].value
  if not fileio.exists(path):
    raise errors.UsageError(f"--{flag} {path}: no such file.")
  lines = [l.split("\t")[0].strip() for l in fileio.read_text(path).splitlines()]
  return [l for l in lines if l][:FLAGS.max_sentences]


@errors.command(PROG)
def main(argv) -> int:
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments {argv[1:]}; see --help.")
  from rembert_tf.common import output_overlap  # pylint: disable=g-import-not-at-top
  output_overlap.refuse_overlap(FLAGS.output_dir, {
      "--sentences": FLAGS.sentences, "--sentences_b": FLAGS.sentences_b},
                             "--output_dir")
  sentences_a = _read_sentences("sentences")
  sentences_b = _read_sentences("sentences_b") if FLAGS.sentences_b else None
  # TensorFlow loads here, not when the flags are defined.
  from rembert_tf.evaluation import layer_similarity  # pylint: disable=g-import-not-at-top
  result = layer_similarity.analyze_checkpoints(
      FLAGS.checkpoint, FLAGS.checkpoint_b, sentences_a, sentences_b,
      sp_model=FLAGS.sentencepiece_model, seq_length=FLAGS.seq_length,
      pooling=FLAGS.pooling, output_dir=FLAGS.output_dir,
      model_config=FLAGS.model_config, overwrite=FLAGS.overwrite)
  print(result.markdown())
  print(f"written: {FLAGS.output_dir}/{{{layer_similarity.RESULT_MARKDOWN},"
        f"{layer_similarity.RESULT_HEATMAP},{layer_similarity.RESULT_JSON}}}")
  return 0


def run() -> None:
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              required=["checkpoint", "sentences", "output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

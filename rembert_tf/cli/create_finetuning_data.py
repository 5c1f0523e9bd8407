r"""Writes XTREME fine-tuning TFRecords from the benchmark's `download/` layout or TFDS.

The examples come from the folder XTREME's download script leaves
(`--data_dir`) or, with `--data_source tfds`, from the TensorFlow Datasets
prepared in `--tfds_data_dir` (local or gs://; never downloaded). English
training records plus every language's dev and test records, with
static shapes, side files to write predictions back in the benchmark layout,
and the gold labels in the scorer's layout (see
rembert_tf/finetuning/xtreme_records.py for the record format).

Example:

  rembert-create-finetuning-data --task xnli --data_dir download \
    --sentencepiece_model model_dir/sentencepiece.model --output_dir records
  rembert-create-finetuning-data --task mlqa --data_dir download \
    --sentencepiece_model model_dir/sentencepiece.model --output_dir records \
    --seq_length 384 --doc_stride 128 --max_query_length 64
  rembert-create-finetuning-data --task udpos --data_source tfds \
    --tfds_data_dir gs://bucket/tensorflow_datasets \
    --sentencepiece_model model_dir/sentencepiece.model --output_dir records
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.cli import xtreme_source_flags  # noqa: E402  (--data_source, --tfds_data_dir)
from rembert_tf.common import errors
from rembert_tf.evaluation import xtreme_tasks  # the task names; no TensorFlow

PROG = command_names.console_script(__spec__.name)  # rembert-create-finetuning-data

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(xtreme_source_flags)  # listed under --help
flags.DEFINE_enum("task", None, list(xtreme_tasks.FINETUNING_TASKS),
                  "XTREME task.")
flags.DEFINE_string("data_dir", None, "The XTREME download/ folder.")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model of the "
                    "checkpoint.")
flags.DEFINE_string("output_dir", None, "Records go to OUTPUT_DIR/<task>/.")
flags.DEFINE_integer("seq_length", None, "Sequence length (default 128; 384 "
                     "for QA tasks).", lower_bound=8)
flags.DEFINE_integer("doc_stride", 128, "QA: stride between context windows.",
                     lower_bound=1)
flags.DEFINE_integer("max_query_length", 64, "QA: question pieces kept.",
                     lower_bound=1)
flags.DEFINE_list("languages", None, "dev/test languages (default: every "
                  "language present in the data).")
flags.DEFINE_list("splits", ["dev", "test"], "Evaluation splits to write.")
flags.DEFINE_bool("overwrite", False, "Replace an existing OUTPUT_DIR/<task>.")
flags.DEFINE_bool("allow_unlabelled_dev", False, "Accept dev files without "
                  "labels or examples (they get no dev score; a fine-tuning "
                  "sweep cannot select its learning rate on them).")


@errors.command(PROG)
def main(argv):
  del argv
  # TensorFlow and Model Garden load here, not when the flags are defined.
  from rembert_tf.data import finetuning_data  # pylint: disable=g-import-not-at-top
  finetuning_data.create_finetuning_data(
      task=FLAGS.task, data_dir=FLAGS.data_dir,
      sp_model=FLAGS.sentencepiece_model,
      data_source=FLAGS.data_source, tfds_data_dir=FLAGS.tfds_data_dir,
      output_dir=FLAGS.output_dir, seq_length=FLAGS.seq_length,
      doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
      languages=FLAGS.languages, splits=FLAGS.splits,
      overwrite=FLAGS.overwrite,
      allow_unlabelled_dev=FLAGS.allow_unlabelled_dev)


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True,
              required=["task", "sentencepiece_model", "output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

r"""Exports a checkpoint's encoder (alone) as a TF-Hub-style SavedModel, and its preprocessor.

The encoder SavedModel holds no output-side variable (#FT parameters only) and
has the TF-Hub BERT encoder interface; with --export_preprocessor, a second
SavedModel maps raw strings to the encoder's inputs in-graph (docs/export.md).
Paths may be local or on any TensorFlow filesystem (gs://...).

Usage:
  rembert-export --checkpoint runs/pretrain \
      --output_dir export/rembert_encoder \
      [--config tiny] [--export_preprocessor \
       --sentencepiece_model runs/pretrain/sentencepiece.model \
       --preprocessor_dir export/rembert_preprocessor --seq_length 128] [--overwrite]
"""
import contextlib
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.common import errors  # noqa: E402
from absl import flags  # noqa: E402

from rembert_tf.common import fileio  # noqa: E402
from rembert_tf.common import output_overlap  # noqa: E402
from rembert_tf.common import outputs  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-export

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "rembert_tf checkpoint directory, "
                    "pre-training model_dir or checkpoint prefix "
                    "(model_config.yaml + encoder/ckpt-N or Model Garden ckpt-N).")
flags.DEFINE_string("config", None, "Model preset name or YAML path; only "
                    "needed when --checkpoint has no model_config.yaml.")
flags.DEFINE_string("output_dir", None, "Encoder SavedModel directory to create.")
flags.DEFINE_bool("export_preprocessor", False, "Also export the preprocessing "
                  "SavedModel (strings -> encoder inputs).")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model "
                    "(default: CHECKPOINT/sentencepiece.model).")
flags.DEFINE_string("preprocessor_dir", None, "Preprocessing SavedModel "
                    "directory (default: OUTPUT_DIR + '_preprocessor').")
flags.DEFINE_integer("seq_length", 128, "Default packed sequence length of the "
                     "preprocessor (<= max_position_embeddings).")
flags.DEFINE_bool("overwrite", False, "Replace existing output directories "
                  "(the old ones stay until the new ones are complete).")


@errors.command(PROG)
def main(argv):
  del argv
  # TensorFlow loads here, not when the flags are defined.
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_restore  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import encoder_export  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import preprocessor_export  # pylint: disable=g-import-not-at-top
  if FLAGS.export_preprocessor:  # the flags first, before any file is read
    preprocessor_export.check_seq_length(FLAGS.seq_length)
  source = checkpoint_layout.resolve(FLAGS.checkpoint)
  _check_same_vocabulary(FLAGS.sentencepiece_model, source)
  sp_model = FLAGS.sentencepiece_model or source.sp_model
  preprocessor_dir = (FLAGS.preprocessor_dir
                      or FLAGS.output_dir.rstrip("/") + "_preprocessor")
  inputs = {"--checkpoint": FLAGS.checkpoint,
            "--sentencepiece_model": sp_model}
  output_overlap.refuse_overlap(FLAGS.output_dir, inputs, "--output_dir")
  with contextlib.ExitStack() as held:
    if FLAGS.export_preprocessor:  # every check before the (long) encoder export
      output_overlap.refuse_overlap(preprocessor_dir, dict(
          inputs, **{"--output_dir": FLAGS.output_dir}), "--preprocessor_dir")
      if sp_model is None:
        raise errors.UsageError(
            "--export_preprocessor needs --sentencepiece_model (no "
            f"sentencepiece.model comes with {FLAGS.checkpoint}).")
      tokenizer.SpecialTokens.from_model(sp_model)  # refuses any other file
      preprocessor_export.check_seq_length(FLAGS.seq_length, (
          checkpoint_restore.model_config_of(source, FLAGS.config)
          .max_position_embeddings))
      # Both outputs are this run's from the start (one writer each).
      held.enter_context(outputs.taking_output(preprocessor_dir))
      outputs.refuse_existing([preprocessor_dir], FLAGS.overwrite)
    encoder_export.export_encoder(source, FLAGS.output_dir, config=FLAGS.config,
                                  sp_model=sp_model, overwrite=FLAGS.overwrite)
    print(f"Encoder SavedModel: {FLAGS.output_dir}")
    if FLAGS.export_preprocessor:
      preprocessor_export.export_preprocessor(
          sp_model, preprocessor_dir, seq_length=FLAGS.seq_length,
          overwrite=FLAGS.overwrite)
      print(f"Preprocessing SavedModel: {preprocessor_dir}")
  return 0


def _check_same_vocabulary(sp_model, source) -> None:
  """--sentencepiece_model must be, by content, the checkpoint's own model
  when it has one: another vocabulary would feed the encoder wrong ids."""
  if not sp_model or not source.sp_model:
    return
  given, own = fileio.sha256(sp_model), fileio.sha256(source.sp_model)
  if given != own:
    raise errors.InputError(
        f"--sentencepiece_model {sp_model} (sha256 {given}) is not the "
        "SentencePiece model the checkpoint was trained with: "
        f"{source.sp_model} (sha256 {own}); its ids would not be the "
        "encoder's. Drop --sentencepiece_model to use the checkpoint's own.")


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True, required=["checkpoint", "output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

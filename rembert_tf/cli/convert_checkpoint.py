r"""Converts RemBERT checkpoints: released TF1 / Hugging Face / rembert_tf / keras-hub.

--from tf1 (a name-based checkpoint prefix + its JSON --config; optimizer
slots skipped), hf (config.json + model.safetensors; never the pickles of
pytorch_model.bin), rembert_tf (a checkpoint directory or pre-training
model_dir) or keras_hub (a preset of rembert_tf.keras_hub); --to rembert_tf
(model_config.yaml, encoder/, [pretrainer/]: what train, export and fine-tune
take), hf or keras_hub. keras_hub, either way, needs the `keras` extra. Paths
may be on any TensorFlow filesystem (gs://...); docs/conversion.md has the
details.

Usage:
  rembert-convert --from tf1 --to rembert_tf \
      --checkpoint rembert/model.ckpt --config rembert/config.json \
      --sentencepiece_model rembert/sentencepiece.model \
      --output_dir converted/rembert [--with_output_side]
  rembert-convert --from rembert_tf --to hf \
      --checkpoint runs/pretrain --output_dir hf/rembert
  rembert-convert --from tf1 --to keras_hub \
      --checkpoint rembert/model.ckpt \
      --sentencepiece_model rembert/sentencepiece.model \
      --output_dir presets/rembert --with_output_side
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.common import errors  # noqa: E402
from rembert_tf.common import output_overlap  # noqa: E402
from absl import flags  # noqa: E402

PROG = command_names.console_script(__spec__.name)  # rembert-convert

FLAGS = flags.FLAGS
flags.DEFINE_enum("from", None, ["tf1", "hf", "rembert_tf", "keras_hub"],
                  "Input format.")
flags.DEFINE_enum("to", None, ["rembert_tf", "hf", "keras_hub"],
                 "Output format.")
flags.DEFINE_string("checkpoint", None, "Input checkpoint (prefix or "
                    "directory).")
flags.DEFINE_string("output_dir", None, "Output directory to create.")
flags.DEFINE_string("config", None, "tf1: JSON config (default: config.json "
                    "beside the checkpoint); hf: overrides DIR/config.json; "
                    "rembert_tf: preset/YAML when model_config.yaml is missing.")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model to put "
                    "in the output.")
flags.DEFINE_bool("with_output_side", False, "Also convert the output side "
                  "(MLM transform, output embedding and bias; tf1: matched by "
                  "role and shape). Needed to continue pre-training.")
flags.DEFINE_bool("encoder_only", False, "Drop the output side (MLM head) of "
                  "an hf or rembert_tf input.")
flags.DEFINE_bool("allow_missing_pooler", False, "Accept an input without "
                  "the pooler (Hugging Face RemBertForMaskedLM); the pooler "
                  "then starts from a fresh initialisation.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output_dir (the "
                  "old one stays until the new one is complete).")


@errors.command(PROG)
def main(argv):
  del argv
  from rembert_tf.conversion import converter  # pylint: disable=g-import-not-at-top
  output_overlap.refuse_overlap(
      FLAGS.output_dir, {"--checkpoint": FLAGS.checkpoint,
                         "--sentencepiece_model": FLAGS.sentencepiece_model},
      "--output_dir")
  out = converter.convert_checkpoint(
      FLAGS["from"].value, FLAGS.to, FLAGS.checkpoint, FLAGS.output_dir,
      config=FLAGS.config, sp_model=FLAGS.sentencepiece_model,
      encoder_only=FLAGS.encoder_only,
      with_output_side=FLAGS.with_output_side, overwrite=FLAGS.overwrite,
      allow_missing_pooler=FLAGS.allow_missing_pooler)
  print(f"Wrote {out}")
  if FLAGS["from"].value == "tf1" and not FLAGS.sentencepiece_model:
    print(f"{PROG}: note: {out} holds no vocabulary (no "
          "--sentencepiece_model); "
          f"{converter.release_vocabulary_advice(FLAGS.checkpoint)}.",
          flush=True)
  return 0


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True,
              required=["from", "to", "checkpoint", "output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

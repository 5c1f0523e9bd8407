r"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba.

Embeds both sides of each language pair with the mean-pooled hidden states of
one encoder block (--layer; default `depth // 2 + 2`, XTREME's middle layer):
Tatoeba takes each English sentence's nearest sentence by cosine, BUCC mines
pairs by ratio margin at the threshold chosen on its sample set. Reads
XTREME's download/ folder or TFDS, every file checked before any work; writes
OUTPUT_DIR/predictions/<task>/test-<lang>.tsv (the submission layout),
labels/ where the gold is known, and results.{json,md} (docs/xtreme.md).

Example:

  rembert-retrieve --checkpoint runs/pretrain --data_dir download \
    --output_dir runs/retrieve --tasks tatoeba,bucc2018 --languages de,fr
  rembert-retrieve --checkpoint runs/pretrain --data_source tfds \
    --tfds_data_dir gs://bucket/tensorflow_datasets --output_dir runs/retrieve_tfds
  rembert-evaluate-xtreme --prediction_folder runs/retrieve/predictions \
    --label_folder runs/retrieve/labels
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before `main` imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.cli import deprecated_flags  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: F401,E402  (--strategy, --tpu, ...)
from rembert_tf.cli import xtreme_source_flags  # noqa: E402  (--data_source, --tfds_data_dir)
from rembert_tf.common import errors  # noqa: E402
from rembert_tf.common import output_overlap  # noqa: E402
from rembert_tf.common import output_sets  # noqa: E402
from rembert_tf.common import outputs  # noqa: E402

FLAGS = flags.FLAGS
for _runtime_flag in ("strategy", "tpu", "mixed_precision"):   # under --help
  flags.declare_key_flag(_runtime_flag)
flags.adopt_module_key_flags(xtreme_source_flags)
flags.DEFINE_string("checkpoint", None, "Encoder: pre-training model_dir, "
                    "converted checkpoint dir, encoder ckpt prefix, exported "
                    "SavedModel dir, or fine-tuning run (with --model_config).")
flags.DEFINE_string("model_config", None, "Model config name / YAML, when the "
                    "checkpoint does not carry model_config.yaml.")
flags.DEFINE_string("sentencepiece_model", None, "SentencePiece model "
                    "(default: the checkpoint's sentencepiece.model).")
flags.DEFINE_string("data_dir", None, "XTREME's download/ folder (bucc2018/, "
                    "tatoeba/), read with --data_source download.")
flags.DEFINE_list("tasks", ["bucc2018", "tatoeba"], "Retrieval tasks.")
flags.DEFINE_list("languages", None, "Languages (default: every language "
                  "of each task the source holds).")
flags.DEFINE_string("output_dir", None, "Predictions, labels, results.")
flags.DEFINE_integer("layer", None, "Block whose hidden states are pooled, "
                     "1..depth or -1 (default: depth // 2 + 2).", lower_bound=-1)
flags.DEFINE_integer("seq_length", None, "Pieces per sentence with [CLS] and "
                     "[SEP] (default: 128, at most max_position_embeddings).",
                     lower_bound=3)
flags.DEFINE_integer("batch_size", None, "Global batch of sentences at "
                     "--seq_length (default: 32 per replica).", lower_bound=1)
command.require("layer", lambda layer: layer != 0, "blocks count from 1 "
                "(-1: the last); give 1..depth or -1")
flags.DEFINE_string("label_folder", None, "Gold labels in the scorer's layout "
                    "(<task>/test-<lang>.tsv) to score the predictions with.")
flags.DEFINE_bool("jit_compile", False, "Compile the embedding step with XLA "
                  "(always on a TPU).")
flags.DEFINE_bool("overwrite", False, "Replace an earlier run's predictions, "
                  "labels and results in --output_dir, as one set.")

PROG = command_names.console_script(__spec__.name)  # rembert-retrieve


def _bitext_source():
  """The source of --data_source; one-line errors for a root that is missing
  or belongs to the other source."""
  from rembert_tf.data import tfds_reader  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import bitext  # pylint: disable=g-import-not-at-top
  if FLAGS.data_source == "tfds":
    if FLAGS.data_dir:
      raise errors.UsageError(
          "--data_dir is XTREME's download/ folder, read with --data_source "
          "download; with --data_source tfds give --tfds_data_dir alone.")
    return bitext.TfdsSource(
        tfds_reader.data_dir_or_default(FLAGS.tfds_data_dir))
  if FLAGS.tfds_data_dir:
    raise errors.UsageError(
        "--tfds_data_dir is read with --data_source tfds; add --data_source "
        "tfds (and drop --data_dir), or drop --tfds_data_dir.")
  if not FLAGS.data_dir:
    raise errors.UsageError("Give --data_dir (the XTREME download/ folder), "
                            "or --data_source tfds.")
  return bitext.DownloadSource(FLAGS.data_dir)


def _plan(source, tasks, languages):
  """{task: [languages]}: every language of the source, or those of
  --languages the task has (a task with none is left out); every split is
  checked before any work."""
  from rembert_tf.evaluation import xtreme_tasks  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import bitext  # pylint: disable=g-import-not-at-top
  plan = {}
  for task in tasks:
    if task not in bitext.TASKS:
      raise errors.UsageError(f"--tasks {task}: retrieval tasks are "
                              f"{', '.join(bitext.TASKS)}.")
    found = source.discover_languages(task)
    if not languages and not found:
      raise errors.UsageError(source.nothing_found(task))
    known = set(found) | set(xtreme_tasks.get(task).languages)
    chosen = [l for l in languages if l in known] if languages else found
    if chosen:
      plan[task] = chosen
  unused = set(languages or ()) - {l for ls in plan.values() for l in ls}
  if unused:
    raise errors.UsageError(
        f"--languages {','.join(sorted(unused))}: not a language of "
        f"{', '.join(tasks)} (benchmark or {source.data_dir}).")
  for task, chosen in plan.items():
    source.check(task, chosen)
  return plan


@errors.command(PROG)
def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments {argv[1:]}; see --help.")
  from rembert_tf.retrieval import retrieval_runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import sentence_embedder  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import process_settings  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import strategies  # pylint: disable=g-import-not-at-top
  output_overlap.refuse_overlap(FLAGS.output_dir, {
      f"--{name}": FLAGS[name].value for name in (
          "checkpoint", "sentencepiece_model", "data_dir", "tfds_data_dir",
          "label_folder")}, "--output_dir")
  source = _bitext_source()
  plan = _plan(source, FLAGS.tasks, FLAGS.languages)
  if FLAGS.strategy == "multi_worker_mirrored":
    raise errors.UsageError("--strategy multi_worker_mirrored: retrieval runs "
                            "on one host; use tpu, mirrored or one_device.")
  with outputs.taking_output(FLAGS.output_dir), \
       process_settings.training_settings(FLAGS.mixed_precision):
    output_sets.refuse_existing_members(
        FLAGS.output_dir, retrieval_runner.OUTPUT_SET, FLAGS.overwrite)
    strategy = strategies.make_strategy(FLAGS.strategy, FLAGS.tpu)
    embedder = sentence_embedder.SentenceEmbedder(
        FLAGS.checkpoint, strategy, layer=FLAGS.layer,
        model_config=FLAGS.model_config, sp_model=FLAGS.sentencepiece_model,
        seq_length=FLAGS.seq_length, batch_size=FLAGS.batch_size,
        jit_compile=FLAGS.jit_compile)
    print(f"{PROG}: layer {embedder.layer} of {embedder.num_layers}, "
          f"{strategy.num_replicas_in_sync} replica(s); "
          + "; ".join(f"{t}: {','.join(l)}" for t, l in plan.items()),
          flush=True)
    results = retrieval_runner.run_retrieval(
        plan, source, embedder, strategy, FLAGS.output_dir,
        label_folder=FLAGS.label_folder, overwrite=FLAGS.overwrite,
        progress=lambda line: print(line, flush=True))
  print(retrieval_runner.markdown(results))
  print(f"Wrote {FLAGS.output_dir}/predictions and "
        f"{FLAGS.output_dir}/{retrieval_runner.RESULTS_JSON}")


def run():
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              required=["checkpoint", "output_dir"],
              rename_flags=deprecated_flags.renamer(__spec__.name))


if __name__ == "__main__":
  run()

r"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba.

Embeds both sides of each language pair with the encoder (mean-pooled hidden
states of one layer, --layer, default a middle layer as XTREME does: block
8 of 12, 14 of 24, `depth // 2 + 2` in general), then:
* tatoeba: each English sentence's nearest sentence by cosine;
* bucc2018: ratio-margin mining over 4 neighbours both ways, the threshold
  chosen on BUCC's sample set (download/bucc2018/<lang>-en.dev.*) and applied
  to its test set.
Writes OUTPUT_DIR/predictions/<task>/test-<lang>.tsv (XTREME's submission
layout), OUTPUT_DIR/labels/ where the gold is known, and
OUTPUT_DIR/results.{json,md} with BUCC's thresholds and the test scores where
there are labels (BUCC's test gold when kept in the download folder;
--label_folder for any task, e.g. Tatoeba's labels).

The encoder comes from a pre-training model_dir, a converted checkpoint
directory, an encoder checkpoint prefix, an exported SavedModel, or a
fine-tuning run kept with --keep_checkpoints (give --model_config). Batches
run under --strategy (tpu: on a Cloud TPU; one host).

Example:
```bash
python tools/retrieve.py --checkpoint runs/pretrain --data_dir download \
  --output_dir runs/retrieve --tasks tatoeba,bucc2018 --languages de,fr
python tools/evaluate_xtreme.py --prediction_folder runs/retrieve/predictions \
  --label_folder runs/retrieve/labels
```
"""
from absl import flags

from rembert_tf.common import console  # noqa: E402
console.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.cli import harness  # noqa: E402
from rembert_tf.cli import runtime_flags  # noqa: F401,E402  (--strategy, --tpu, ...)
from rembert_tf.common import errors  # noqa: E402
from rembert_tf.common import fileio  # noqa: E402
from rembert_tf.common import outputs  # noqa: E402

FLAGS = flags.FLAGS
for _runtime_flag in ("strategy", "tpu", "mixed_precision"):   # under --help
  flags.declare_key_flag(_runtime_flag)
flags.DEFINE_string("checkpoint", None, "Encoder: pre-training model_dir, "
                    "converted checkpoint dir, encoder ckpt prefix, exported "
                    "SavedModel dir, or fine-tuning run (with --model_config).")
flags.DEFINE_string("model_config", None, "Model config name / YAML, when the "
                    "checkpoint does not carry model_config.yaml.")
flags.DEFINE_string("sp_model", None, "SentencePiece model (default: the "
                    "checkpoint's sentencepiece.model).")
flags.DEFINE_string("data_dir", None, "The XTREME download/ folder "
                    "(bucc2018/, tatoeba/).")
flags.DEFINE_list("tasks", ["bucc2018", "tatoeba"], "Retrieval tasks.")
flags.DEFINE_list("languages", None, "Languages (default: every language of "
                  "each task found in --data_dir).")
flags.DEFINE_string("output_dir", None, "Predictions, labels, results.")
flags.DEFINE_integer("layer", None, "Encoder block whose hidden states are "
                     "pooled, 1..depth or -1 for the last (default: "
                     "depth // 2 + 2, at most the depth).")
flags.DEFINE_integer("seq_length", None, "Pieces per sentence with [CLS] and "
                     "[SEP] (default: 128, at most max_position_embeddings).")
flags.DEFINE_integer("batch_size", None, "Global batch of sentences at "
                     "--seq_length, shorter buckets proportionally more "
                     "(default: 32 per replica).")
flags.DEFINE_string("label_folder", None, "Gold labels in the scorer's layout "
                    "(<task>/test-<lang>.tsv) to score the predictions with.")
flags.DEFINE_bool("jit_compile", False, "Compile the embedding step with XLA "
                  "(always on a TPU).")
flags.DEFINE_bool("overwrite", False, "Replace existing predictions of a task.")

PROG = "rembert-retrieve"


def _plan(data_dir, tasks, languages):
  """{task: [languages]}, every needed file checked before any work.

  With --languages, a task takes those of them it has (in the benchmark or
  in the data dir); a language of the benchmark without its files is an
  error naming the file.
  """
  from rembert_tf.evaluation import xtreme_benchmark  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import bitext  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import download_layout  # pylint: disable=g-import-not-at-top
  plan, unused = {}, set(languages or ())
  for task in tasks:
    if task not in bitext.TASKS:
      raise errors.UsageError(f"--tasks {task}: retrieval tasks are "
                              f"{', '.join(bitext.TASKS)}.")
    found = download_layout.discover_languages(data_dir, task)
    known = set(found) | set(xtreme_benchmark.TASK_LANGUAGES[task])
    chosen = [l for l in languages if l in known] if languages else found
    unused -= set(chosen)
    if not chosen:
      raise errors.UsageError(
          f"No {task} files in {data_dir} (expected "
          f"{download_layout.path(data_dir, task, 'test', 'target', '<lang>')}"
          "); run XTREME's download script, or check --data_dir, --tasks "
          "and --languages.")
    download_layout.check_files(data_dir, task, chosen)
    plan[task] = chosen
  if unused:
    raise errors.UsageError(
        f"--languages {','.join(sorted(unused))}: not a language of "
        f"{', '.join(tasks)} (benchmark or {data_dir}).")
  return plan


def make_strategy(name: str, tpu=None):
  """The runtime's strategy of --strategy, on one host."""
  from rembert_tf.runtime import strategies  # pylint: disable=g-import-not-at-top
  if name == "multi_worker_mirrored":
    raise errors.UsageError("--strategy multi_worker_mirrored: retrieval runs "
                            "on one host; use tpu, mirrored or one_device.")
  return strategies.make_strategy(name, tpu)


@errors.command(PROG)
def main(argv):
  if len(argv) > 1:
    raise errors.UsageError(f"unexpected arguments {argv[1:]}; see --help.")
  for name in ("checkpoint", "data_dir", "output_dir"):
    if not FLAGS[name].value:
      raise errors.UsageError(f"--{name} is required.")
  from rembert_tf.retrieval import download_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import retrieval_runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import sentence_embedder  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import process_settings  # pylint: disable=g-import-not-at-top
  plan = _plan(FLAGS.data_dir, FLAGS.tasks, FLAGS.languages)
  with outputs.writing_output(FLAGS.output_dir), \
       process_settings.training_settings(FLAGS.mixed_precision):
    retrieval_runner.check_outputs(FLAGS.output_dir, plan, FLAGS.overwrite)
    strategy = make_strategy(FLAGS.strategy, FLAGS.tpu)
    embedder = sentence_embedder.SentenceEmbedder.from_checkpoint(
        FLAGS.checkpoint, strategy, layer=FLAGS.layer,
        model_config=FLAGS.model_config, sp_model=FLAGS.sp_model,
        seq_length=FLAGS.seq_length, batch_size=FLAGS.batch_size,
        jit_compile=FLAGS.jit_compile)
    print(f"{PROG}: layer {embedder.layer} of {embedder.num_layers}, "
          f"{strategy.num_replicas_in_sync} replica(s); "
          + "; ".join(f"{t}: {','.join(l)}" for t, l in plan.items()),
          flush=True)
    results = retrieval_runner.run_retrieval(
        plan, download_layout.DownloadSource(FLAGS.data_dir), embedder,
        strategy, FLAGS.output_dir, label_folder=FLAGS.label_folder,
        overwrite=FLAGS.overwrite,
        progress=lambda line: print(line, flush=True))
  print(retrieval_runner.markdown(results))
  print(f"Wrote {FLAGS.output_dir}/predictions and "
        f"{FLAGS.output_dir}/{retrieval_runner.RESULTS_JSON}")


def run():
  harness.run_command(main, __doc__, program=PROG, output_dir_flag="output_dir")


if __name__ == "__main__":
  run()

r"""Embedding speed of retrieval beside the fine-tuning prediction path and SavedModel serving.

Every row encodes the same sentences per timed step: `--examples` token
sequences (default 256) with lengths uniform in [seq/2, seq] (25% padding, as
bench/inference.py) or, `--lengths short`, in [8, 40] pieces (sentences as
BUCC and Tatoeba have them, which fine-tuning and serving pad to the
sequence length), at the reference config of bench/sidebyside.py (4
layers; `--num_hidden_layers` for a deeper model), from one random-init
encoder written as a checkpoint directory:

* `retrieval`: `SentenceEmbedder.embed_tokenized` as `rembert-retrieve` runs
  it (its default layer, `depth // 2 + 2`: all 4 blocks at the reference
  depth, 8 of 12; length buckets; its default batch, 32 sentences at full
  length; mean pooling and normalisation on the device; the vectors back on
  the host), under a OneDeviceStrategy, without XLA (the command's default)
  and with it;
* `finetune_predict`: the fine-tuning prediction step (`finetuning.
  predictions.Predictor`'s step: `strategy.run(FinetuningTask.predict_step)`
  in a tf.function) of the classification model `FinetuningTask.build_model()` builds
  (its last block computes [CLS] only), batches of the fine-tuning default
  eval batch size (32), the logits back on the host, with XLA (fine-tuning's
  default, `--jit_compile`) and without;
* `finetune_tagging`: the same for the tagging model (every position through
  every block, as retrieval needs them);
* `savedmodel_serving`: the exported encoder's `serving_default` signature
  (what bench/inference.py times), batches of 32, `pooled_output` back on the
  host.

Rows run in their own processes in interleaved rounds; the median step is
reported (bench/sidebyside.py), with each row's examples/s over the
fine-tuning path's (`vs finetune`) and over SavedModel serving (`vs serving`).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/retrieval.py --json_out retrieval.json
.venv/bin/python bench/retrieval.py --num_hidden_layers 12 --rounds 3
```
"""
import json
import os
import sys
import tempfile

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("examples", 256, "Sentences encoded per timed step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length (pieces).")
flags.DEFINE_enum("lengths", "padded", ["padded", "short"], "Sentence lengths: "
                  "padded: uniform in [seq/2, seq] as bench/inference.py; "
                  "short: uniform in [8, 40] pieces, sentence-sized as BUCC "
                  "and Tatoeba (fine-tuning and serving still pad to seq).")
flags.DEFINE_integer("batch_size", None, "Retrieval's --batch_size (default: "
                     "its own, 32 per replica).")
flags.DEFINE_integer("eval_batch_size", 32, "Batch of the fine-tuning "
                     "prediction step and of SavedModel serving.")
flags.DEFINE_integer("num_hidden_layers", None, "Depth (default: the "
                     "reference config's).")
flags.DEFINE_list("rows", ["retrieval", "finetune_predict", "finetune_tagging",
                           "savedmodel_serving"], "Contenders.")
flags.DEFINE_integer("steps", 3, "Timed steps per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 2, "Untimed steps (compilation) first.")
flags.DEFINE_string("row_log_dir", "/tmp/rembert_bench_logs",
                    "Each row's process log goes here.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the row a worker process runs.")

# Rows per contender: (impl, XLA setting); the first is each one's default.
ROWS = dict(retrieval=(("retrieval", "off"), ("retrieval", "on")),
            finetune_predict=(("finetune_predict", "on"),
                              ("finetune_predict", "off")),
            finetune_tagging=(("finetune_tagging", "on"),
                              ("finetune_tagging", "off")),
            savedmodel_serving=(("savedmodel_serving", "off"),))
# The fine-tuning task type of each fine-tuning contender.
TASK_TYPES = dict(finetune_predict="classification", finetune_tagging="tagging")


# === Worker side: one row ===
def model_config(spec):
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  return rembert_config.model_config_from_dict(spec["model"])


def write_checkpoint(spec, directory):
  """A random-init encoder as a checkpoint directory, with a small vocabulary."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_writing  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_encoder  # pylint: disable=g-import-not-at-top
  cfg = model_config(spec)
  corpus = os.path.join(directory, "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    f.write("".join(f"sentence number {i} of the benchmark\n"
                    for i in range(200)))
  spm.SentencePieceTrainer.train(
      input=corpus, model_prefix=os.path.join(directory, "sp"), vocab_size=40, hard_vocab_limit=False,
      pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
      control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2)
  checkpoint_dir = os.path.join(directory, "checkpoint")
  checkpoint_writing.write_checkpoint_dir(
      checkpoint_dir, cfg, rembert_encoder.build_encoder(cfg))
  tokenizer.copy_sentencepiece(
      os.path.join(directory, "sp.model"),
      os.path.join(checkpoint_dir, checkpoint_layout.SENTENCEPIECE_FILE))
  return checkpoint_dir


def token_lists(spec):
  """The step's sentences: `[CLS] ids [SEP]` of the chosen lengths."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  ids, _, _, lengths, _ = sidebyside.padded_inputs(
      dict(spec, batch_size=spec["examples"]))
  if spec["lengths"] == "short":
    lengths = np.random.default_rng(1).integers(8, 41, len(lengths))
  return [[2] + list(row[1:n - 1]) + [3] for row, n in zip(ids, lengths)]


def padded_batches(spec):
  """The same sentences as [eval_batch, seq] int32 batches (no type ids)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  seq, size = spec["seq_length"], spec["eval_batch_size"]
  rows = token_lists(spec)
  ids = np.zeros([len(rows), seq], np.int32)
  for i, row in enumerate(rows):
    ids[i, :len(row)] = row
  mask = (ids != 0).astype(np.int32)
  return [dict(input_word_ids=ids[s:s + size], input_mask=mask[s:s + size],
               input_type_ids=np.zeros_like(ids[s:s + size]),
               feature_index=np.arange(s, s + size, dtype=np.int32)[:, None])
          for s in range(0, len(rows), size)]


def build_retrieval(spec, directory):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import sentence_embedder  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  embedder = sentence_embedder.SentenceEmbedder(
      write_checkpoint(spec, directory), strategy,
      seq_length=spec["seq_length"], batch_size=spec["retrieval_batch_size"],
      jit_compile=spec["xla"] == "on")
  sentences = token_lists(spec)
  return lambda: embedder.embed_tokenized(sentences), dict(layer=embedder.layer)


def build_finetune_predict(spec, directory):
  """The fine-tuning prediction step on the classification or tagging model."""
  del directory
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_task  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    task = finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
        model=model_config(spec), task_type=TASK_TYPES[spec["impl"]],
        num_labels=3,
        jit_compile=spec["xla"] == "on"))
    model = task.build_model()

  @tf.function
  def step(inputs):   # as finetuning.predictions.Predictor's step
    return strategy.run(task.predict_step, args=(inputs, model))
  batches = [{k: tf.constant(v) for k, v in b.items()}
             for b in padded_batches(spec)]
  return lambda: [step(b)["logits"].numpy() for b in batches], {}


def build_savedmodel_serving(spec, directory):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import encoder_export  # pylint: disable=g-import-not-at-top
  saved = os.path.join(directory, "savedmodel")
  encoder_export.export_encoder(write_checkpoint(spec, directory), saved, verify=False)
  serve = tf.saved_model.load(saved).signatures["serving_default"]
  batches = [{k: tf.constant(v) for k, v in b.items() if k != "feature_index"}
             for b in padded_batches(spec)]
  return lambda: [serve(**b)["pooled_output"].numpy() for b in batches], {}


def run_worker(spec):
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  builders = dict(retrieval=build_retrieval,
                  finetune_predict=build_finetune_predict,
                  finetune_tagging=build_finetune_predict,
                  savedmodel_serving=build_savedmodel_serving)
  step, info = builders[spec["impl"]](spec, tempfile.mkdtemp(
      prefix="rembert_retrieval_bench_"))
  sidebyside.serve(step, info=info, warmup_steps=spec["warmup_steps"])


# === Coordinator side ===
def row_specs():
  model = dict(sidebyside.REFERENCE_MODEL)
  if FLAGS.num_hidden_layers:
    model["num_hidden_layers"] = FLAGS.num_hidden_layers
  # sidebyside's batch_size: the examples of one timed step (examples/s).
  return [dict(task="embed", impl=impl, precision="float32", xla=xla,
               model=model, batch_size=FLAGS.examples, examples=FLAGS.examples,
               seq_length=FLAGS.seq_length, lengths=FLAGS.lengths,
               retrieval_batch_size=FLAGS.batch_size,
               eval_batch_size=FLAGS.eval_batch_size,
               warmup_steps=FLAGS.warmup_steps)
          for name in FLAGS.rows for impl, xla in ROWS[name]]


def add_ratios(rows):
  def speed(impl, xla):
    return next((r["examples_per_second"] for r in rows if r["impl"] == impl
                 and r["xla"] == xla and r["examples_per_second"]), None)
  finetune, serving = speed(*ROWS["finetune_predict"][0]), speed(
      *ROWS["savedmodel_serving"][0])
  for row in rows:
    mine = row["examples_per_second"]
    row["vs_finetune"] = mine / finetune if mine and finetune else None
    row["vs_serving"] = mine / serving if mine and serving else None


def markdown_table(rows) -> str:
  lines = ["| contender | XLA | step ms | examples/s | vs finetune | vs serving |",
           "| --- | --- | --- | --- | --- | --- |"]
  for r in rows:
    if r.get("error") or not r["examples_per_second"]:
      lines.append(f"| {r['impl']} | {r['xla']} | failed | {r.get('error')} | | |")
      continue
    ratio = lambda v: f"{v:.2f}x" if v else ""
    lines.append(f"| {r['impl']} | {r['xla']} | {1000 * r['step_seconds']:.1f} "
                 f"| {r['examples_per_second']:.1f} | {ratio(r['vs_finetune'])} "
                 f"| {ratio(r['vs_serving'])} |")
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  os.makedirs(FLAGS.row_log_dir, exist_ok=True)
  specs = row_specs()
  lengths = (f"{FLAGS.seq_length // 2}..{FLAGS.seq_length}"
             if FLAGS.lengths == "padded" else "8..40")
  print(f"config: {json.dumps(specs[0]['model'])}; {FLAGS.examples} sentences "
        f"per step, lengths {lengths} pieces, sequence {FLAGS.seq_length}; median "
        f"of {FLAGS.rounds} interleaved rounds x {FLAGS.steps} steps after "
        f"{FLAGS.warmup_steps} warm-up steps, one process per row; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at "
        "start", flush=True)
  pythons = {name: sys.executable for name in ROWS}
  workers = sidebyside.run_side_by_side(
      specs, lambda spec: sidebyside.Worker.for_script(
          __file__, spec, pythons, FLAGS.row_log_dir),
      FLAGS.rounds, FLAGS.steps)
  rows = sidebyside.rows_from_workers(workers)
  add_ratios(rows)
  print(f"load average at end {os.getloadavg()[0]:.1f}\n")
  print(markdown_table(rows))
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(rows=rows, flags=dict(
          examples=FLAGS.examples, seq_length=FLAGS.seq_length,
          lengths=FLAGS.lengths,
          batch_size=FLAGS.batch_size, eval_batch_size=FLAGS.eval_batch_size,
          num_hidden_layers=specs[0]["model"]["num_hidden_layers"],
          rounds=FLAGS.rounds, steps=FLAGS.steps)), f, indent=1)


if __name__ == "__main__":
  bench_command.run(main)

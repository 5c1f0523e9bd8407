r"""Pre-training data speed: record creation vs Model Garden, input pipeline vs the tiny step.

1. Generates a demo corpus of >= 20 MB (`rembert_tf.demo.corpus`), trains
   (or reuses) a SentencePiece model of the tiny config's vocabulary size.
2. Times `tools/create_pretraining_data.py` (subprocess, wall clock, startup
   included) and Model Garden's `official/nlp/data/create_pretraining_data.py`
   (SentencePiece mode) on the same corpus, model and settings (seq 128, 20
   predictions, masked_lm_prob 0.15, dupe_factor 1, short_seq_prob 0.1; ours with
   --alpha 1 so both use every document exactly once). Prints tokens/s for both
   (tokens = the corpus's SentencePiece tokens, counted once) and the ratio.
3. Times the input pipeline (`RemBertPretrainDataLoader`, static and dynamic
   masking) in examples/s, and one tiny-config pre-training step (pretrainer
   forward + backward + Adam, XLA) in examples/s, and prints the ratio.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/pretraining_data.py
.venv/bin/python bench/pretraining_data.py --megabytes 5 --skip_model_garden  # quick
```
"""
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags

import bench_command  # pylint: disable=g-import-not-at-top

REPO = pathlib.Path(__file__).resolve().parents[1]

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/rembert_bench_pretraining_data",
                    "Corpus, model and records go here (reused when present).")
flags.DEFINE_float("megabytes", 21.0, "Demo corpus size.")
flags.DEFINE_integer("num_workers", 2, "Workers of our record creation.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Predictions per sequence.")
flags.DEFINE_integer("batch_size", 32, "Pipeline / training batch size.")
flags.DEFINE_integer("pipeline_batches", 600, "Timed pipeline batches.")
flags.DEFINE_integer("train_steps", 20, "Timed tiny training steps.")
flags.DEFINE_bool("skip_model_garden", False, "Do not run Model Garden's tool.")
flags.DEFINE_string("json_out", "", "Also write the figures as JSON here.")


def _run(cmd, log_path):
  start = time.time()
  with open(log_path, "w") as log:
    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                          cwd=str(REPO), env=dict(os.environ), check=False)
  elapsed = time.time() - start
  if proc.returncode != 0:
    raise RuntimeError(f"{cmd[:3]} failed (rc {proc.returncode}); see {log_path}")
  return elapsed


def prepare(work: pathlib.Path):
  from rembert_tf.demo import corpus as demo_corpus  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  corpus = work / "corpus"
  if not (corpus / "done").exists():
    shutil.rmtree(corpus, ignore_errors=True)
    stats = demo_corpus.generate_corpus(corpus, target_megabytes=FLAGS.megabytes,
                                        files_per_language=4, seed=0)
    (corpus / "done").write_text(json.dumps(stats))
  size = sum(os.path.getsize(p) for p in glob.glob(str(corpus / "*" / "*.txt")))
  print(f"corpus: {corpus} ({size / 1e6:.1f} MB, "
        f"{len(glob.glob(str(corpus / '*' / '*.txt')))} files)", flush=True)
  vocab_size = rembert_config.load_model_config("tiny").vocab_size
  model = work / "spm" / "sentencepiece.model"
  if not model.exists():
    start = time.time()
    sentencepiece_training.train_sentencepiece(
        [str(corpus / "{lang}" / "*.txt")], work / "spm", vocab_size,
        sample_size=300_000, verbose=False)
    print(f"sentencepiece: trained vocab {vocab_size} in "
          f"{time.time() - start:.1f}s", flush=True)
  return corpus, model, size


def bench_record_creation(work, corpus, model):
  out = work / "records_ours"
  cmd = [sys.executable, "tools/create_pretraining_data.py",
         f"--input={corpus}/{{lang}}/*.txt", f"--output_dir={out}",
         f"--sentencepiece_model={model}", f"--seq_length={FLAGS.seq_length}",
         f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
         "--dupe_factor=1", "--short_seq_prob=0.1", "--masked_lm_prob=0.15",
         "--alpha=1.0", "--num_output_shards=8",
         f"--num_workers={FLAGS.num_workers}", "--overwrite"]
  ours_s = _run(cmd, work / "ours.log")
  meta = json.loads((out / "metadata.json").read_text())
  tokens = sum(l["tokens"] for l in meta["languages"].values())
  return out, tokens, ours_s, meta["num_examples"]


def bench_model_garden(work, corpus, model):
  out = work / "records_model_garden"
  out.mkdir(parents=True, exist_ok=True)
  files = sorted(glob.glob(str(corpus / "*" / "*.txt")))
  cmd = [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
         f"--input_file={','.join(files)}",
         f"--output_file={out / 'mg.tfrecord'}",
         "--tokenization=SentencePiece", f"--sp_model_file={model}",
         "--do_lower_case=False", f"--max_seq_length={FLAGS.seq_length}",
         f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
         "--dupe_factor=1", "--short_seq_prob=0.1", "--masked_lm_prob=0.15",
         "--use_v2_feature_names=True", "--random_seed=12345"]
  return _run(cmd, work / "model_garden.log")


def bench_pipeline(records, use_dynamic_masking):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import pretraining_input_pipeline  # pylint: disable=g-import-not-at-top
  params = pretraining_input_pipeline.RemBertPretrainDataConfig(
      input_path=str(records / "*.tfrecord"),
      global_batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq, is_training=True,
      use_dynamic_masking=use_dynamic_masking)
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(params).load()
  iterator = iter(dataset)
  for _ in range(50):
    batch = next(iterator)
  start = time.time()
  for _ in range(FLAGS.pipeline_batches):
    batch = next(iterator)
  tf.nest.map_structure(lambda t: t.numpy(), batch)
  return FLAGS.pipeline_batches * FLAGS.batch_size / (time.time() - start)


def bench_tiny_step():
  """Examples/s of a tiny-config step: pretrainer fwd + bwd + Adam, XLA."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config, rembert_pretrainer  # pylint: disable=g-import-not-at-top
  cfg = rembert_config.load_model_config("tiny")
  model = rembert_pretrainer.build_pretrainer(cfg)
  optimizer = tf_keras.optimizers.Adam(1e-4)
  b, s, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions_per_seq
  rng = tf.random.Generator.from_seed(0)
  batch = dict(
      input_word_ids=rng.uniform([b, s], 5, cfg.vocab_size, tf.int32),
      input_mask=tf.ones([b, s], tf.int32),
      input_type_ids=tf.zeros([b, s], tf.int32),
      masked_lm_positions=rng.uniform([b, p], 1, s - 1, tf.int32),
      masked_lm_ids=rng.uniform([b, p], 5, cfg.vocab_size, tf.int32),
      masked_lm_weights=tf.ones([b, p], tf.float32))

  # The pooler gets no gradient from the MLM loss.
  variables = [v for v in model.trainable_variables if "pooler" not in v.name]

  @tf.function(jit_compile=True)
  def step(x):
    with tf.GradientTape() as tape:
      logits = model(x, training=True)["mlm_logits"]
      loss = tf_keras.losses.sparse_categorical_crossentropy(
          x["masked_lm_ids"], logits, from_logits=True)
      loss = tf.reduce_sum(loss * x["masked_lm_weights"]) / tf.reduce_sum(
          x["masked_lm_weights"])
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss
  for _ in range(5):
    step(batch).numpy()
  start = time.time()
  for _ in range(FLAGS.train_steps):
    loss = step(batch)
  loss.numpy()
  return FLAGS.train_steps * b / (time.time() - start)


def main(argv):
  del argv
  work = pathlib.Path(FLAGS.work_dir)
  work.mkdir(parents=True, exist_ok=True)
  corpus, model, size = prepare(work)
  figures = {"corpus_megabytes": round(size / 1e6, 2),
             "num_workers": FLAGS.num_workers}

  records, tokens, ours_s, examples = bench_record_creation(work, corpus, model)
  figures.update(tokens=tokens, ours_seconds=round(ours_s, 2),
                 ours_examples=examples,
                 ours_tokens_per_second=round(tokens / ours_s))
  print(f"create_pretraining_data (rembert_tf, {FLAGS.num_workers} workers): "
        f"{tokens:,} tokens, {examples:,} sequences in {ours_s:.1f}s -> "
        f"{tokens / ours_s:,.0f} tokens/s", flush=True)
  if not FLAGS.skip_model_garden:
    mg_s = bench_model_garden(work, corpus, model)
    figures.update(model_garden_seconds=round(mg_s, 2),
                   model_garden_tokens_per_second=round(tokens / mg_s),
                   record_creation_speedup=round(mg_s / ours_s, 2))
    print(f"create_pretraining_data (Model Garden, SentencePiece mode): "
          f"{mg_s:.1f}s -> {tokens / mg_s:,.0f} tokens/s", flush=True)
    print(f"record creation speedup: {mg_s / ours_s:.2f}x (target >= 5x)",
          flush=True)

  static_eps = bench_pipeline(records, use_dynamic_masking=False)
  print(f"input pipeline (static masks, batch {FLAGS.batch_size}, seq "
        f"{FLAGS.seq_length}): {static_eps:,.0f} examples/s", flush=True)
  from rembert_tf.data import pretraining_record_creation  # pylint: disable=g-import-not-at-top
  unmasked = work / "records_unmasked"
  pretraining_record_creation.create_pretraining_data(
      [f"{corpus}/{{lang}}/*.txt"], unmasked, model, seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq, unmasked=True,
      languages=["el", "hi"], num_output_shards=4, overwrite=True,
      verbose=False)
  dynamic_eps = bench_pipeline(unmasked, use_dynamic_masking=True)
  print(f"input pipeline (dynamic masking): {dynamic_eps:,.0f} examples/s",
        flush=True)
  step_eps = bench_tiny_step()
  print(f"tiny pre-training step (batch {FLAGS.batch_size}, seq "
        f"{FLAGS.seq_length}, XLA): {step_eps:,.0f} examples/s", flush=True)
  print(f"pipeline / step: static {static_eps / step_eps:.1f}x, dynamic "
        f"{dynamic_eps / step_eps:.1f}x (target >= 20x)", flush=True)
  figures.update(pipeline_static_examples_per_second=round(static_eps),
                 pipeline_dynamic_examples_per_second=round(dynamic_eps),
                 tiny_step_examples_per_second=round(step_eps),
                 pipeline_over_step_static=round(static_eps / step_eps, 1),
                 pipeline_over_step_dynamic=round(dynamic_eps / step_eps, 1))
  print(json.dumps(figures))
  if FLAGS.json_out:
    pathlib.Path(FLAGS.json_out).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
  bench_command.run(main)

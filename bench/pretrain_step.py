r"""Steady-state pre-training step speed: rembert_tf vs Hugging Face TF, side by side.

Times the real training step of `rembert_tf.pretraining` (the Task's
`train_step`: XLA-compiled forward + backward, global-norm clipping, AdamW
with weight-decay exclusions) on a fixed synthetic batch, after compilation,
for float32 and mixed_bfloat16, with and without XLA. Prints examples per
second, model FLOPs per step (3 x forward matmul FLOPs, the MFU convention)
and model FLOP utilisation against the matmul peak measured in the same run.

Peers: Hugging Face `TFRemBertForMaskedLM` (transformers 4.x, TF) at the same
config. transformers is never a rembert_tf dependency: install it into a
side venv with `bash bench/setup_peers.sh`; this script then re-runs itself
in that venv (which sees the project's packages) and skips the peer with a
printed reason when absent. All rows are built and compiled first, then
timed in interleaved rounds (median step time), so load from other
processes hits every row alike.

Reference config: 4 layers, hidden 256, 4 heads, FFN 1024,
vocab 32000, E_in 128, E_out 512, sequence 128, batch 32, 20 predictions.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/pretrain_step.py            # everything
.venv/bin/python bench/pretrain_step.py --precisions float32 --xla on --steps 5
.venv/bin/python bench/pretrain_step.py --model_config tiny --peers ""    # our model only
```
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("model_config", "",
                    "Model preset / YAML; empty = the reference config.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("num_predictions", 20, "Masked predictions per sequence.")
flags.DEFINE_integer("steps", 3, "Timed steps per configuration and round.")
flags.DEFINE_integer("rounds", 3, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps (compilation) first.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Precisions.")
flags.DEFINE_list("xla", ["on", "off"], "XLA settings for rembert_tf.")
flags.DEFINE_list("peers", ["hf_tf"], "Peers to run side by side (hf_tf).")
flags.DEFINE_list("peer_xla", ["off"], "XLA settings for the HF TF peer.")
flags.DEFINE_string("peer_python", "",
                    "Python with transformers (default: .venv/bench-peers).")
flags.DEFINE_string("only", "", "Internal: set when re-run in the peers venv.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")

REFERENCE = sidebyside.REFERENCE_MODEL


def model_flops_per_example(m, seq, preds, full_sequence_head=False):
  """Forward matmul FLOPs of one example (2 per multiply-add)."""
  h, f, e_in, e_out, v = (m["hidden_size"], m["intermediate_size"],
                          m["input_embedding_size"], m["output_embedding_size"],
                          m["vocab_size"])
  layers = m["num_hidden_layers"] + m.get("num_output_layers", 0)
  flops = 2 * seq * e_in * h if e_in != h else 0           # projection
  per_layer = (4 * 2 * seq * h * h                          # q, k, v, out
               + 2 * 2 * seq * seq * h                      # scores, context
               + 2 * 2 * seq * h * f)                       # FFN
  flops += layers * per_layer + 2 * h * h                   # + pooler
  rows = seq if full_sequence_head else preds
  flops += rows * (2 * h * e_out + 2 * e_out * v)           # MLM head
  return flops


def measure_matmul_peak(dtype, n=2048, reps=6):
  """Best FLOP/s of a square matmul chain on this machine, with and without
  XLA (XLA:CPU runs bf16 dots through f32; TF's oneDNN kernels use the CPU's
  bf16 instructions), so the peak is the best this TF can do in `dtype`."""
  a = tf.random.normal([n, n], dtype=tf.float32)
  b = tf.random.normal([n, n], dtype=tf.float32)
  a, b = tf.cast(a, dtype), tf.cast(b, dtype)

  def chain(x, y):
    z = x
    for _ in range(4):
      z = tf.matmul(z, y) * tf.constant(1e-3, dtype)
    return tf.reduce_sum(tf.cast(z, tf.float32))

  best = float("inf")
  for jit in (True, False):
    fn = tf.function(chain, jit_compile=jit)
    fn(a, b).numpy()
    for _ in range(reps):
      start = time.perf_counter()
      fn(a, b).numpy()
      best = min(best, time.perf_counter() - start)
  return 4 * 2 * n ** 3 / best


def build_rembert(model_values, precision, xla):
  """(step function, batch, FLOPs per step) of rembert_tf's real train step."""
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  tf_keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if precision == "mixed_bfloat16" else "float32")
  try:
    config = experiments.load_experiment_config([], {
        "task": {"model": model_values, "jit_compile": xla == "on",
                 "train_data": {"input_path": "synthetic",
                                "global_batch_size": FLAGS.batch_size,
                                "seq_length": FLAGS.seq_length,
                                "max_predictions_per_seq": FLAGS.num_predictions}}})
    config.trainer.optimizer_config.warmup.linear.warmup_steps = 10
    task = task_factory.get_task(config.task)
    model = task.build_model()
    optimizer = task.create_optimizer(config.trainer.optimizer_config)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  batch = {k: tf.constant(v) for k, v in sidebyside.masked_lm_batch(
      model_values["vocab_size"], FLAGS.batch_size, FLAGS.seq_length,
      FLAGS.num_predictions).items()}
  step = tf.function(lambda b: task.train_step(b, model, optimizer)["loss"])
  flops = 3 * FLAGS.batch_size * model_flops_per_example(
      model_values, FLAGS.seq_length, FLAGS.num_predictions)
  return step, batch, flops


def build_hf_tf(model_values, precision, xla):
  """Hugging Face TFRemBertForMaskedLM; labels -100 except masked positions."""
  import transformers  # pylint: disable=g-import-not-at-top
  tf_keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if precision == "mixed_bfloat16" else "float32")
  try:
    hf_config = transformers.RemBertConfig(
        vocab_size=model_values["vocab_size"],
        hidden_size=model_values["hidden_size"],
        num_hidden_layers=model_values["num_hidden_layers"],
        num_attention_heads=model_values["num_attention_heads"],
        intermediate_size=model_values["intermediate_size"],
        input_embedding_size=model_values["input_embedding_size"],
        output_embedding_size=model_values["output_embedding_size"],
        hidden_act="gelu", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=model_values["max_position_embeddings"])
    model = transformers.TFRemBertForMaskedLM(hf_config)
    raw = sidebyside.masked_lm_batch(model_values["vocab_size"], FLAGS.batch_size,
                          FLAGS.seq_length, FLAGS.num_predictions)
    labels = np.full(raw["input_word_ids"].shape, -100, np.int32)
    np.put_along_axis(labels, raw["masked_lm_positions"], raw["masked_lm_ids"],
                      axis=1)
    batch = dict(input_ids=tf.constant(raw["input_word_ids"]),
                 attention_mask=tf.constant(raw["input_mask"]),
                 token_type_ids=tf.constant(raw["input_type_ids"]),
                 labels=tf.constant(labels))
    model(batch)
    optimizer = tf_keras.optimizers.Adam(1e-4)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")

  def train_step(b):
    with tf.GradientTape() as tape:
      out = model(b, training=True)
      loss = tf.reduce_mean(tf.cast(out.loss, tf.float32))
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  step = tf.function(train_step, jit_compile=(xla == "on"))
  flops = 3 * FLAGS.batch_size * model_flops_per_example(
      model_values, FLAGS.seq_length, FLAGS.num_predictions,
      full_sequence_head=True)
  return step, batch, flops


def model_values_from_flags():
  if not FLAGS.model_config:
    values = dict(REFERENCE)
  else:
    from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
    values = rembert_config.load_model_config(FLAGS.model_config).as_dict()
  values["max_position_embeddings"] = max(values["max_position_embeddings"],
                                          FLAGS.seq_length)
  return values


def main(argv):
  if FLAGS.peers:
    try:
      # transformers 5 imports but has no TF models: ask for the peer's class.
      from transformers import TFRemBertForMaskedLM  # noqa: F401 pylint: disable=g-import-not-at-top,unused-import
    except ImportError:
      python = sidebyside.peers_python(FLAGS.peer_python)
      if python and not FLAGS.only:
        # Re-run this whole bench in the peers' venv: every row in one process,
        # timed in interleaved rounds.
        print(f"re-running under {python} (has transformers)", flush=True)
        os.execv(python, [python, os.path.abspath(__file__), "--only=all"]
                 + sys.argv[1:])
      print("skipping peers: transformers with TF models (4.x) is not here "
            "and there is no peers venv; run `bash bench/setup_peers.sh`",
            flush=True)
      FLAGS.peers = []
  model_values = model_values_from_flags()
  print(f"config: {json.dumps(model_values)}")
  print(f"batch {FLAGS.batch_size}, sequence {FLAGS.seq_length}, "
        f"{FLAGS.num_predictions} predictions; median of {FLAGS.rounds} "
        f"interleaved rounds x {FLAGS.steps} steps after {FLAGS.warmup_steps} "
        f"warm-up steps; TF {tf.__version__}, {os.cpu_count()} CPUs", flush=True)
  peaks = {}
  for precision in FLAGS.precisions:
    dtype = tf.bfloat16 if precision == "mixed_bfloat16" else tf.float32
    peaks[precision] = measure_matmul_peak(dtype)
    print(f"measured matmul peak ({dtype.name}): "
          f"{peaks[precision] / 1e9:.1f} GFLOP/s", flush=True)

  variants = []
  for precision in FLAGS.precisions:
    for xla in FLAGS.xla:
      variants.append(("rembert_tf", precision, xla,
                       build_rembert(model_values, precision, xla)))
    for peer in FLAGS.peers:
      assert peer == "hf_tf", peer
      for xla in FLAGS.peer_xla:
        try:
          variants.append(("hf_tf TFRemBertForMaskedLM", precision, xla,
                           build_hf_tf(model_values, precision, xla)))
        except Exception as e:  # pylint: disable=broad-except
          print(f"  skipped peer {peer} ({precision}, xla={xla}): {e}")
  times = {i: [] for i in range(len(variants))}
  for i, (impl, precision, xla, (step, batch, _)) in enumerate(variants):
    start = time.perf_counter()
    for _ in range(FLAGS.warmup_steps):
      float(step(batch))
    print(f"  compiled + warmed up {impl} {precision} xla={xla} in "
          f"{time.perf_counter() - start:.0f}s", flush=True)
  for r in range(FLAGS.rounds):
    for i, (impl, precision, xla, (step, batch, _)) in enumerate(variants):
      for _ in range(FLAGS.steps):
        start = time.perf_counter()
        float(step(batch))
        times[i].append(time.perf_counter() - start)
    print(f"  round {r + 1}/{FLAGS.rounds} done", flush=True)

  rows = []
  for i, (impl, precision, xla, (_, _, flops)) in enumerate(variants):
    seconds = float(np.median(times[i]))
    rows.append(dict(impl=impl, precision=precision, xla=xla,
                     step_seconds=seconds, flops_per_step=flops,
                     examples_per_second=FLAGS.batch_size / seconds))
  hf_fp32 = next((r["examples_per_second"] for r in rows
                  if r["impl"].startswith("hf_tf") and r["precision"] == "float32"
                  and r["xla"] == "off"), None)
  print()
  print("| implementation | precision | XLA | examples/s | model GFLOP/step | "
        "GFLOP/s | MFU | vs HF TF fp32 |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- |")
  for r in rows:
    achieved = r["flops_per_step"] / r["step_seconds"]
    r["mfu"] = achieved / peaks[r["precision"]]
    r["speedup_vs_hf_tf_fp32"] = (r["examples_per_second"] / hf_fp32
                                  if hf_fp32 else None)
    speedup = f"{r['speedup_vs_hf_tf_fp32']:.2f}x" if hf_fp32 else "n/a"
    print(f"| {r['impl']} | {r['precision']} | {r['xla']} | "
          f"{r['examples_per_second']:.1f} | {r['flops_per_step'] / 1e9:.1f} | "
          f"{achieved / 1e9:.1f} | {100 * r['mfu']:.1f}% | {speedup} |")
  print("\nMFU = model FLOPs per step / median step time / measured matmul peak "
        "of the precision. HF TF's FLOPs count its MLM head on every position "
        "(it computes logits for the whole sequence); rembert_tf computes "
        "them at the masked positions only.")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(peaks=peaks, rows=rows), f, indent=1)


if __name__ == "__main__":
  bench_command.run(main)

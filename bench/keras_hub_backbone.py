r"""The keras-hub RemBERT backbone on JAX and TensorFlow vs this project's encoder.

Two tasks on the reference config of every bench (bench/sidebyside.py:
4 layers, hidden 256, E_in 128, vocab 32000), batch 32, sequence 128, the
padded synthetic sentence pairs of the other benches (lengths uniform in
[seq/2, seq]):

* `inference`: the encoder's forward pass, pooled output fetched to the host.
  rembert_tf: `RemBertEncoder` (tf-keras) in a `tf.function`, without XLA on
  the real tokens only (`remove_padding`, its CPU serving path) or with
  `jit_compile=True`; keras-hub: `RemBertBackbone.predict_on_batch`.
* `train`: one optimizer step of sentence-pair classification (3 classes,
  dropout 0.1, Adam 1e-4, no clipping) from the pooled output. rembert_tf:
  the encoder as fine-tuning builds it for classification (`output_range=1`,
  `remove_padding` without XLA) under a `tf.function` with a GradientTape;
  keras-hub: `RemBertTextClassifier.train_on_batch`.

| row                | implementation          | backend                 | XLA |
| ------------------ | ----------------------- | ----------------------- | --- |
| rembert_tf         | RemBertEncoder          | TensorFlow (tf-keras)   | off |
| rembert_tf_xla     | RemBertEncoder          | TensorFlow (tf-keras)   | on  |
| keras_hub_jax      | RemBertBackbone         | JAX (jit)               | on  |
| keras_hub_tf_xla   | RemBertBackbone         | TensorFlow (Keras 3)    | on  |
| keras_hub_tf       | RemBertBackbone         | TensorFlow (Keras 3)    | off |

Every row runs in its own process; rows are timed in interleaved rounds and
the median step is reported (bench/sidebyside.py), with tokens/s (batch x
sequence, padding included), the model's TFLOP/s (6 x matmul parameters +
attention per token for a training step, a third of it for inference) and,
where the accelerator's peak is known (`--peak_tflops`, or the GPU / TPU
model), the model FLOPs utilisation (MFU). `vs rembert_tf` is the row's
tokens/s over the rembert_tf row (XLA off) of the same task and precision.

`--jax_accelerator` times the keras-hub backbone on JAX's default device
alone (a GPU or TPU when there is one), float32 and bfloat16 compute
(`mixed_bfloat16`), for tokens/s and MFU; `--jax_platform cpu` runs that path
on the CPU. `--model released` gives the released RemBERT's size
(configs/models/rembert.yaml) for accelerators.

Example:
```bash
.venv/bin/python bench/keras_hub_backbone.py --json_out keras_hub.json
.venv/bin/python bench/keras_hub_backbone.py --rows rembert_tf,keras_hub_jax \
    --tasks train --rounds 3
# GPU: the released size, bfloat16, MFU against the GPU's bfloat16 peak.
.venv/bin/python bench/keras_hub_backbone.py --jax_accelerator --model released \
    --seq_length 512 --batch_size 32 --json_out gpu.json
# the same path on the CPU (no GPU needed), peak given by hand:
.venv/bin/python bench/keras_hub_backbone.py --jax_accelerator --jax_platform cpu \
    --peak_tflops 1.0 --rounds 2 --steps 2
```
"""
import json
import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position

ROWS = {
    "rembert_tf": dict(impl="rembert_tf", backend="tensorflow", xla="off"),
    "rembert_tf_xla": dict(impl="rembert_tf", backend="tensorflow", xla="on"),
    "keras_hub_jax": dict(impl="keras_hub", backend="jax", xla="on"),
    "keras_hub_tf_xla": dict(impl="keras_hub", backend="tensorflow", xla="on"),
    "keras_hub_tf": dict(impl="keras_hub", backend="tensorflow", xla="off"),
}
# Dense bfloat16 peak FLOP/s by device name (first match wins).
PEAK_BF16_FLOPS = (("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12),
                   ("A100", 312e12), ("L4", 121e12), ("TPU v4", 275e12),
                   ("TPU v5 lite", 197e12), ("TPU v5", 459e12))

FLAGS = flags.FLAGS
flags.DEFINE_list("tasks", ["inference", "train"], "Tasks to time.")
flags.DEFINE_list("rows", list(ROWS), f"Rows to time: {', '.join(ROWS)}.")
flags.DEFINE_list("precisions", ["float32"],
                  "Precisions (float32, mixed_bfloat16).")
flags.DEFINE_enum("model", "reference", ["reference", "released"],
                  "reference: bench/sidebyside.py's config; released: "
                  "configs/models/rembert.yaml.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_float("dropout", 0.1, "Dropout of the training step.")
flags.DEFINE_bool("jax_accelerator", False, "Time keras_hub_jax alone on "
                  "JAX's default device, float32 and mixed_bfloat16, with MFU.")
flags.DEFINE_string("jax_platform", "", "Force JAX's platform (cpu, gpu, tpu).")
flags.DEFINE_float("peak_tflops", 0.0, "Peak bfloat16 TFLOP/s of the device "
                   "for MFU (default: looked up from the device name).")
flags.DEFINE_integer("steps", 3, "Timed steps per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps (compilation) first.")
flags.DEFINE_string("row_log_dir", "/tmp/rembert_bench_logs",
                    "Each row's process log goes here.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the row a worker process runs.")


# === Worker side: one row ===
def synthetic_batch(spec):
  """Padded int32 ids, mask, segment ids and labels (every row the same)."""
  ids, mask, types, _, rng = sidebyside.padded_inputs(spec)
  labels = rng.integers(0, 3, spec["batch_size"]).astype("int32")
  return ids, mask, types, labels


def build_rembert_tf(spec):
  """The project's encoder (tf-keras), as fine-tuning and serving build it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_encoder  # pylint: disable=g-import-not-at-top
  tf_keras.mixed_precision.set_global_policy(spec["precision"])
  train, xla = spec["task"] == "train", spec["xla"] == "on"
  dropout = spec["dropout"] if train else 0.0
  cfg = rembert_config.model_config_from_dict(dict(
      spec["model"], hidden_dropout_prob=dropout,
      attention_probs_dropout_prob=dropout))
  encoder = rembert_encoder.build_encoder(
      cfg, output_range=1 if train else None, remove_padding=not xla)
  ids, mask, types, labels = (tf.constant(a) for a in synthetic_batch(spec))
  inputs = dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  if not train:
    forward = tf.function(
        lambda: encoder(inputs, training=False)["pooled_output"],
        jit_compile=xla)
    return lambda: forward().numpy()
  head = tf_keras.Sequential([tf_keras.layers.Dropout(dropout),
                              tf_keras.layers.Dense(3)])
  head.build([None, cfg.hidden_size])
  optimizer = tf_keras.optimizers.Adam(1e-4)
  cross_entropy = tf_keras.losses.SparseCategoricalCrossentropy(
      from_logits=True)
  variables = encoder.trainable_variables + head.trainable_variables

  @tf.function(jit_compile=xla)
  def step():
    with tf.GradientTape() as tape:
      logits = head(encoder(inputs, training=True)["pooled_output"],
                    training=True)
      loss = cross_entropy(labels, tf.cast(logits, tf.float32))
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(
        [(tf.convert_to_tensor(g), v) for g, v in zip(grads, variables)])
    return loss
  return lambda: float(step())


def build_keras_hub(spec):
  """RemBertBackbone / RemBertTextClassifier on this process's backend."""
  import keras  # pylint: disable=g-import-not-at-top
  from rembert_tf import keras_hub as rk  # pylint: disable=g-import-not-at-top
  from rembert_tf.keras_hub import rembert_backbone  # pylint: disable=g-import-not-at-top
  keras.config.set_dtype_policy(spec["precision"])
  keras.utils.set_random_seed(0)
  train, xla = spec["task"] == "train", spec["xla"] == "on"
  kwargs = rembert_backbone.backbone_kwargs(spec["model"])
  kwargs["dropout"] = spec["dropout"] if train else 0.0
  backbone = rk.RemBertBackbone(**kwargs)
  ids, mask, types, labels = synthetic_batch(spec)
  inputs = dict(token_ids=ids, padding_mask=mask, segment_ids=types)
  if not train:
    pooled = keras.Model(backbone.input, backbone.output["pooled_output"])
    pooled.compile(jit_compile=xla)
    return lambda: pooled.predict_on_batch(inputs)
  classifier = rk.RemBertTextClassifier(backbone, num_classes=3,
                                        dropout=spec["dropout"])
  classifier.compile(
      optimizer=keras.optimizers.Adam(1e-4),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=[], jit_compile=xla)
  return lambda: float(classifier.train_on_batch(inputs, labels))


def device_name(spec) -> str:
  if spec["impl"] != "keras_hub" or spec["backend"] != "jax":
    return "cpu"
  import jax  # pylint: disable=g-import-not-at-top
  return jax.devices()[0].device_kind


def run_worker(spec):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if spec["impl"] == "rembert_tf":
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
  builder = build_rembert_tf if spec["impl"] == "rembert_tf" else build_keras_hub
  step = builder(spec)
  sidebyside.serve(step, info=dict(device=device_name(spec)),
                   warmup_steps=spec["warmup_steps"])


# === Coordinator side ===
def model_config():
  if FLAGS.model == "reference":
    return dict(sidebyside.REFERENCE_MODEL)
  import yaml  # pylint: disable=g-import-not-at-top
  with open(os.path.join(sidebyside.REPO, "configs", "models", "rembert.yaml"),
            encoding="utf-8") as f:
    return yaml.safe_load(f)


def flops_per_token(model, seq_length, task) -> float:
  """Model FLOPs per token: 2 per matmul parameter and the attention's
  2 x 2 x seq x hidden per layer, forward; a training step is 3 forwards."""
  hidden, layers = model["hidden_size"], model["num_hidden_layers"]
  matmul = layers * (4 * hidden * hidden + 2 * hidden * model["intermediate_size"])
  if model["input_embedding_size"] != hidden:
    matmul += model["input_embedding_size"] * hidden
  forward = 2 * matmul + 4 * layers * seq_length * hidden
  return 3 * forward if task == "train" else forward


def peak_flops(device: str) -> float:
  if FLAGS.peak_tflops:
    return FLAGS.peak_tflops * 1e12
  return next((peak for name, peak in PEAK_BF16_FLOPS if name in device), 0.0)


def row_specs(task, model):
  names = ["keras_hub_jax"] if FLAGS.jax_accelerator else FLAGS.rows
  precisions = (["float32", "mixed_bfloat16"] if FLAGS.jax_accelerator
                else FLAGS.precisions)
  specs = []
  for precision in precisions:
    for name in names:
      spec = dict(ROWS[name], name=name, task=task, precision=precision,
                  model=model, batch_size=FLAGS.batch_size,
                  seq_length=FLAGS.seq_length, dropout=FLAGS.dropout,
                  warmup_steps=FLAGS.warmup_steps)
      env = dict(KERAS_BACKEND=spec["backend"]) if (
          spec["impl"] == "keras_hub") else {}
      if FLAGS.jax_platform and spec["backend"] == "jax":
        env["JAX_PLATFORMS"] = FLAGS.jax_platform
      spec["env"] = env
      specs.append(spec)
  return specs


def add_figures(rows, model):
  for row in rows:
    seconds = row["step_seconds"]
    row["tokens_per_second"] = (row["batch_size"] * row["seq_length"] / seconds
                                if seconds else None)
    row["model_tflops"] = (row["tokens_per_second"] * flops_per_token(
        model, row["seq_length"], row["task"]) / 1e12
                           if seconds else None)
    # The known peaks are bfloat16's: float32 rows get an MFU only against
    # a peak given by hand.
    peak = peak_flops(row.get("device", "cpu"))
    bfloat16 = row["precision"] != "float32"
    row["mfu"] = (row["model_tflops"] * 1e12 / peak
                  if seconds and peak and (bfloat16 or FLAGS.peak_tflops)
                  else None)
    base = next((r["tokens_per_second"] for r in rows
                 if r["name"] == "rembert_tf" and r["task"] == row["task"]
                 and r["precision"] == row["precision"]
                 and r.get("tokens_per_second")), None)
    row["vs_rembert_tf"] = (row["tokens_per_second"] / base
                            if base and row["tokens_per_second"] else None)


def markdown_table(rows) -> str:
  header = ["task", "row", "backend", "precision", "XLA", "device", "step ms",
            "tokens/s", "model TFLOP/s", "MFU", "vs rembert_tf"]
  lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
  for r in rows:
    if r.get("error") or not r["step_seconds"]:
      cells = [r["task"], r["name"], r["backend"], r["precision"], r["xla"],
               "", "failed", str(r.get("error")), "", "", ""]
    else:
      cells = [r["task"], r["name"], r["backend"], r["precision"], r["xla"],
               r.get("device", ""), f"{1000 * r['step_seconds']:.1f}",
               f"{r['tokens_per_second']:.0f}", f"{r['model_tflops']:.3f}",
               f"{100 * r['mfu']:.1f}%" if r["mfu"] else "-",
               f"{r['vs_rembert_tf']:.2f}x" if r["vs_rembert_tf"] else "-"]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  sidebyside.check_choices("rows", FLAGS.rows, ROWS)
  model = model_config()
  pythons = dict(rembert_tf=sys.executable, keras_hub=sys.executable)
  os.makedirs(FLAGS.row_log_dir, exist_ok=True)
  print(f"config: {json.dumps(model)}; batch {FLAGS.batch_size}, sequence "
        f"{FLAGS.seq_length}; median of {FLAGS.rounds} interleaved rounds x "
        f"{FLAGS.steps} steps after {FLAGS.warmup_steps} warm-up steps, one "
        f"process per row; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} at start", flush=True)
  rows = []
  for task in FLAGS.tasks:
    print(f"{task}:", flush=True)
    workers = sidebyside.run_side_by_side(
        row_specs(task, model),
        lambda spec: sidebyside.Worker(
            f"{spec['task']} {spec['name']} {spec['precision']}",
            [pythons[spec["impl"]], os.path.abspath(__file__),
             "--worker=" + json.dumps(spec)],
            os.path.join(FLAGS.row_log_dir,
                         f"keras_hub_{spec['task']}_{spec['name']}_"
                         f"{spec['precision']}.log"), spec, env=spec["env"]),
        FLAGS.rounds, FLAGS.steps)
    for row, worker in zip(sidebyside.rows_from_workers(workers), workers):
      row.update(name=worker.spec["name"], backend=worker.spec["backend"])
      rows.append(row)
  add_figures(rows, model)
  print(f"load average at end {os.getloadavg()[0]:.1f}\n")
  print(markdown_table(rows))
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(rows=rows, model=model, flags=dict(
          rounds=FLAGS.rounds, steps=FLAGS.steps, dropout=FLAGS.dropout,
          jax_accelerator=FLAGS.jax_accelerator)), f, indent=1)


if __name__ == "__main__":
  bench_command.run(main)

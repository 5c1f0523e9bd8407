r"""Pre-training step speed: RemBertMaskedLM (Keras 3) on JAX vs the TensorFlow path.

One optimizer step of decoupled masked-LM pre-training on a fixed synthetic
batch of the reference config of every bench (bench/sidebyside.py: 4
layers, hidden 256, E_in 128, E_out 512, vocab 32000), batch 32, sequence
128, 20 predictions (the last two of each row weighted 0, as padding
predictions are in the records), dropout 0, float32:

| row              | what a step is                                              | backend              | XLA |
| ---------------- | ----------------------------------------------------------- | -------------------- | --- |
| rembert_tf_xla   | `rembert-train`'s step: the Task's `train_step` (AdamW, weight-decay exclusions, global-norm clipping 1.0) | TensorFlow (tf-keras) | on  |
| rembert_tf       | the same, `task.jit_compile: false`                         | TensorFlow (tf-keras) | off |
| keras_hub_jax    | `masked_lm_pretraining`'s compiled `fit` step: `train_on_batch` (AdamW 0.01, global clipnorm 1.0) | JAX (jit) | on |
| keras_hub_tf_xla | the same on Keras 3's TensorFlow backend                    | TensorFlow (Keras 3) | on  |

Every row runs in its own process, built, compiled and warmed up one at a
time, then timed in interleaved rounds (bench/sidebyside.py); the median
step gives examples/s, and `vs rembert_tf_xla` is a row's examples/s over
the TensorFlow path's (XLA on, its default). The input pipeline is not
timed (both paths prefetch).

Example:
```bash
.venv/bin/python bench/keras_hub_pretrain_step.py --json_out pretrain_jax.json
.venv/bin/python bench/keras_hub_pretrain_step.py --rows rembert_tf_xla,keras_hub_jax \
    --rounds 3 --steps 3
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
    "rembert_tf_xla": dict(impl="rembert_tf", backend="tensorflow", xla="on"),
    "rembert_tf": dict(impl="rembert_tf", backend="tensorflow", xla="off"),
    "keras_hub_jax": dict(impl="keras_hub", backend="jax", xla="on"),
    "keras_hub_tf_xla": dict(impl="keras_hub", backend="tensorflow", xla="on"),
}
BASELINE = "rembert_tf_xla"

FLAGS = flags.FLAGS
flags.DEFINE_list("rows", ["rembert_tf_xla", "keras_hub_jax"],
                  f"Rows to time: {', '.join(ROWS)}.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked predictions per sequence.")
flags.DEFINE_integer("steps", 3, "Timed steps per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps (compilation) first.")
flags.DEFINE_string("row_log_dir", "/tmp/rembert_bench_logs",
                    "Each row's process log goes here.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the row a worker process runs.")


# === Worker side: one row ===
def synthetic_batch(spec):
  """The reference batch; the last two predictions of every row are padding."""
  return sidebyside.masked_lm_batch(spec["model"]["vocab_size"],
                                    spec["batch_size"], spec["seq_length"],
                                    spec["preds"], padding_predictions=2)


def build_rembert_tf(spec):
  """The pre-training Task's own train_step, as `rembert-train` runs it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  config = experiments.load_experiment_config([], {
      "task": {"model": spec["model"], "jit_compile": spec["xla"] == "on",
               "train_data": {"input_path": "synthetic",
                              "global_batch_size": spec["batch_size"],
                              "seq_length": spec["seq_length"],
                              "max_predictions_per_seq": spec["preds"]}}})
  task = task_factory.get_task(config.task)
  model = task.build_model()
  optimizer = task.create_optimizer(config.trainer.optimizer_config)
  batch = {k: tf.constant(v) for k, v in synthetic_batch(spec).items()}
  step = tf.function(lambda: task.train_step(batch, model, optimizer)["loss"])
  return lambda: float(step())


def build_keras_hub(spec):
  """RemBertMaskedLM compiled by `masked_lm_pretraining`, one fit step."""
  import keras  # pylint: disable=g-import-not-at-top
  from rembert_tf import keras_hub as rk  # pylint: disable=g-import-not-at-top
  from rembert_tf.keras_hub import masked_lm_pretraining  # pylint: disable=g-import-not-at-top
  from rembert_tf.keras_hub import rembert_backbone  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  masked_lm_pretraining.set_data_parallel()
  backbone = rk.RemBertBackbone(**rembert_backbone.backbone_kwargs(
      spec["model"]))
  masked_lm = masked_lm_pretraining.build_masked_lm(
      backbone, spec["model"]["output_embedding_size"])
  masked_lm_pretraining.compile_for_pretraining(
      masked_lm, keras.optimizers.AdamW(1e-4, weight_decay=0.01,
                                        global_clipnorm=1.0),
      jit_compile=spec["xla"] == "on")
  raw = synthetic_batch(spec)
  x = dict(token_ids=raw["input_word_ids"], padding_mask=raw["input_mask"],
           segment_ids=raw["input_type_ids"],
           mask_positions=raw["masked_lm_positions"])
  return lambda: float(masked_lm.train_on_batch(
      x, raw["masked_lm_ids"], sample_weight=raw["masked_lm_weights"],
      return_dict=True)["loss"])


def run_worker(spec):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if spec["impl"] == "rembert_tf":
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
  builder = build_rembert_tf if spec["impl"] == "rembert_tf" else build_keras_hub
  sidebyside.serve(builder(spec), warmup_steps=spec["warmup_steps"])


# === Coordinator side ===
def row_specs(model):
  specs = []
  for name in FLAGS.rows:
    spec = dict(ROWS[name], name=name, task="pretrain", precision="float32",
                model=model, batch_size=FLAGS.batch_size,
                seq_length=FLAGS.seq_length, preds=FLAGS.num_predictions,
                warmup_steps=FLAGS.warmup_steps)
    spec["env"] = (dict(KERAS_BACKEND=spec["backend"])
                   if spec["impl"] == "keras_hub" else {})
    specs.append(spec)
  return specs


def markdown_table(rows) -> str:
  base = next((r["examples_per_second"] for r in rows
               if r["name"] == BASELINE and r["examples_per_second"]), None)
  lines = ["| row | backend | XLA | step ms | examples/s | vs rembert_tf_xla |",
           "| --- | --- | --- | --- | --- | --- |"]
  for r in rows:
    if not r["examples_per_second"]:
      lines.append(f"| {r['name']} | {r['backend']} | {r['xla']} | failed | "
                   f"{r.get('error')} | |")
      continue
    r["vs_" + BASELINE] = r["examples_per_second"] / base if base else None
    ratio = f"{r['vs_' + BASELINE]:.2f}x" if base else "-"
    lines.append(f"| {r['name']} | {r['backend']} | {r['xla']} | "
                 f"{1000 * r['step_seconds']:.1f} | "
                 f"{r['examples_per_second']:.1f} | {ratio} |")
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  sidebyside.check_choices("rows", FLAGS.rows, ROWS)
  model = dict(sidebyside.REFERENCE_MODEL)
  model["max_position_embeddings"] = max(model["max_position_embeddings"],
                                         FLAGS.seq_length)
  os.makedirs(FLAGS.row_log_dir, exist_ok=True)
  print(f"config: {json.dumps(model)}; batch {FLAGS.batch_size}, sequence "
        f"{FLAGS.seq_length}, {FLAGS.num_predictions} predictions; median of "
        f"{FLAGS.rounds} interleaved rounds x {FLAGS.steps} steps after "
        f"{FLAGS.warmup_steps} warm-up steps, one process per row; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at "
        "start", flush=True)
  workers = sidebyside.run_side_by_side(
      row_specs(model),
      lambda spec: sidebyside.Worker(
          spec["name"], [sys.executable, os.path.abspath(__file__),
                         "--worker=" + json.dumps(spec)],
          os.path.join(FLAGS.row_log_dir, f"pretrain_{spec['name']}.log"),
          spec, env=spec["env"]),
      FLAGS.rounds, FLAGS.steps)
  rows = []
  for row, worker in zip(sidebyside.rows_from_workers(workers), workers):
    row.update(name=worker.spec["name"], backend=worker.spec["backend"])
    rows.append(row)
  print(f"load average at end {os.getloadavg()[0]:.1f}\n")
  print(markdown_table(rows))
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(rows=rows, model=model, flags=dict(
          rounds=FLAGS.rounds, steps=FLAGS.steps,
          num_predictions=FLAGS.num_predictions)), f, indent=1)


if __name__ == "__main__":
  bench_command.run(main)

r"""Steady-state fine-tuning step speed: rembert_tf vs Hugging Face TF and PyTorch.

Times one optimizer step (forward, backward, global-norm clipping, AdamW with
weight-decay exclusions) of the two fine-tuning heads RemBERT's benchmark tasks
use, on a fixed synthetic batch after compilation and warm-up:

* `classification`: sentence-pair classification (3 classes), sequence 128,
  batch 32. rembert_tf: the fine-tuning model `FinetuningTask.build_model()`
  builds for the classification type (Model Garden's `models.BertClassifier`
  over `RemBertEncoder`); peers: `TFRemBertForSequenceClassification` and
  `RemBertForSequenceClassification`.
* `span_qa`: extractive QA (start/end logits), sequence 384, batch 16.
  rembert_tf: the span type's model (`models.BertSpanLabeler`); peers: `TFRemBertForQuestionAnswering`
  and `RemBertForQuestionAnswering`.

The rembert_tf model is the one fine-tuning trains (`FinetuningTask.build_model`
for the task type and XLA setting): for classification the last block runs
at [CLS] only (the encoder's `output_range`), and without XLA the row-wise
work runs on the real tokens only (`remove_padding`). The synthetic batches
have lengths uniform in [seq/2, seq] (25% padding) for every contender.

rembert_tf and Hugging Face TF use the same step function: one `tf.function`
with Model Garden's AdamW (`adamw`, weight decay 0.01 except LayerNorm and
biases, epsilon 1e-6, global-norm clipping at 1.0, linear warm-up then
polynomial decay) on dense gradients (as rembert_tf's pre-training does); PyTorch uses `torch.optim.AdamW` with the same
exclusions and `clip_grad_norm_(1.0)`. rembert_tf rows run without XLA
(`--xla off`, the CPU-fast path) and with `jit_compile=True` (`--xla on`, the
TPU path, shown to compile and run); peers run eagerly as their users run
them (HF TF inside a `tf.function`). `mixed_bfloat16` rows use Keras' mixed
policy (float32 variables, bfloat16 compute) and `torch.autocast` bfloat16.

Every row runs in its own process; rows are timed in interleaved rounds
(bench/sidebyside.py) and the median step is reported. The peers live in a
side venv (`bash bench/setup_peers.sh`); rows whose framework is missing are
skipped with the reason.

Reference config: 4 layers, hidden 256, 4 heads, FFN 1024, vocab 32000,
E_in 128, dropout 0.1 (as in fine-tuning; `--dropout 0` for none).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/finetune_step.py --json_out ft.json
.venv/bin/python bench/finetune_step.py --tasks classification \
    --precisions float32 --xla off --peers hf_tf --rounds 3
```
"""
import json
import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_list("tasks", ["classification", "span_qa"], "Tasks to time.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Precisions.")
flags.DEFINE_list("xla", ["off", "on"], "XLA settings of the rembert_tf rows.")
flags.DEFINE_list("peers", ["hf_tf", "torch"], "Peers (hf_tf, torch).")
flags.DEFINE_float("dropout", 0.1, "Hidden and attention dropout of every model.")
flags.DEFINE_integer("steps", 3, "Timed steps per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed steps (compilation) first.")
flags.DEFINE_string("peer_python", "",
                    "Python with transformers and torch (default: "
                    ".venv/bench-peers/bin/python).")
flags.DEFINE_string("row_log_dir", "/tmp/rembert_bench_logs",
                    "Each row's process log goes here.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the row a worker process runs.")

TASKS = dict(classification=dict(batch_size=32, seq_length=128, num_classes=3),
             span_qa=dict(batch_size=16, seq_length=384))
NO_DECAY = ["LayerNorm", "layer_norm", "bias"]
# The fine-tuning task type (rembert_tf.finetuning.task_types) of each task.
TASK_TYPES = dict(classification="classification", span_qa="span")


# === Worker side: one row ===
def synthetic_batch(spec):
  """Padded sentence pairs and labels, the same for every implementation."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  task = TASKS[spec["task"]]
  batch = spec["batch_size"]
  ids, mask, types, lengths, rng = sidebyside.padded_inputs(spec)
  out = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
  if spec["task"] == "classification":
    out["labels"] = rng.integers(0, task["num_classes"], batch).astype(np.int32)
  else:
    start = rng.integers(1, lengths // 2)
    out["start_positions"] = start.astype(np.int32)
    out["end_positions"] = np.minimum(start + rng.integers(0, 8, batch),
                                      lengths - 1).astype(np.int32)
  return out


def model_garden_adamw():
  """The fine-tuning optimizer: Model Garden's AdamW with warm-up and decay."""
  from official.modeling import optimization  # pylint: disable=g-import-not-at-top
  config = optimization.OptimizationConfig({
      "optimizer": {"type": "adamw", "adamw": {
          "weight_decay_rate": 0.01, "epsilon": 1e-6,
          "exclude_from_weight_decay": NO_DECAY}},
      "learning_rate": {"type": "polynomial", "polynomial": {
          "initial_learning_rate": 2e-5, "decay_steps": 100000,
          "end_learning_rate": 0.0}},
      "warmup": {"type": "linear", "linear": {"warmup_steps": 1000}}})
  factory = optimization.OptimizerFactory(config)
  return factory.build_optimizer(factory.build_learning_rate())


def keras_train_step(model, loss_fn, jit_compile):
  """One tf.function: loss, gradients, AdamW update. Returns step()."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  optimizer = model_garden_adamw()

  @tf.function(jit_compile=jit_compile)
  def train_step(batch):
    with tf.GradientTape() as tape:
      loss = tf.cast(loss_fn(batch), tf.float32)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    # Dense embedding gradients, as rembert_tf's pre-training step does: one
    # fused Adam update instead of the sparse path's dense decays + scatters.
    pairs = [(tf.convert_to_tensor(g), v) for g, v in zip(grads, variables)
             if g is not None]
    optimizer.apply_gradients(pairs)
    return loss

  return train_step


def build_rembert(spec):
  """The product's fine-tuning model: `FinetuningTask.build_model()` (Model
  Garden's BertClassifier / BertSpanLabeler over RemBertEncoder, built as
  fine-tuning builds it for that task type and XLA setting)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_task  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  values = dict(spec["model"], hidden_dropout_prob=spec["dropout"],
                attention_probs_dropout_prob=spec["dropout"])
  cfg = rembert_config.model_config_from_dict(values)
  task = finetuning_task.FinetuningTask(finetuning_task.FinetuningTaskConfig(
      model=cfg, task_type=TASK_TYPES[spec["task"]],
      num_labels=TASKS[spec["task"]].get("num_classes", 1),
      jit_compile=spec["xla"] == "on"))
  model = task.build_model()
  raw = synthetic_batch(spec)
  batch = {k: tf.constant(v) for k, v in raw.items()}
  features = dict(input_word_ids=batch["input_ids"],
                  input_mask=batch["attention_mask"],
                  input_type_ids=batch["token_type_ids"])
  cross_entropy = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  if spec["task"] == "classification":

    def loss_fn(b):
      logits = tf.cast(model(features, training=True), tf.float32)
      return cross_entropy(b["labels"], logits)
  else:

    def loss_fn(b):
      outputs = model(features, training=True)
      if isinstance(outputs, dict):
        outputs = outputs["start_logits"], outputs["end_logits"]
      start, end = (tf.cast(t, tf.float32) for t in outputs)
      return (cross_entropy(b["start_positions"], start)
              + cross_entropy(b["end_positions"], end)) / 2
  step = keras_train_step(model, loss_fn, spec["xla"] == "on")
  return lambda: float(step(batch)), model.count_params()


def hf_config(spec, transformers):
  m = spec["model"]
  return transformers.RemBertConfig(
      vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
      num_hidden_layers=m["num_hidden_layers"],
      num_attention_heads=m["num_attention_heads"],
      intermediate_size=m["intermediate_size"],
      input_embedding_size=m["input_embedding_size"],
      output_embedding_size=m["output_embedding_size"],
      hidden_act=m["hidden_act"], hidden_dropout_prob=spec["dropout"],
      attention_probs_dropout_prob=spec["dropout"],
      classifier_dropout_prob=spec["dropout"],
      max_position_embeddings=m["max_position_embeddings"],
      type_vocab_size=m["type_vocab_size"], layer_norm_eps=m["layer_norm_eps"],
      # Span QA heads have 2 outputs (start, end), classifiers one per class.
      num_labels=(TASKS["classification"]["num_classes"]
                  if spec["task"] == "classification" else 2))


def build_hf_tf(spec):
  """TFRemBertForSequenceClassification / TFRemBertForQuestionAnswering."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  config = hf_config(spec, transformers)
  if spec["task"] == "classification":
    model = transformers.TFRemBertForSequenceClassification(config)
  else:
    model = transformers.TFRemBertForQuestionAnswering(config)
  batch = {k: tf.constant(v) for k, v in synthetic_batch(spec).items()}
  model(batch)

  def loss_fn(b):
    return tf.reduce_mean(tf.cast(model(b, training=True).loss, tf.float32))
  step = keras_train_step(model, loss_fn, jit_compile=False)
  return lambda: float(step(batch)), model.count_params()


def build_torch(spec):
  """RemBertForSequenceClassification / RemBertForQuestionAnswering, eager."""
  import contextlib  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  config = hf_config(spec, transformers)
  if spec["task"] == "classification":
    model = transformers.RemBertForSequenceClassification(config)
  else:
    model = transformers.RemBertForQuestionAnswering(config)
  model.train()
  batch = {k: torch.tensor(v, dtype=torch.long)
           for k, v in synthetic_batch(spec).items()}
  batch["attention_mask"] = batch["attention_mask"].to(torch.float32)
  decay = [p for n, p in model.named_parameters()
           if not any(x in n for x in ("LayerNorm", "bias"))]
  no_decay = [p for n, p in model.named_parameters()
              if any(x in n for x in ("LayerNorm", "bias"))]
  optimizer = torch.optim.AdamW(
      [dict(params=decay, weight_decay=0.01),
       dict(params=no_decay, weight_decay=0.0)], lr=2e-5, eps=1e-6,
      fused=True)  # the fastest CPU AdamW of PyTorch
  autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)
              ) if spec["precision"] == "mixed_bfloat16" else contextlib.nullcontext

  def step():
    optimizer.zero_grad(set_to_none=True)
    with autocast():
      loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(loss)
  return step, sum(p.numel() for p in model.parameters())


def run_worker(spec):
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if spec["impl"] != "torch":
    import tf_keras  # pylint: disable=g-import-not-at-top
    tf_keras.mixed_precision.set_global_policy(spec["precision"])
  builder = dict(rembert_tf=build_rembert, hf_tf=build_hf_tf,
                 torch=build_torch)[spec["impl"]]
  step, parameters = builder(spec)
  sidebyside.serve(step, info=dict(parameters=parameters),
                   warmup_steps=spec["warmup_steps"])


# === Coordinator side ===
def row_specs(task, pythons):
  """Every row of one task, in the order they are started and reported."""
  specs = sidebyside.contender_specs(FLAGS.precisions, FLAGS.xla, FLAGS.peers,
                                     pythons)
  for spec in specs:
    spec.update(task=task, model=sidebyside.REFERENCE_MODEL,
                dropout=FLAGS.dropout, warmup_steps=FLAGS.warmup_steps,
                **{k: TASKS[task][k] for k in ("batch_size", "seq_length")})
  return specs


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  pythons = sidebyside.find_pythons(FLAGS.peers, FLAGS.peer_python)
  os.makedirs(FLAGS.row_log_dir, exist_ok=True)
  print(f"config: {json.dumps(sidebyside.REFERENCE_MODEL)}, dropout "
        f"{FLAGS.dropout}; median of {FLAGS.rounds} interleaved rounds x "
        f"{FLAGS.steps} steps after {FLAGS.warmup_steps} warm-up steps, one "
        f"process per row; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} at start", flush=True)
  rows = []
  for task in FLAGS.tasks:
    print(f"{task}: batch {TASKS[task]['batch_size']}, sequence "
          f"{TASKS[task]['seq_length']}", flush=True)

    workers = sidebyside.run_side_by_side(
        row_specs(task, pythons),
        lambda spec: sidebyside.Worker.for_script(__file__, spec, pythons,
                                                  FLAGS.row_log_dir),
        FLAGS.rounds, FLAGS.steps)
    rows += sidebyside.rows_from_workers(workers)
  sidebyside.report(rows, FLAGS.peers, FLAGS.json_out, dict(
      rounds=FLAGS.rounds, steps=FLAGS.steps, dropout=FLAGS.dropout))


if __name__ == "__main__":
  bench_command.run(main)

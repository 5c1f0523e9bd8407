r"""Serving speed of the exported encoder: rembert_tf SavedModel vs HF TF and PyTorch.

rembert_tf: an encoder of the reference config is written as a checkpoint
directory, exported with `rembert_tf.export.encoder_export.export_encoder` (the TF-Hub BERT
encoder SavedModel) and loaded back with `tf.saved_model.load`; the timed call
is the loaded `serving_default` signature (sequence_output, pooled_output,
default and the stacked per-layer encoder_outputs; it computes the real
tokens only, see rembert_tf/modeling/padding_removal.py). `mixed_bfloat16`:
`export_encoder` always exports float32, so that row saves the same export
model (`encoder_export.build_export_model` + `serving_signature`) built under
the mixed policy. `--xla on` also times the float32 SavedModel's callable
inside `tf.function(jit_compile=True)` (the padded computation with static
shapes), which shows the export compiles with XLA. The batch's lengths are
uniform in [seq/2, seq] (25% padding), as in bench/finetune_step.py.

Peers at the same config, inference mode: Hugging Face `TFRemBertModel`
called inside a `tf.function` with the same input signature (what its
SavedModel serving does) and `RemBertModel` under `torch.inference_mode()`
(bfloat16: `torch.autocast`). Every row runs in its own process, rows are
timed in interleaved rounds and the median call is reported
(bench/sidebyside.py).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/inference.py --json_out infer.json
.venv/bin/python bench/inference.py --precisions float32 --peers hf_tf
```
"""
import json
import os
import sys
import tempfile

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Examples per call.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Precisions.")
flags.DEFINE_list("xla", ["off", "on"],
                  "XLA settings of the rembert_tf rows (on: float32 only).")
flags.DEFINE_list("peers", ["hf_tf", "torch"], "Peers (hf_tf, torch).")
flags.DEFINE_integer("steps", 5, "Timed calls per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved timing rounds over all rows.")
flags.DEFINE_integer("warmup_steps", 3, "Untimed calls first.")
flags.DEFINE_string("peer_python", "",
                    "Python with transformers and torch (default: "
                    ".venv/bench-peers/bin/python).")
flags.DEFINE_string("row_log_dir", "/tmp/rembert_bench_logs",
                    "Each row's process log goes here.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the row a worker process runs.")


# === Worker side: one row ===
def synthetic_inputs(spec):
  """Padded int32 [batch, seq] ids, mask and segment ids."""
  return sidebyside.padded_inputs(spec)[:3]


def export_rembert(spec, directory):
  """Random-init encoder -> checkpoint directory -> SavedModel; its path."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.export import encoder_export  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_writing  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_encoder  # pylint: disable=g-import-not-at-top
  cfg = rembert_config.model_config_from_dict(spec["model"])
  saved_model = os.path.join(directory, "savedmodel")
  if spec["precision"] == "float32":
    checkpoint_dir = os.path.join(directory, "checkpoint")
    checkpoint_writing.write_checkpoint_dir(checkpoint_dir, cfg,
                                            rembert_encoder.build_encoder(cfg))
    encoder_export.export_encoder(checkpoint_dir, saved_model, verify=False)
  else:  # the same export model, built under the global mixed policy
    model = encoder_export.build_export_model(rembert_encoder.build_encoder(cfg))
    tf.saved_model.save(model, saved_model, signatures={
        "serving_default": encoder_export.serving_signature(model)})
  return saved_model


def build_rembert(spec):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  directory = tempfile.mkdtemp(prefix="rembert_infer_")
  loaded = tf.saved_model.load(export_rembert(spec, directory))
  ids, mask, types = (tf.constant(a) for a in synthetic_inputs(spec))
  if spec["xla"] == "on":
    call = tf.function(lambda: loaded(dict(
        input_word_ids=ids, input_mask=mask, input_type_ids=types),
                                      training=False)["pooled_output"],
                       jit_compile=True)
    return lambda: call().numpy()
  serve = loaded.signatures["serving_default"]

  def step():
    outputs = serve(input_word_ids=ids, input_mask=mask, input_type_ids=types)
    return outputs["pooled_output"].numpy()
  return step


def hf_config(spec, transformers):
  m = spec["model"]
  return transformers.RemBertConfig(
      vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
      num_hidden_layers=m["num_hidden_layers"],
      num_attention_heads=m["num_attention_heads"],
      intermediate_size=m["intermediate_size"],
      input_embedding_size=m["input_embedding_size"],
      output_embedding_size=m["output_embedding_size"],
      hidden_act=m["hidden_act"], hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0,
      max_position_embeddings=m["max_position_embeddings"],
      type_vocab_size=m["type_vocab_size"], layer_norm_eps=m["layer_norm_eps"])


def build_hf_tf(spec):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  model = transformers.TFRemBertModel(hf_config(spec, transformers))
  ids, mask, types = (tf.constant(a) for a in synthetic_inputs(spec))
  signature = [tf.TensorSpec([None, None], tf.int32)] * 3

  @tf.function(input_signature=signature)
  def serve(input_ids, attention_mask, token_type_ids):
    out = model(input_ids=input_ids, attention_mask=attention_mask,
                token_type_ids=token_type_ids, training=False)
    return out.last_hidden_state, out.pooler_output

  return lambda: serve(ids, mask, types)[1].numpy()


def build_torch(spec):
  import contextlib  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  model = transformers.RemBertModel(hf_config(spec, transformers)).eval()
  ids, mask, types = (torch.tensor(a, dtype=torch.long)
                      for a in synthetic_inputs(spec))
  autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)
              ) if spec["precision"] == "mixed_bfloat16" else contextlib.nullcontext

  def step():
    with torch.inference_mode(), autocast():
      out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    return out.pooler_output.float().numpy()
  return step


def run_worker(spec):
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if spec["impl"] != "torch":
    import tf_keras  # pylint: disable=g-import-not-at-top
    tf_keras.mixed_precision.set_global_policy(spec["precision"])
  builder = dict(rembert_tf=build_rembert, hf_tf=build_hf_tf,
                 torch=build_torch)[spec["impl"]]
  sidebyside.serve(builder(spec), warmup_steps=spec["warmup_steps"])


# === Coordinator side ===
def row_specs(pythons):
  specs = sidebyside.contender_specs(
      FLAGS.precisions, FLAGS.xla, FLAGS.peers, pythons,
      xla_rows=lambda precision: precision == "float32")
  for spec in specs:
    spec.update(task="inference", model=sidebyside.REFERENCE_MODEL,
                batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
                warmup_steps=FLAGS.warmup_steps)
  return specs


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  pythons = sidebyside.find_pythons(FLAGS.peers, FLAGS.peer_python)
  os.makedirs(FLAGS.row_log_dir, exist_ok=True)
  print(f"config: {json.dumps(sidebyside.REFERENCE_MODEL)}; batch "
        f"{FLAGS.batch_size}, sequence {FLAGS.seq_length}; median of "
        f"{FLAGS.rounds} interleaved rounds x {FLAGS.steps} calls after "
        f"{FLAGS.warmup_steps} warm-up calls, one process per row; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at "
        "start", flush=True)
  workers = sidebyside.run_side_by_side(
      row_specs(pythons),
      lambda spec: sidebyside.Worker.for_script(__file__, spec, pythons,
                                                FLAGS.row_log_dir),
      FLAGS.rounds, FLAGS.steps)
  sidebyside.report(sidebyside.rows_from_workers(workers), FLAGS.peers,
                    FLAGS.json_out, dict(rounds=FLAGS.rounds, steps=FLAGS.steps))


if __name__ == "__main__":
  bench_command.run(main)

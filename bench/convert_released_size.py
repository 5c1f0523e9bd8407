r"""Conversion and export at the released RemBERT's size: wall time and peak memory per step.

Writes a random checkpoint with the released sizes (32 layers, hidden 1152,
vocab 250300, E_in 256, E_out 1664: 575M encoder + 418M output-side
parameters) in the released TF1 layout (BERT names, `adam_m` / `adam_v` slots
for every weight, `global_step`, and an output side: MLM transform,
`[vocab, E_out]` output embedding, output bias), about 12 GB, one variable
at a time (`SaveV2` per variable into its own shard, then
`MergeV2Checkpoints`, so the writer never holds more than one tensor). Then
runs, each in its own process:

| step                | command                                                         |
| ------------------- | --------------------------------------------------------------- |
| convert_encoder     | `tools/convert_checkpoint.py --from tf1 --to rembert_tf`        |
| convert_output_side | the same with `--with_output_side` (+ `pretrainer/ckpt-0`)      |
| convert_hf          | `--from tf1 --to hf --with_output_side` (streamed safetensors)  |
| convert_keras_hub   | `--from tf1 --to keras_hub --with_output_side` (keras-hub preset, streamed) |
| export              | `tools/export_savedmodel.py` on the encoder-only directory      |

and prints the wall time and peak resident memory (the process's maximum
RSS, from `wait4`) of each, beside the size of the weights it converts. The
files are deleted at the end unless `--keep`.

Example:
```bash
df -h /work                           # ~30 GB free needed at the released size
.venv/bin/python bench/convert_released_size.py --work_dir /work/tmp/bench_released \
    --json_out released.json
.venv/bin/python bench/convert_released_size.py --num_layers 2 --vocab_size 20000   # quick check
```
"""
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags

import bench_command  # pylint: disable=g-import-not-at-top

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASED = dict(vocab_size=250300, hidden_size=1152, num_hidden_layers=32,
                num_attention_heads=18, intermediate_size=4608,
                input_embedding_size=256, output_embedding_size=1664,
                hidden_act="gelu", max_position_embeddings=512,
                type_vocab_size=2, layer_norm_eps=1e-12, initializer_range=0.02,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
# The output embedding's name: it contains `output_embedding`, like the release's.
OUTPUT_EMBEDDING_NAME = "cls/predictions/output_embedding"
STEPS = ("convert_encoder", "convert_output_side", "convert_hf",
         "convert_keras_hub", "export")

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/work/tmp/bench_released", "Where the files go.")
flags.DEFINE_integer("num_layers", RELEASED["num_hidden_layers"], "Layers.")
flags.DEFINE_integer("vocab_size", RELEASED["vocab_size"], "Vocabulary size.")
flags.DEFINE_list("steps", list(STEPS), "Steps to run after writing.")
flags.DEFINE_bool("keep", False, "Keep the files.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("write_checkpoint", "", "Internal: write the checkpoint "
                    "to this prefix in this process (a step of its own).")


def model_config():
  cfg = dict(RELEASED, num_hidden_layers=FLAGS.num_layers,
             vocab_size=FLAGS.vocab_size)
  return cfg


def tf1_tensor_shapes(cfg):
  """Released TF1 name -> shape: encoder and output side (no optimizer slots)."""
  from rembert_tf.conversion import weight_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  values = {k: v for k, v in cfg.items()
            if k in rembert_config.field_names()}
  values["hidden_act"] = "gelu"
  model_cfg = rembert_config.model_config_from_dict(values)
  shapes = weight_layout.expected_canonical_shapes(model_cfg, output_side=True)
  shapes[OUTPUT_EMBEDDING_NAME] = shapes.pop(weight_layout.OUTPUT_EMBEDDING)
  return shapes


def write_checkpoint(prefix: str, cfg) -> None:
  """One SaveV2 per variable into its own shard, merged at the end."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  shapes = tf1_tensor_shapes(cfg)
  rng = np.random.default_rng(0)
  parts = []
  tmp = prefix + "_parts"
  os.makedirs(tmp, exist_ok=True)

  def save(name, value):
    part = os.path.join(tmp, f"part-{len(parts):05d}")
    tf.raw_ops.SaveV2(prefix=part, tensor_names=[name], shape_and_slices=[""],
                      tensors=[value])
    parts.append(part)

  for i, (name, shape) in enumerate(sorted(shapes.items()), 1):
    if name.endswith("gamma"):
      value = np.ones(shape, np.float32)
    else:
      value = rng.standard_normal(shape, dtype=np.float32)
      value *= 0.02
    save(name, value)
    value.fill(0.0)  # Adam slots: same shapes, reuse the buffer.
    save(name + "/adam_m", value)
    save(name + "/adam_v", value)
    del value
    if i % 100 == 0:
      print(f"  wrote {i}/{len(shapes)} variables", flush=True)
  save("global_step", np.array(1_000_000, np.int64))
  tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=parts,
                                destination_prefix=prefix, delete_old_dirs=True)
  shutil.rmtree(tmp, ignore_errors=True)
  with open(os.path.join(os.path.dirname(prefix), "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{os.path.basename(prefix)}"\n')


def run_step(name, argv):
  """Runs argv in a child process -> (seconds, peak RSS in bytes)."""
  print(f"[{name}] {' '.join(argv)}", flush=True)
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get(
      "PYTHONPATH", ""))
  start = time.time()
  child = subprocess.Popen(argv, env=env, cwd=REPO)
  _, status, usage = os.wait4(child.pid, 0)
  seconds = time.time() - start
  code = os.waitstatus_to_exitcode(status)
  if code != 0:
    raise SystemExit(f"{name} failed with exit code {code}")
  return seconds, usage.ru_maxrss * 1024


def disk_bytes(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(path) for f in files)


def parameter_counts(cfg):
  shapes = tf1_tensor_shapes(cfg)
  count = lambda names: sum(int(__import__("numpy").prod(shapes[n])) for n in names)
  encoder = [n for n in shapes if n.startswith("bert/")]
  output = [n for n in shapes if not n.startswith("bert/")]
  return count(encoder), count(output)


def main(argv):
  del argv
  unknown = [s for s in FLAGS.steps if s not in STEPS]
  if unknown:
    sys.exit(f"--steps: unknown step(s) {', '.join(unknown)}; "
             f"choose from {', '.join(STEPS)}")
  cfg = model_config()
  if FLAGS.write_checkpoint:
    write_checkpoint(FLAGS.write_checkpoint, cfg)
    return
  work = FLAGS.work_dir
  encoder_params, output_params = parameter_counts(cfg)
  need = 4 * (3 * (encoder_params + output_params)       # input + Adam slots
              + encoder_params + 2 * encoder_params + output_params  # two dirs
              + encoder_params + output_params + encoder_params  # hf, export
              + encoder_params + output_params)                  # keras-hub
  shutil.rmtree(work, ignore_errors=True)
  os.makedirs(work)
  free = shutil.disk_usage(work).free
  print(f"encoder {encoder_params / 1e6:.0f}M + output side "
        f"{output_params / 1e6:.0f}M parameters; needs ~{need / 1e9:.1f} GB "
        f"on disk, {free / 1e9:.1f} GB free", flush=True)
  if free < 1.1 * need:
    raise SystemExit("not enough free disk space: lower --num_layers / "
                     "--vocab_size or free some space.")
  python = sys.executable
  prefix = os.path.join(work, "tf1", "model.ckpt")
  os.makedirs(os.path.dirname(prefix))
  with open(os.path.join(work, "tf1", "config.json"), "w") as f:
    json.dump(cfg, f)
  rows = []
  try:
    seconds, rss = run_step("write", [python, os.path.abspath(__file__),
                                      f"--write_checkpoint={prefix}",
                                      f"--num_layers={FLAGS.num_layers}",
                                      f"--vocab_size={FLAGS.vocab_size}"])
    rows.append(dict(step="write TF1 checkpoint", seconds=seconds,
                     peak_rss=rss, weights=None,
                     disk=disk_bytes(os.path.join(work, "tf1"))))
    tool = lambda name: os.path.join(REPO, "tools", name)
    convert = [python, tool("convert_checkpoint.py"), "--from=tf1",
               f"--checkpoint={prefix}"]
    plans = {
        "convert_encoder": ("tf1 -> rembert_tf, encoder only",
                            convert + ["--to=rembert_tf",
                                       f"--output_dir={work}/encoder_dir"],
                            f"{work}/encoder_dir", encoder_params),
        "convert_output_side": ("tf1 -> rembert_tf, with output side",
                                convert + ["--to=rembert_tf", "--with_output_side",
                                           f"--output_dir={work}/pretrainer_dir"],
                                f"{work}/pretrainer_dir",
                                encoder_params + output_params),
        "convert_hf": ("tf1 -> hf, with output side",
                       convert + ["--to=hf", "--with_output_side",
                                  f"--output_dir={work}/hf"],
                       f"{work}/hf", encoder_params + output_params),
        "convert_keras_hub": ("tf1 -> keras_hub, with output side",
                              convert + ["--to=keras_hub", "--with_output_side",
                                         f"--output_dir={work}/keras_hub"],
                              f"{work}/keras_hub", encoder_params + output_params),
        "export": ("export encoder SavedModel",
                   [python, tool("export_savedmodel.py"),
                    f"--checkpoint={work}/encoder_dir",
                    f"--output_dir={work}/export"],
                   f"{work}/export", encoder_params),
    }
    for step in FLAGS.steps:
      label, argv, out, params = plans[step]
      seconds, rss = run_step(step, argv)
      rows.append(dict(step=label, seconds=seconds, peak_rss=rss,
                       weights=4 * params, disk=disk_bytes(out)))
      if step in ("convert_output_side", "convert_hf", "convert_keras_hub"):
        shutil.rmtree(out, ignore_errors=True)  # keep the disk footprint low
  finally:
    if not FLAGS.keep:
      shutil.rmtree(work, ignore_errors=True)
  print(f"\nlayers {FLAGS.num_layers}, vocab {FLAGS.vocab_size}\n")
  print("| step | wall time | peak RSS | float32 weights converted | peak RSS / weights | on disk |")
  print("| --- | ---: | ---: | ---: | ---: | ---: |")
  for row in rows:
    weights = row["weights"]
    ratio = f"{row['peak_rss'] / weights:.2f}x" if weights else "-"
    print(f"| {row['step']} | {row['seconds']:.0f} s | {row['peak_rss'] / 1e9:.2f} GB | "
          f"{weights / 1e9:.2f} GB | {ratio} | {row['disk'] / 1e9:.2f} GB |"
          if weights else
          f"| {row['step']} | {row['seconds']:.0f} s | {row['peak_rss'] / 1e9:.2f} GB | - | - | "
          f"{row['disk'] / 1e9:.2f} GB |")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w") as f:
      json.dump(dict(num_layers=FLAGS.num_layers, vocab_size=FLAGS.vocab_size,
                     rows=rows), f, indent=2)


if __name__ == "__main__":
  bench_command.run(main)

r"""Peak memory of loading a Hugging Face RemBERT folder with keras-hub's `from_preset`.

Writes a Hugging Face RemBERT folder with random weights (`config.json`,
`model.safetensors` as transformers' `RemBertForMaskedLM` saves it: encoder
and decoupled output side), one tensor at a time, at the released size
(configs/models/rembert.yaml: 32 layers, hidden 1152, 18 heads, FFN 4608,
vocabulary 250300, E_in 256, E_out 1664) or, with `--size quick`, at the
released widths with 2 layers and a 20000-piece vocabulary. Then runs each
contender in a fresh process, one after the other:

| contender              | what the process does                                                      |
| ---------------------- | -------------------------------------------------------------------------- |
| build_only             | builds `RemBertBackbone` from the folder's config, fresh weights (the floor) |
| from_preset_tensorflow | `RemBertBackbone.from_preset(folder)`, Keras 3 on TensorFlow               |
| from_preset_jax        | the same on JAX                                                            |
| masked_lm_tensorflow   | `RemBertMaskedLM.from_preset(folder, preprocessor=None)`: encoder and output side |
| convert                | the peer: `rembert-convert --from hf --to keras_hub` (a streamed preset)    |
| converted_from_preset  | `RemBertBackbone.from_preset(preset)` on the preset `convert` wrote        |

For each it prints the peak resident memory (the process's maximum RSS, from
`wait4`), the resident memory after the imports (the runtime: Python,
TensorFlow, Keras), the peak above that runtime and its ratio to one float32
copy of the weights the contender loads (the encoder's for the backbone
rows, encoder and output side for `masked_lm_tensorflow` and `convert`).
A loader that holds one copy of the model peaks near 1x above its runtime.
The files are deleted at the end unless `--keep`.

Example:
```bash
.venv/bin/python bench/hf_from_preset_memory.py --size quick          # a minute
.venv/bin/python bench/hf_from_preset_memory.py --work_dir /work/tmp/bench_hf_memory \
    --json_out hf_from_preset_memory.json                              # ~8 GB on disk
```
"""
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = dict(num_hidden_layers=2, vocab_size=20000)
CONTENDERS = ("build_only", "from_preset_tensorflow", "from_preset_jax",
              "masked_lm_tensorflow", "convert", "converted_from_preset")

FLAGS = flags.FLAGS
flags.DEFINE_enum("size", "released", ["released", "quick"],
                  "released: configs/models/rembert.yaml; quick: its widths "
                  "with 2 layers and a 20000-piece vocabulary.")
flags.DEFINE_string("work_dir", "/work/tmp/bench_hf_memory", "Where the files go.")
flags.DEFINE_list("contenders", list(CONTENDERS),
                  f"Contenders to run: {', '.join(CONTENDERS)}.")
flags.DEFINE_bool("keep", False, "Keep the files.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: the contender this process runs "
                    "(JSON).")
flags.DEFINE_string("write_folder", "", "Internal: write the Hugging Face "
                    "folder here in this process (a step of its own).")


def memory_status():
  """VmRSS, VmHWM, RssAnon and RssFile of this process, in bytes."""
  fields = {}
  with open("/proc/self/status", encoding="ascii") as f:
    for line in f:
      key, _, value = line.partition(":")
      if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
        fields[key] = int(value.split()[0]) * 1024
  return fields


# === Worker side: one contender in this process ===
def run_worker(spec):
  """Imports, then loads; writes the RSS after the imports and at the end."""
  import keras  # pylint: disable=g-import-not-at-top,unused-import
  from rembert_tf import keras_hub as rk  # pylint: disable=g-import-not-at-top
  from rembert_tf.keras_hub import transformers_checkpoint  # pylint: disable=g-import-not-at-top
  runtime = memory_status()["VmRSS"]
  start = time.time()
  name = spec["name"]
  if name == "build_only":
    with open(os.path.join(spec["hf"], "config.json"), encoding="utf-8") as f:
      config = json.load(f)
    model = rk.RemBertBackbone(
        **transformers_checkpoint.convert_backbone_config(config))
  elif name == "masked_lm_tensorflow":
    model = rk.RemBertMaskedLM.from_preset(spec["hf"], preprocessor=None)
  elif name == "converted_from_preset":
    model = rk.RemBertBackbone.from_preset(spec["preset"])
  else:
    model = rk.RemBertBackbone.from_preset(spec["hf"])
  seconds = time.time() - start
  status = memory_status()
  with open(spec["report"], "w", encoding="utf-8") as f:
    json.dump(dict(runtime_rss=runtime, seconds=seconds,
                   parameters=int(model.count_params()), **status), f)


# === Coordinator side ===
def model_config():
  import yaml  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, "configs", "models", "rembert.yaml"),
            encoding="utf-8") as f:
    values = yaml.safe_load(f)
  if FLAGS.size == "quick":
    values.update(QUICK)
  return values


def write_hf_folder(folder, values):
  """config.json and model.safetensors, random weights, one tensor in memory
  at a time (the project's streaming safetensors writer)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import config_json  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import tensor_sources  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import weight_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  cfg = rembert_config.model_config_from_dict(
      {k: v for k, v in values.items() if k in rembert_config.field_names()})
  canonical = weight_layout.expected_canonical_shapes(cfg, output_side=True)
  shapes, sources = {}, {}
  for name, shape in canonical.items():
    hf, transpose = weight_layout.hf_name(name)
    shapes[hf] = tuple(shape[::-1]) if transpose else tuple(shape)
    sources[hf] = name
  rng = np.random.default_rng(0)

  def tensors():
    for hf in sorted(shapes):
      if sources[hf].endswith("gamma"):
        yield hf, np.ones(shapes[hf], np.float32)
      else:
        value = rng.standard_normal(shapes[hf], dtype=np.float32)
        value *= 0.02
        yield hf, value

  os.makedirs(folder)
  tensor_sources.write_safetensors(os.path.join(folder, "model.safetensors"),
                                   shapes, tensors(), metadata={"format": "pt"})
  config_json.write_hf_config(cfg, os.path.join(folder, "config.json"),
                              with_output_side=True)


def parameter_counts(folder):
  """(encoder, output side) parameters, from the safetensors header."""
  with open(os.path.join(folder, "model.safetensors"), "rb") as f:
    header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
  counts = [0, 0]
  for name, entry in header.items():
    if name != "__metadata__":
      size = 1
      for d in entry["shape"]:
        size *= d
      counts[name.startswith("cls.")] += size
  return tuple(counts)


def run_child(label, argv, env=None):
  """Runs argv in a child process -> (seconds, peak RSS in bytes)."""
  print(f"[{label}] {' '.join(argv)}", flush=True)
  child_env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get(
      "PYTHONPATH", ""))
  child_env.pop("TF_USE_LEGACY_KERAS", None)
  child_env.update(env or {})
  start = time.time()
  child = subprocess.Popen(argv, env=child_env, cwd=REPO)
  _, status, usage = os.wait4(child.pid, 0)
  code = os.waitstatus_to_exitcode(status)
  if code != 0:
    raise SystemExit(f"{label} failed with exit code {code}")
  return time.time() - start, usage.ru_maxrss * 1024


def contender_row(name, work, weights):
  """Runs one contender in its own process -> its row."""
  hf, preset = os.path.join(work, "hf"), os.path.join(work, "keras_hub")
  report = os.path.join(work, f"{name}.json")
  if name == "convert":
    argv = [sys.executable, os.path.join(REPO, "tools", "convert_checkpoint.py"),
            "--from=hf", "--to=keras_hub", f"--checkpoint={hf}",
            "--with_output_side", f"--output_dir={preset}"]
    seconds, peak = run_child(name, argv)
    return dict(contender=name, seconds=seconds, peak_rss=peak,
                runtime_rss=None, weights=weights["all"])
  backend = "jax" if name.endswith("_jax") else "tensorflow"
  spec = dict(name=name, hf=hf, preset=preset, report=report)
  _, peak = run_child(name, [sys.executable, os.path.abspath(__file__),
                             "--worker=" + json.dumps(spec)],
                      env=dict(KERAS_BACKEND=backend))
  with open(report, encoding="utf-8") as f:
    measured = json.load(f)
  return dict(contender=name, backend=backend, seconds=measured["seconds"],
              peak_rss=peak, runtime_rss=measured["runtime_rss"],
              end_rss=measured["VmRSS"], end_rss_file=measured["RssFile"],
              parameters=measured["parameters"],
              weights=weights["all" if name == "masked_lm_tensorflow"
                              else "encoder"])


def markdown_table(rows) -> str:
  lines = ["| contender | load time | peak RSS | runtime RSS | peak above runtime "
           "| float32 weights | above runtime / weights |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
  for r in rows:
    runtime = r["runtime_rss"]
    above = r["peak_rss"] - runtime if runtime is not None else None
    cells = [r["contender"], f"{r['seconds']:.0f} s",
             f"{r['peak_rss'] / 1e9:.2f} GB",
             f"{runtime / 1e9:.2f} GB" if runtime is not None else "-",
             f"{above / 1e9:.2f} GB" if above is not None else "-",
             f"{r['weights'] / 1e9:.2f} GB",
             f"{above / r['weights']:.2f}x" if above is not None else
             f"({r['peak_rss'] / r['weights']:.2f}x with its runtime)"]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker(json.loads(FLAGS.worker))
    return
  sidebyside.check_choices("contenders", FLAGS.contenders, CONTENDERS)
  if ("converted_from_preset" in FLAGS.contenders
      and "convert" not in FLAGS.contenders):
    raise app.UsageError("--contenders: converted_from_preset reads the "
                         "preset that convert writes; add convert before it.")
  values = model_config()
  if FLAGS.write_folder:
    write_hf_folder(FLAGS.write_folder, values)
    return
  work = FLAGS.work_dir
  shutil.rmtree(work, ignore_errors=True)
  os.makedirs(work)
  rows = []
  try:
    seconds, peak = run_child("write", [
        sys.executable, os.path.abspath(__file__), f"--size={FLAGS.size}",
        f"--write_folder={os.path.join(work, 'hf')}"],
                              env=dict(TF_USE_LEGACY_KERAS="1"))
    encoder, output_side = parameter_counts(os.path.join(work, "hf"))
    print(f"wrote {work}/hf in {seconds:.0f} s (peak RSS {peak / 1e9:.2f} GB): "
          f"encoder {encoder / 1e6:.0f}M + output side {output_side / 1e6:.0f}M "
          "parameters", flush=True)
    weights = dict(encoder=4 * encoder, all=4 * (encoder + output_side))
    for name in [c for c in CONTENDERS if c in FLAGS.contenders]:
      rows.append(contender_row(name, work, weights))
  finally:
    if not FLAGS.keep:
      shutil.rmtree(work, ignore_errors=True)
  print(f"\n{FLAGS.size} size: {values['num_hidden_layers']} layers, vocabulary "
        f"{values['vocab_size']}; {os.cpu_count()} CPUs\n")
  print(markdown_table(rows))
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(size=FLAGS.size, model=values, rows=rows), f, indent=2)


if __name__ == "__main__":
  bench_command.run(main)

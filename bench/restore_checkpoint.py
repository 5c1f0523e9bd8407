r"""Restoring a released-size checkpoint from ram://: one RestoreV2 per variable against batched reads.

Two readers of the checkpoint a user starts from, at the released sizes
(32 layers, hidden 1152, vocab 250300, E_in 256, E_out 1664: 527 tensors,
995M parameters, 4.0 GB in float32):

| source     | checkpoint                                              | read by                                      |
| ---------- | ------------------------------------------------------- | -------------------------------------------- |
| tf1        | the released TF1 layout (BERT names, output side; no optimizer slots) | `Tf1Source.read` into a RemBertPretrainer, as `convert_checkpoint` does before writing |
| rembert_tf | `pretrainer/ckpt-0` as this project writes it (object-based, key `model`; data files of 256 MB) | `pretrainer_restore.restore_pretrainer` (`load_pretrainer`, the converter) |

each with a batch budget of 0 bytes (`checkpoint_reading.BATCH_BYTES = 0`:
one RestoreV2 per variable) and the default budget (and any `--budgets`). ram:// lives inside a process, so each
measurement is a process of its own that writes the checkpoint to ram://,
builds the model (zero-initialised, as the loaders do) and restores it;
the contenders alternate, round after round. Printed per row: the restore's
wall time and CPU time (all threads; median over rounds: on a shared
machine the CPU time is the steadier of the two), its RestoreV2 calls, the
minor page faults it took, the peak resident memory during the restore above the memory held just before it (the batches
in flight; the model and the ram:// file are already resident: the
process's VmHWM reset through /proc/self/clear_refs), and the process's
peak (ram:// file + model + batches, and the writing before).

ram:// serves reads from memory: what batching saves there is the opening of
the checkpoint per call and the one-at-a-time reading of large tensors; on
gs:// each opening is also a network round trip.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/restore_checkpoint.py --json_out restore.json
.venv/bin/python bench/restore_checkpoint.py --num_layers 2 --vocab_size 20000 --rounds 1   # quick
```
Needs about 10 GB of free memory at the released size (ram:// file, model,
the largest tensor).
"""
import ctypes
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # measure the checkout this script lives in
  sys.path.insert(1, REPO)
SOURCES = ("tf1", "rembert_tf")

FLAGS = flags.FLAGS
flags.DEFINE_list("sources", list(SOURCES), "Checkpoints to restore.")
flags.DEFINE_list("budgets", [], "Batch budgets in bytes beside 0 and the "
                  "default (checkpoint_reading.BATCH_BYTES).")
flags.DEFINE_integer("rounds", 2, "Alternating rounds (median time).")
flags.DEFINE_integer("num_layers", 32, "Layers (released: 32).")
flags.DEFINE_integer("vocab_size", 250300, "Vocabulary (released: 250300).")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")
flags.DEFINE_string("worker", "", "Internal: SOURCE:BUDGET, measured in this "
                    "process.")


# === one measurement (a worker process) ===
def released_config():
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  return rembert_config.load_model_config(
      "rembert", dict(num_hidden_layers=FLAGS.num_layers,
                      vocab_size=FLAGS.vocab_size))


def write_tf1_checkpoint(prefix, cfg):
  """The released layout, one SaveV2 per tensor into its own shard, merged."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import weight_layout  # pylint: disable=g-import-not-at-top
  shapes = weight_layout.expected_canonical_shapes(cfg, output_side=True)
  parts = []
  for i, (name, shape) in enumerate(sorted(shapes.items())):
    parts.append(f"{prefix}_part-{i:05d}")
    tf.raw_ops.SaveV2(prefix=parts[-1], tensor_names=[name],
                      shape_and_slices=[""],
                      tensors=[np.full(shape, 0.01 * (i % 7), np.float32)])
  tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=parts,
                                destination_prefix=prefix,
                                delete_old_dirs=True)
  return prefix


def write_rembert_tf_checkpoint(prefix, pretrainer):
  """The pretrainer as a rembert_tf checkpoint (key `model`, as
  `pretrainer/ckpt-N`), in data files of at most 256 MB: ram:// keeps a file
  in one growing string, which would need up to twice the model while it
  grows."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  options = tf.train.CheckpointOptions(
      experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
          max_shard_size=256 << 20))
  return tf.train.Checkpoint(model=pretrainer).write(prefix, options=options)


def restore_tf1(pretrainer, prefix, cfg):
  """Tf1Source into the pretrainer: the loop of convert_checkpoint."""
  from rembert_tf.conversion import tensor_sources  # pylint: disable=g-import-not-at-top
  from rembert_tf.conversion import weight_layout  # pylint: disable=g-import-not-at-top
  source = tensor_sources.Tf1Source(prefix)
  source.add_output_side(cfg)
  by_name = {s.name: s for s in weight_layout.slots_for_pretrainer(pretrainer)}
  names = list(source.shapes())
  for name, value in source.read(names):
    by_name[name].assign(value)
    del value  # nothing holds it while the next batch is read
  return len(names)


def restore_rembert_tf(pretrainer, prefix, cfg):
  from rembert_tf.checkpoints import pretrainer_restore  # pylint: disable=g-import-not-at-top
  del cfg
  pretrainer_restore.restore_pretrainer(pretrainer, prefix)
  return len(pretrainer.variables)


def resident_bytes(field="VmRSS"):
  with open("/proc/self/status") as f:
    return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1)) * 1024


def release_free_memory():
  gc.collect()
  ctypes.CDLL("libc.so.6").malloc_trim(0)


def measure(source, budget):
  """Writes the checkpoint to ram://, restores it once -> a result dict."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_reading  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_restore  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_pretrainer  # pylint: disable=g-import-not-at-top
  cfg = released_config()
  root = f"ram://bench_restore/{source}"
  # Zeros, as the loaders build it; the rembert_tf checkpoint is written
  # from it and read back into it (one model in memory, not two).
  with checkpoint_restore.zero_initialized_variables():
    pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  start = time.time()
  if source == "tf1":
    path, restore = write_tf1_checkpoint(f"{root}/model.ckpt", cfg), restore_tf1
  else:
    path = write_rembert_tf_checkpoint(f"{root}/pretrainer/ckpt-0", pretrainer)
    restore = restore_rembert_tf
  write_seconds = time.time() - start
  checkpoint_reading.BATCH_BYTES = budget
  calls, restore_v2 = [], tf.raw_ops.RestoreV2
  tf.raw_ops.RestoreV2 = lambda **kw: calls.append(1) or restore_v2(**kw)
  release_free_memory()
  before = resident_bytes()
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS
  start, cpu_start = time.time(), time.process_time()
  faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  tensors = restore(pretrainer, path, cfg)
  seconds, cpu_seconds = time.time() - start, time.process_time() - cpu_start
  faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start
  peak = resident_bytes("VmHWM")
  return dict(source=source, budget=budget, seconds=seconds,
              cpu_seconds=cpu_seconds, page_faults=faults, tensors=tensors,
              restore_calls=len(calls), peak_above_before=peak - before,
              resident_before=before, process_peak=resident_bytes("VmHWM"),
              write_seconds=write_seconds,
              parameters=sum(int(v.shape.num_elements())
                             for v in pretrainer.variables))


# === the coordinator ===
def run_worker(source, budget):
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get(
      "PYTHONPATH", ""))
  argv = [sys.executable, os.path.abspath(__file__),
          f"--worker={source}:{budget}", f"--num_layers={FLAGS.num_layers}",
          f"--vocab_size={FLAGS.vocab_size}"]
  child = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                         text=True, check=False)
  if child.returncode != 0:
    raise SystemExit(f"{source} at budget {budget} failed with exit code "
                     f"{child.returncode}")
  (line,) = [l for l in child.stdout.splitlines() if l.startswith("@@")]
  return json.loads(line[2:])


def main(argv):
  del argv
  if FLAGS.worker:
    source, budget = FLAGS.worker.split(":")
    print("@@" + json.dumps(measure(source, int(budget))), flush=True)
    return
  from rembert_tf.checkpoints import checkpoint_reading  # pylint: disable=g-import-not-at-top
  budgets = [0, checkpoint_reading.BATCH_BYTES] + [
      int(b) for b in FLAGS.budgets if int(b) not in (
          0, checkpoint_reading.BATCH_BYTES)]
  results = {}
  for round_index in range(FLAGS.rounds):
    shift = round_index % len(budgets)
    for source in FLAGS.sources:
      for budget in budgets[shift:] + budgets[:shift]:  # alternate who starts
        result = run_worker(source, budget)
        results.setdefault((source, budget), []).append(result)
        print(f"round {round_index + 1}/{FLAGS.rounds} {source} budget "
              f"{budget >> 20} MiB: {result['seconds']:.2f} s (CPU "
              f"{result['cpu_seconds']:.2f} s), "
              f"{result['restore_calls']} RestoreV2 calls, peak +"
              f"{result['peak_above_before'] / 2**30:.2f} GiB", flush=True)
  rows = [summarize(source, budget, runs)
          for (source, budget), runs in results.items()]
  print_table(rows)
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w") as f:
      json.dump(dict(num_layers=FLAGS.num_layers, vocab_size=FLAGS.vocab_size,
                     filesystem="ram://", rows=rows), f, indent=2)


def summarize(source, budget, runs):
  return dict(
      source=source, budget=budget, rounds=len(runs),
      seconds=statistics.median(r["seconds"] for r in runs),
      cpu_seconds=statistics.median(r["cpu_seconds"] for r in runs),
      page_faults=statistics.median(r["page_faults"] for r in runs),
      all_seconds=[round(r["seconds"], 3) for r in runs],
      restore_calls=runs[0]["restore_calls"], tensors=runs[0]["tensors"],
      parameters=runs[0]["parameters"],
      peak_above_before=max(r["peak_above_before"] for r in runs),
      process_peak=max(r["process_peak"] for r in runs))


def print_table(rows):
  print(f"\nlayers {FLAGS.num_layers}, vocab {FLAGS.vocab_size}, ram://\n")
  print("| source | batch budget | RestoreV2 calls | restore time | vs one per "
        "variable | CPU time | page faults | peak during restore above "
        "before | process peak |")
  print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  first = {r["source"]: r["seconds"] for r in rows if r["budget"] == 0}
  for row in sorted(rows, key=lambda r: (r["source"], r["budget"])):
    budget = ("0 (one per variable)" if row["budget"] == 0
              else f"{row['budget'] >> 20} MiB")
    print(f"| {row['source']} | {budget} | {row['restore_calls']} | "
          f"{row['seconds']:.2f} s | "
          f"{first[row['source']] / row['seconds']:.2f}x | "
          f"{row['cpu_seconds']:.2f} s | {row['page_faults'] / 1e3:.0f}k | "
          f"{row['peak_above_before'] / 2**30:.2f} GiB | "
          f"{row['process_peak'] / 2**30:.2f} GiB |")


if __name__ == "__main__":
  import bench_command  # pylint: disable=g-import-not-at-top
  bench_command.run(main)

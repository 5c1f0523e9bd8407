r"""Cost of the encoder export written beside each pre-training checkpoint.

After every full checkpoint (`ckpt-N`: model, optimizer slots, step) the
train command also writes `encoder/ckpt-N` (the encoder alone, what
fine-tuning and export read), with one reused `tf.train.Checkpoint`
(the runner's `tf.train.CheckpointManager` of it). This bench times, in interleaved
rounds on the same model and optimizer state, the wall seconds of one save:

* `full`: the full checkpoint only (what Model Garden writes),
* `full+encoder`: the full checkpoint and the encoder export,

and prints the export's added seconds, its share, and the amortised cost
per save with `trainer.encoder_export_every_n_checkpoints` = 5.

Default model: the step bench's reference config (bench/pretrain_step.py:
4 layers, hidden 256, vocab 32000, E_in 128, E_out 512) with AdamW slots.
`--model_config rembert` times the released size (about 12 GB per full
checkpoint on disk: needs the space and minutes per round).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/export_cost.py --rounds 5
.venv/bin/python bench/export_cost.py --model_config rembert --rounds 1 --json_out /tmp/cost.json
```
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # pylint: disable=g-import-not-at-top

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_config", default="",
                      help="Model preset / YAML; empty = the reference config.")
  parser.add_argument("--rounds", type=int, default=5,
                      help="Interleaved rounds (one save of each kind each).")
  parser.add_argument("--every_n", type=int, default=5,
                      help="Export interval for the amortised figure.")
  parser.add_argument("--directory", default="",
                      help="Where to write (default: a temporary local dir).")
  parser.add_argument("--json_out", default="", help="Also write JSON here.")
  return parser.parse_args(argv)


def build_state(model_config: str):
  """The pretrainer, an AdamW optimizer with its slots, a step counter."""
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  if model_config:
    model = rembert_config.load_model_config(model_config)
  else:
    import pretrain_step  # pylint: disable=g-import-not-at-top
    model = rembert_config.model_config_from_dict(pretrain_step.REFERENCE)
  config = experiments.load_experiment_config(
      [], {"task": {"model": model.as_dict(),
                    "train_data": {"input_path": "synthetic"}}})
  task = task_factory.get_task(config.task)
  pretrainer = task.build_model()
  optimizer = task.create_optimizer(config.trainer.optimizer_config,
                                    config.runtime)
  variables = pretrainer.trainable_variables
  if hasattr(optimizer, "_create_all_weights"):  # legacy Keras optimizers
    optimizer._create_all_weights(variables)  # pylint: disable=protected-access
  else:
    optimizer.build(variables)  # the m / v slots
  step = tf.Variable(0, dtype=tf.int64, name="global_step")
  return pretrainer, optimizer, step


def directory_bytes(path):
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(path) for f in files)


def time_saves(pretrainer, optimizer, step, root, rounds):
  """Wall seconds of each save kind, in interleaved rounds (first untimed)."""
  rows = {"full": [], "full+encoder": []}
  managers, writers = {}, {}
  for kind in rows:
    directory = os.path.join(root, kind.replace("+", "_"))
    full = tf.train.Checkpoint(global_step=step, model=pretrainer,
                               optimizer=optimizer)
    managers[kind] = tf.train.CheckpointManager(full, directory, max_to_keep=1)
    writers[kind] = tf.train.CheckpointManager(
        tf.train.Checkpoint(encoder=pretrainer.encoder),
        os.path.join(directory, "encoder"), max_to_keep=1)
  for round_index in range(rounds + 1):
    for kind in rows:
      step.assign_add(1)
      start = time.perf_counter()
      managers[kind].save(checkpoint_number=int(step.numpy()))
      if kind == "full+encoder":
        writers[kind].save(checkpoint_number=int(step.numpy()))
      if round_index:
        rows[kind].append(time.perf_counter() - start)
  return rows


def summarize(args, pretrainer, rows, root):
  full_dir = os.path.join(root, "full_encoder")
  encoder_bytes = directory_bytes(os.path.join(full_dir, "encoder"))
  full = statistics.median(rows["full"])
  both = statistics.median(rows["full+encoder"])
  return {
      "model_config": args.model_config or "reference (bench/pretrain_step.py)",
      "rounds": args.rounds,
      "seconds_per_save_full": full,
      "seconds_per_save_full_plus_encoder": both,
      "encoder_export_seconds": both - full,
      "encoder_export_share": (both - full) / both if both else 0.0,
      "every_n": args.every_n,
      "seconds_per_save_every_n": full + (both - full) / args.every_n,
      "encoder_parameters": int(pretrainer.encoder.count_params()),
      "pretrainer_parameters": int(pretrainer.count_params()),
      "full_checkpoint_bytes": directory_bytes(full_dir) - encoder_bytes,
      "encoder_export_bytes": encoder_bytes,
      "raw": rows,
  }


def report(result):
  print(f"model: {result['model_config']} | encoder "
        f"{result['encoder_parameters']:,} of {result['pretrainer_parameters']:,}"
        f" parameters | full checkpoint {result['full_checkpoint_bytes'] / 1e6:.1f}"
        f" MB, encoder export {result['encoder_export_bytes'] / 1e6:.1f} MB")
  print(f"| save | wall s per save (median of {result['rounds']}) |\n| --- | ---: |")
  print(f"| full checkpoint | {result['seconds_per_save_full']:.3f} |")
  print("| full checkpoint + encoder export | "
        f"{result['seconds_per_save_full_plus_encoder']:.3f} |")
  print(f"| encoder export alone (difference) | "
        f"{result['encoder_export_seconds']:.3f} "
        f"({100 * result['encoder_export_share']:.0f}%) |")
  print(f"| amortised, export every {result['every_n']} saves | "
        f"{result['seconds_per_save_every_n']:.3f} |")


def main(argv=None):
  args = parse_args(argv)
  pretrainer, optimizer, step = build_state(args.model_config)
  root = args.directory or tempfile.mkdtemp(prefix="rembert_export_cost-")
  try:
    rows = time_saves(pretrainer, optimizer, step, root, args.rounds)
    result = summarize(args, pretrainer, rows, root)
  finally:
    if not args.directory:
      shutil.rmtree(root, ignore_errors=True)
  report(result)
  if args.json_out:
    with open(args.json_out, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=2)
  return result


if __name__ == "__main__":
  main()

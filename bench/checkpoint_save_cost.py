r"""What a checkpoint save costs the training loop: synchronous vs asynchronous writes.

Times the real pre-training pieces at the reference config of
bench/pretrain_step.py (4 layers, hidden 256, vocab 32000, E_in 128,
E_out 512; batch 32, sequence 128, 20 predictions; float32, no XLA, one CPU
device, synthetic batches): Model Garden's trainer and its checkpoint
(weights, AdamW slots, step: what `ckpt-N` holds), saved by a
CheckpointManager with orbit's options, plus the encoder export
(`encoder/ckpt-N`) that follows every save. Each row runs `--saves` cycles
of `--steps_between_saves` training steps and a save, then waits until every
write is complete:

| row | save |
| --- | --- |
| `no save` | none: the baseline |
| `synchronous` | `trainer.enable_async_checkpointing=false`: the loop waits for the files |
| `asynchronous` | `trainer.enable_async_checkpointing=true`: the loop waits for a host copy; a thread writes |

Reported per save: the stall (time the training thread spends in the save
calls), the cost (row time - `no save` time, per save: stall plus whatever
the background writes take from the steps; on a loaded machine its noise
can exceed the stall), and the checkpoint size. Rows run in interleaved
rounds (medians), so load from other processes hits each alike; a row waits
for its writes before the next row starts.
The writes go to a local temporary directory unless `--model_dir` names
another (e.g. ram://, gs://).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/checkpoint_save_cost.py --json_out /tmp/save_cost.json
.venv/bin/python bench/checkpoint_save_cost.py --rounds 2 --saves 2 --model_dir ram://bench
```
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside  # pylint: disable=g-import-not-at-top,wrong-import-position
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("num_predictions", 20, "Masked predictions per sequence.")
flags.DEFINE_integer("steps_between_saves", 3, "Training steps per cycle.")
flags.DEFINE_integer("saves", 3, "Cycles (saves) per row and round.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds over the rows.")
flags.DEFINE_string("model_dir", "", "Where the checkpoints go (default: a "
                    "local temporary directory).")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")


def build_trainer(model_dir):
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  from official.core import train_utils  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import runner  # pylint: disable=g-import-not-at-top
  model = dict(sidebyside.REFERENCE_MODEL)
  model["max_position_embeddings"] = max(model["max_position_embeddings"],
                                         FLAGS.seq_length)
  config = experiments.load_experiment_config([], {
      "task": {"model": model, "jit_compile": False,
               "train_data": {"input_path": "synthetic",
                              "global_batch_size": FLAGS.batch_size,
                              "seq_length": FLAGS.seq_length,
                              "max_predictions_per_seq": FLAGS.num_predictions}},
      "trainer": {"steps_per_loop": FLAGS.steps_between_saves,
                  "summary_interval": FLAGS.steps_between_saves}})
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    task = task_factory.get_task(config.task)
  # trainer.train(n) runs n steps in one call: the cycle is the device call.
  with strategy.scope():
    trainer = train_utils.create_trainer(config, task, train=True,
                                         evaluate=False,
                                         trainer_cls=runner.PretrainTrainer)
  trainer.model_dir = model_dir
  return strategy, trainer


class Saver:
  """A run's saves: ckpt-N (CheckpointManager) and encoder/ckpt-N, through
  Checkpoint objects of its own (the trainer's variables, its layout)."""

  def __init__(self, trainer, directory, asynchronous):
    from rembert_tf.checkpoints import checkpoint_integrity  # pylint: disable=g-import-not-at-top
    self._wait = checkpoint_integrity.wait_for_writes
    self.options = tf.train.CheckpointOptions(enable_async=asynchronous)
    checkpoint = tf.train.Checkpoint(
        global_step=trainer.global_step, model=trainer.model,
        optimizer=trainer.optimizer,
        **getattr(trainer.model, "checkpoint_items", {}))
    self.manager = tf.train.CheckpointManager(
        checkpoint, directory, max_to_keep=2)
    self.export = tf.train.CheckpointManager(
        tf.train.Checkpoint(encoder=trainer.model.encoder),
        os.path.join(directory, checkpoint_integrity.ENCODER_SUBDIR),
        max_to_keep=2)
    self.step = trainer.global_step

  def save(self):
    step = int(self.step.numpy())
    self.manager.save(checkpoint_number=step, options=self.options)
    self.export.save(checkpoint_number=step, options=self.options)

  def wait(self):
    self._wait(self.manager.checkpoint)
    self._wait(self.export.checkpoint)


def run_cycle(strategy, trainer, saver):
  """(seconds of steps_between_saves steps and a save, seconds in the save)."""
  start = time.perf_counter()
  with strategy.scope():
    trainer.train(tf.constant(FLAGS.steps_between_saves, tf.int32))
  stalled = 0.0
  if saver:
    before = time.perf_counter()
    saver.save()
    stalled = time.perf_counter() - before
  return time.perf_counter() - start, stalled


def wait_for(saver):
  start = time.perf_counter()
  if saver:
    saver.wait()
  return time.perf_counter() - start


def checkpoint_megabytes(prefix):
  return sum(tf.io.gfile.stat(p).length
             for p in tf.io.gfile.glob(prefix + ".*")) / 2 ** 20


def measure(strategy, trainer, savers):
  """Per row, per round: (row seconds, seconds stalled in saves, final wait)."""
  for saver in savers.values():  # compile; first saves build their graphs
    run_cycle(strategy, trainer, saver)
    wait_for(saver)
  rounds = {name: [] for name in savers}
  for r in range(FLAGS.rounds):
    # A row's background writes overlap its own steps only: each row runs
    # its cycles and waits for its writes before the next row starts.
    for name, saver in savers.items():
      cycles = [run_cycle(strategy, trainer, saver) for _ in range(FLAGS.saves)]
      waited = wait_for(saver)
      rounds[name].append((sum(c for c, _ in cycles) + waited,
                           sum(s for _, s in cycles), waited))
    print(f"  round {r + 1}/{FLAGS.rounds} done", flush=True)
  return rounds


def main(argv):
  del argv
  root = FLAGS.model_dir or tempfile.mkdtemp(prefix="save_cost-")
  strategy, trainer = build_trainer(root)
  savers = {"no save": None}
  for name, asynchronous in (("synchronous", False), ("asynchronous", True)):
    savers[name] = Saver(trainer, f"{root}/{name}", asynchronous)
  print(f"reference config, batch {FLAGS.batch_size}, sequence "
        f"{FLAGS.seq_length}; {FLAGS.rounds} rounds x {FLAGS.saves} saves "
        f"every {FLAGS.steps_between_saves} steps; writes to {root}; "
        f"TF {tf.__version__}, {os.cpu_count()} CPUs", flush=True)
  times = measure(strategy, trainer, savers)
  base = float(np.median([t[0] for t in times["no save"]]))
  size = checkpoint_megabytes(savers["synchronous"].manager.latest_checkpoint)
  export = checkpoint_megabytes(
      savers["synchronous"].export.latest_checkpoint)
  rows = []
  print(f"\ncheckpoint {size:.0f} MiB + encoder export {export:.0f} MiB per save")
  print("| save | row s | stall per save s | cost per save s | final wait s |")
  print("| --- | --- | --- | --- | --- |")
  for name in savers:
    total, stall, wait = (float(np.median([t[i] for t in times[name]]))
                          for i in range(3))
    stall /= FLAGS.saves
    cost = (total - base) / FLAGS.saves
    rows.append(dict(row=name, row_seconds=total, stall_per_save=stall,
                     cost_per_save=cost, final_wait=wait,
                     rounds=[list(t) for t in times[name]]))
    print(f"| {name} | {total:.2f} | {stall:.3f} | {cost:.3f} | {wait:.3f} |")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(checkpoint_mib=size, encoder_export_mib=export,
                     model_dir=root, rows=rows), f, indent=1)


if __name__ == "__main__":
  bench_command.run(main)

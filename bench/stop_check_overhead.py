r"""Host overhead of the stop checks between device calls: per step, on the tiny config.

A pre-training loop of `steps_per_loop` steps runs as device calls; between
two calls the host runs orbit's train actions (the stop check for SIGTERM or
a multi-worker preemption notice among them). This bench times the real
`PretrainTrainer` (`rembert_tf.pretraining.runner`), one
`trainer.train(n)` per call as orbit's Controller makes it, on the tiny demo experiment
(configs/experiments/pretrain_tiny_demo.yaml: the tiny model, batch 64,
sequence 64, synthetic batches, one CPU device) with each way of cutting it:

| row | calls |
| --- | --- |
| `one step per call, step read per call` | one step per call and the step counter read from the device after each |
| `10 steps per call` | `trainer.stop_check_steps=10` |
| `sized by time (default)` | about `trainer.stop_check_seconds` (1 s) of steps per call |
| `one call per loop` | no stop check inside the loop: the floor |

Two measurements per row, interleaved in rounds (so load from other
processes hits every row alike):

* the host cost of one call, measured exactly: the loop function called for
  zero steps (its dispatch, the loop's entry and exit) plus the row's work
  between calls (the schedule, the hooks: the step read), median of
  `--host_reps` calls; divided by the steps per call and the step time it
  gives the host overhead, the figure the default is chosen by;
* the median step time of whole loops (on a loaded machine its noise is
  larger than the overhead; it is printed as a check).

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/stop_check_overhead.py --json_out /tmp/overhead.json
.venv/bin/python bench/stop_check_overhead.py --steps_per_loop 100 --rounds 3
```
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags
import numpy as np
import tensorflow as tf

FLAGS = flags.FLAGS
flags.DEFINE_string("experiment", "pretrain_tiny_demo",
                    "Experiment YAML whose model and batch are timed.")
flags.DEFINE_integer("steps_per_loop", 100, "Steps per timed loop.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds; one loop per row each.")
flags.DEFINE_integer("host_reps", 200, "Zero-step calls per row and round.")
flags.DEFINE_float("stop_check_seconds", 1.0,
                   "trainer.stop_check_seconds of the time-sized row.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")


def build_trainer():
  """The real trainer of the experiment on synthetic batches, one CPU device."""
  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  from official.core import train_utils  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import runner  # pylint: disable=g-import-not-at-top
  config = experiments.load_experiment_config(
      [FLAGS.experiment], {"task": {"train_data": {"input_path": "synthetic"}},
                           "trainer": {"steps_per_loop": FLAGS.steps_per_loop,
                                       "summary_interval": FLAGS.steps_per_loop}})
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    task = task_factory.get_task(config.task)
    trainer = train_utils.create_trainer(config, task, train=True,
                                         evaluate=False,
                                         trainer_cls=runner.PretrainTrainer)
  return config, strategy, trainer


def variants(trainer):
  """(row name, the loop's device calls, hooks between calls)."""
  from rembert_tf.runtime import orbit_loop  # pylint: disable=g-import-not-at-top
  read_step = lambda: int(trainer.global_step.numpy())
  loop = FLAGS.steps_per_loop
  return [
      ("one step per call, step read per call",
       orbit_loop.LoopSteps(loop, fixed_steps=1), [read_step]),
      ("10 steps per call", orbit_loop.LoopSteps(loop, fixed_steps=10), []),
      ("sized by time (default)",
       orbit_loop.LoopSteps(loop, seconds=FLAGS.stop_check_seconds), []),
      ("one call per loop", orbit_loop.LoopSteps(loop, fixed_steps=loop), []),
  ]


def time_loop(strategy, trainer, schedule, hooks):
  """(seconds per step, device calls) of one loop of steps_per_loop steps,
  cut as orbit's Controller cuts it with `runtime.orbit_loop.LoopSteps`:
  one `trainer.train(n)` per call, the row's work between calls."""
  calls, remaining = 0, FLAGS.steps_per_loop
  with strategy.scope():
    start = time.perf_counter()
    while remaining:
      steps = schedule(trainer.global_step.numpy())
      trainer.train(tf.constant(steps, tf.int32))
      for hook in hooks:
        hook()
      calls, remaining = calls + 1, remaining - steps
    return (time.perf_counter() - start) / FLAGS.steps_per_loop, calls


def host_seconds_per_call(strategy, trainer, schedule, hooks):
  """Median host cost of a call: the trainer's loop for zero steps (its
  dispatch, the loop's entry and exit, its logs), and the work between two
  calls."""
  zero = tf.constant(0, tf.int32)
  times = []
  with strategy.scope():
    for _ in range(FLAGS.host_reps):
      start = time.perf_counter()
      schedule(trainer.global_step.numpy())
      trainer.train(zero)
      for hook in hooks:
        hook()
      times.append(time.perf_counter() - start)
  return float(np.median(times))


def main(argv):
  del argv
  config, strategy, trainer = build_trainer()
  data = config.task.train_data
  print(f"experiment {FLAGS.experiment}: batch {data.global_batch_size}, "
        f"sequence {data.seq_length}; {FLAGS.rounds} interleaved rounds of one "
        f"{FLAGS.steps_per_loop}-step loop and {FLAGS.host_reps} zero-step "
        f"calls per row; TF {tf.__version__}, {os.cpu_count()} CPUs",
        flush=True)
  rows = variants(trainer)
  for _, schedule, hooks in rows:  # compile, and let each schedule settle
    time_loop(strategy, trainer, schedule, hooks)
  steps, calls, hosts = ({name: [] for name, _, _ in rows} for _ in range(3))
  for r in range(FLAGS.rounds):
    for name, schedule, hooks in rows:
      step, count = time_loop(strategy, trainer, schedule, hooks)
      steps[name].append(step)
      calls[name].append(count)
      hosts[name].append(
          host_seconds_per_call(strategy, trainer, schedule, hooks))
    print(f"  round {r + 1}/{FLAGS.rounds} done", flush=True)
  step_time = float(np.median([t for name in steps for t in steps[name]]))
  floor = float(np.median(steps["one call per loop"]))
  results = []
  print(f"\nstep time (median over every loop): {1000 * step_time:.1f} ms")
  print("| stop checks | steps per call | host ms per call | host overhead "
        "| ms/step (whole loops) | vs one call per loop |")
  print("| --- | --- | --- | --- | --- | --- |")
  for name, _, _ in rows:
    per_call = FLAGS.steps_per_loop / float(np.median(calls[name]))
    host = float(np.median(hosts[name]))
    overhead = host / (per_call * step_time)
    loop_step = float(np.median(steps[name]))
    results.append(dict(row=name, steps_per_call=per_call,
                        host_seconds_per_call=host, host_overhead=overhead,
                        loop_step_seconds=loop_step,
                        loops=steps[name], calls=calls[name]))
    print(f"| {name} | {per_call:.1f} | {1000 * host:.3f} | "
          f"{100 * overhead:.3f}% | {1000 * loop_step:.1f} | "
          f"{100 * (loop_step / floor - 1):+.1f}% |")
  print("\nhost overhead = host ms per call / (steps per call x step time)")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(experiment=FLAGS.experiment,
                     steps_per_loop=FLAGS.steps_per_loop,
                     step_seconds=step_time, rows=results), f, indent=1)


if __name__ == "__main__":
  import bench_command  # pylint: disable=g-import-not-at-top
  bench_command.run(main)

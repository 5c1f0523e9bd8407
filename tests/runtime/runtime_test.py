"""The shared training runtime: strategies, process settings, preemption,
the loop's device calls and saves, asynchronous checkpoints, checkpoint
temporaries; the one line of a lost worker."""
import json
import os
import signal
import time

import numpy as np
import orbit
import pytest
import tensorflow as tf
import tf_keras
from official.common import distribute_utils
from tensorflow.python.framework import config as tf_config

from rembert_tf.common import errors
from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.pretraining import run_failures
from rembert_tf.runtime import orbit_loop
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies


# --- Strategies ---------------------------------------------------------------
def test_one_device_and_default_strategies():
  one = strategies.make_strategy("one_device")
  assert isinstance(one, tf.distribute.OneDeviceStrategy)
  assert one.num_replicas_in_sync == 1
  assert "CPU:0" in one.extended.worker_devices[0]
  assert strategies.make_strategy("default") is tf.distribute.get_strategy()
  assert not strategies.is_multi_worker(one)
  assert strategies.is_chief(one)


def test_xla_is_the_default_on_tpus_and_gpus_only():
  has_gpu = bool(tf.config.list_physical_devices("GPU"))
  assert strategies.jit_compile_default(
      strategies.make_strategy("one_device")) is has_gpu
  assert strategies.jit_compile_default(tf.distribute.get_strategy()) is has_gpu

  class OnDevices:  # what a TPU or GPU strategy reports of its replicas
    def __init__(self, *devices):
      self.extended = type("Extended", (), {"worker_devices": devices})()

  worker = "/job:worker/replica:0/task:0/device:"
  assert strategies.jit_compile_default(OnDevices(worker + "TPU:0",
                                                  worker + "TPU:1"))
  assert strategies.jit_compile_default(OnDevices(worker + "GPU:0"))
  assert not strategies.jit_compile_default(OnDevices(worker + "CPU:0"))


def test_every_name_reaches_model_garden_under_its_name(monkeypatch):
  seen = []

  def fake(distribution_strategy="mirrored", num_gpus=0, **kwargs):
    seen.append((distribution_strategy, num_gpus, kwargs))
    return distribution_strategy

  monkeypatch.setattr(distribute_utils, "get_distribution_strategy", fake)
  monkeypatch.setenv("TPU_NAME", "local")
  for name in strategies.STRATEGIES:
    strategies.make_strategy(name)
  # No GPU here: Model Garden mirrors over the CPU.
  assert seen == [("one_device", 0, {}), ("mirrored", 0, {}),
                  ("multi_worker_mirrored", 0, {}),
                  ("tpu", 0, {"tpu_address": ""}), ("off", 0, {})]


def test_unknown_strategy_is_one_line():
  with pytest.raises(strategies.StrategyError) as e:
    strategies.make_strategy("gpus")
  assert errors.one_line(e.value) == (
      "--strategy 'gpus': expected one of one_device, mirrored, "
      "multi_worker_mirrored, tpu, default.")


def test_tpu_strategy_is_built_by_model_garden(monkeypatch):
  calls = []

  def fake(name, **kwargs):
    calls.append((name, kwargs))
    return "a TPUStrategy"

  monkeypatch.setattr(distribute_utils, "get_distribution_strategy", fake)
  assert strategies.make_strategy("tpu", tpu="grpc://10.0.0.2:8470") == "a TPUStrategy"
  monkeypatch.setenv("TPU_NAME", "local")        # as on a TPU VM
  assert strategies.make_strategy("tpu") == "a TPUStrategy"
  assert calls == [("tpu", {"tpu_address": "grpc://10.0.0.2:8470"}),
                   ("tpu", {"tpu_address": ""})]


def test_tpu_strategy_errors_are_one_line(monkeypatch):
  for key in ("TPU_NAME", "COLAB_TPU_ADDR", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
    monkeypatch.delenv(key, raising=False)
  with pytest.raises(strategies.StrategyError, match="no TPU found"):
    strategies.make_strategy("tpu")

  def unreachable(name, **kwargs):
    raise ValueError("Please provide a TPU Name to connect to.")

  monkeypatch.setattr(distribute_utils, "get_distribution_strategy", unreachable)
  with pytest.raises(strategies.StrategyError) as e:
    strategies.make_strategy("tpu", tpu="my-tpu")
  assert "--tpu my-tpu: cannot connect" in errors.one_line(e.value)
  assert isinstance(e.value, errors.RemBertError)


def test_tpu_strategy_without_a_tpu_fails_at_once(monkeypatch):
  for key in ("TPU_NAME", "COLAB_TPU_ADDR", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
    monkeypatch.delenv(key, raising=False)
  start = time.time()
  with pytest.raises(strategies.StrategyError, match="no TPU found"):
    strategies.make_strategy("tpu")
  assert time.time() - start < 2


# --- Process settings -----------------------------------------------------------
def test_an_unknown_precision_is_one_line():
  with pytest.raises(errors.UsageError,
                     match="--mixed_precision 'float16': expected float32 or "
                     "mixed_bfloat16"):
    with process_settings.training_settings("float16"):
      pass


def test_training_settings_set_and_restore_everything():
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  assert not tf_config.is_op_determinism_enabled()
  with process_settings.training_settings(
      "mixed_bfloat16", deterministic=True, seed=5,
      checkpointed_dropout_generators=True):
    assert tf_keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert tf_config.is_op_determinism_enabled()
    assert tf_keras.backend.experimental.is_tf_random_generator_enabled()
    first = (np.random.rand(), tf.random.uniform([3]).numpy())
  with process_settings.training_settings("float32", seed=5):
    second = (np.random.rand(), tf.random.uniform([3]).numpy())
  assert first[0] == second[0]
  np.testing.assert_array_equal(first[1], second[1])
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  assert not tf_config.is_op_determinism_enabled()
  assert not tf_keras.backend.experimental.is_tf_random_generator_enabled()


def test_training_settings_restore_after_an_error():
  with pytest.raises(RuntimeError):
    with process_settings.training_settings("mixed_bfloat16", deterministic=True):
      raise RuntimeError("boom")
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  assert not tf_config.is_op_determinism_enabled()


# --- Preemption -------------------------------------------------------------------
def test_sigterm_sets_the_flag_and_the_handler_comes_back():
  before = signal.getsignal(signal.SIGTERM)
  with preemption.sigterm_stop_flag() as stop:
    assert not stop.is_set()
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.wait(timeout=5)
  assert signal.getsignal(signal.SIGTERM) == before


def test_preempted_error_names_the_checkpoint_and_exits_42():
  error = preemption.TrainingPreempted.after_save("/m/ckpt-7", 7)
  assert str(error) == ("SIGTERM received: saved /m/ckpt-7 at step 7 and "
                        "stopped; run the same command again to resume.")
  assert (error.step, error.checkpoint_path) == (7, "/m/ckpt-7")
  assert error.exit_code == errors.EXIT_PREEMPTED == 42
  assert isinstance(error, errors.RemBertError)


def test_no_multi_worker_stop_on_one_host():
  step = tf.Variable(0, dtype=tf.int64)
  one_device = strategies.make_strategy("one_device")
  assert preemption.stop_actions(
      one_device, None, lambda: "ram://runtime_test/ckpt-1", step) == []
  assert strategies.process_label() == ""


def test_preempted_error_of_a_worker_names_the_cause():
  error = preemption.TrainingPreempted.after_save(
      "/m/ckpt-9", 9, cause="a worker received SIGTERM")
  assert str(error).startswith("a worker received SIGTERM: saved /m/ckpt-9 at "
                               "step 9 and stopped")


class _CountingTrainer(orbit.AbstractTrainer):
  """Steps that only count: orbit's loop without a model."""

  def __init__(self):
    self.global_step = tf.Variable(0, dtype=tf.int64)

  def train(self, num_steps):
    self.global_step.assign_add(tf.cast(num_steps, tf.int64))
    return {}


def _controller(tmp_path, stop, actions=()):
  """orbit's Controller as the trainers build it: loops cut at multiples of
  steps_per_loop 2 and checkpoint_interval 3, the saves and the SIGTERM stop
  as train actions, a manager with no interval of its own."""
  trainer = _CountingTrainer()
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(step=trainer.global_step), str(tmp_path),
      max_to_keep=5, step_counter=trainer.global_step, checkpoint_interval=0)
  saves = orbit_loop.Checkpoints(3)
  saves.attach(manager, trainer.global_step)
  stops = preemption.stop_actions(
      tf.distribute.get_strategy(), stop, lambda: saves.save(final=True),
      trainer.global_step)
  controller = orbit.Controller(
      trainer=trainer, global_step=trainer.global_step,
      steps_per_loop=orbit_loop.LoopSteps(2, 3), checkpoint_manager=manager,
      train_actions=[*actions, saves, *stops])
  return controller, saves


def test_a_sigterm_action_saves_the_step_reached_then_raises(tmp_path):
  with preemption.sigterm_stop_flag() as stop:
    controller, _ = _controller(
        tmp_path, stop, [lambda _: os.kill(os.getpid(), signal.SIGTERM)])
    with pytest.raises(preemption.TrainingPreempted) as e:
      controller.train(steps=8)
  # The first device call runs one step (it compiles); SIGTERM after it.
  assert (e.value.step, e.value.checkpoint_path) == (1, str(tmp_path / "ckpt-1"))
  assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-1")


def test_saves_land_on_multiples_of_the_interval(tmp_path):
  with preemption.sigterm_stop_flag() as stop:
    controller, saves = _controller(tmp_path, stop)
    controller.train(steps=8)
    saves.save(final=True)
  assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == [
      "ckpt-3.index", "ckpt-6.index", "ckpt-8.index"]


def test_loops_end_at_multiples_and_calls_fit_the_seconds(monkeypatch):
  clock = [0.0]
  monkeypatch.setattr(orbit_loop.time, "monotonic", lambda: clock[0])
  steps = orbit_loop.LoopSteps(1000, 250, seconds=1.0)
  calls, step = [], 0
  for seconds_per_step in (30.0, 1 / 64, 1 / 64, 1 / 64, 1 / 64, 1 / 64):
    calls.append(steps(step))
    step += calls[-1]
    clock[0] += calls[-1] * seconds_per_step
  # The first call compiles (one step); then at most 8x the call before,
  # about a second of steps, never past a multiple of 250.
  assert calls == [1, 1, 8, 64, 64, 64]
  assert steps(240) == 10
  clock[0] += 10 * 0.25                      # the machine got slower
  assert steps(250) == 4
  fixed = orbit_loop.LoopSteps(4, 0, fixed_steps=10)
  assert [fixed(0), fixed(2)] == [4, 2]      # to the end of the loop at step 4


# --- The shared loop's progress line ------------------------------------------------
def test_one_progress_line_per_loop_for_both_trainers():
  step = tf.Variable(2, dtype=tf.int64)
  lines = []
  pretraining = orbit_loop.ProgressPrinter(
      step, 300, lines.append, accuracy_key="masked_lm_accuracy",
      accuracy_name="mlm_acc", clock=iter([0.0, 10.0]).__next__)
  finetuning = orbit_loop.ProgressPrinter(
      step, 300, lines.append, prefix="[finetune] xnli lr=1e-05 seed=0: ",
      batch_size=8, clock=iter([0.0, 10.0]).__next__)
  logs = {"training_loss": 5.21, "masked_lm_accuracy": 0.11,
          "accuracy": 0.5, "learning_rate": 1e-4}
  pretraining(dict(logs, examples_per_second=812.4))
  finetuning(logs)
  step.assign(102)
  pretraining(dict(logs, examples_per_second=812.4))
  finetuning(logs)
  assert lines == [
      "step   2/300 | loss 5.2100 | mlm_acc 0.1100 | 812 ex/s | lr 1.00e-04",
      "[finetune] xnli lr=1e-05 seed=0: step   2/300 | loss 5.2100 | "
      "acc 0.5000 | lr 1.00e-04",
      "step 102/300 | loss 5.2100 | mlm_acc 0.1100 | 812 ex/s | lr 1.00e-04 | "
      "ETA 0:20",
      "[finetune] xnli lr=1e-05 seed=0: step 102/300 | loss 5.2100 | "
      "acc 0.5000 | 80 ex/s | lr 1.00e-04 | ETA 0:20"]
  assert pretraining.last_logs["global_step"] == 102
  assert finetuning.last_logs["accuracy"] == 0.5


# --- Lost peers -------------------------------------------------------------------
def two_worker_resolver(task_id):
  return tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}),
      task_type="worker", task_id=task_id)


def test_a_lost_peer_is_named_in_one_line():
  aborted = tf.errors.UnavailableError(
      None, None,
      "{{function_node __wrapped__CollectiveReduceV2_Nordering_token_1_device_"
      "/job:worker/replica:0/task:0/device:CPU:0}} Collective ops is aborted "
      "by: Error reported from /job:worker/task:1: The following tasks are "
      "unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1")
  assert run_failures.is_peer_failure(aborted)
  message = str(run_failures.LostPeerError.from_error(
      aborted, two_worker_resolver(0), "gs://b/run/ckpt-8"))
  assert message.startswith(
      "lost contact with worker 1 (10.0.0.2:2222): this worker stopped "
      "(Error reported from /job:worker/task:1: The following tasks are "
      "unhealthy")
  assert "function_node" not in message and "\n" not in message
  assert "gs://b/run/ckpt-8" in message and "Restart every worker" in message
  # The error names no peer: the others of the cluster are named.
  reset = tf.errors.UnavailableError(None, None, "Collective ops is aborted "
                                     "by: recvmsg:Connection reset by peer")
  assert str(run_failures.LostPeerError.from_error(
      reset, two_worker_resolver(1), None)).startswith(
          "lost contact with worker 0 (10.0.0.1:2222): this worker stopped "
          "(recvmsg:Connection reset by peer).")


def test_storage_errors_are_no_lost_peer():
  for error in (tf.errors.UnavailableError(None, None, "gs://b/x: HTTP 503"),
                tf.errors.ResourceExhaustedError(
                    None, None, "/job:worker/replica:0/task:0 disk full"),
                OSError(28, "No space left on device")):
    assert not run_failures.is_peer_failure(error)


def test_process_label_of_a_worker(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps(
      {"cluster": {"worker": ["a:1", "b:1"]},
       "task": {"type": "worker", "index": 1}}))
  assert strategies.process_label() == "worker1"
  monkeypatch.setenv("TF_CONFIG", json.dumps(
      {"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}))
  assert strategies.process_label() == ""


# --- Asynchronous checkpoints -------------------------------------------------------
def test_async_writes_are_waited_for_and_a_failure_is_raised(tmp_path,
                                                            monkeypatch):
  step = tf.Variable(3, dtype=tf.int64)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step),
                                       str(tmp_path), max_to_keep=2)
  path = manager.save(checkpoint_number=3,
                      options=tf.train.CheckpointOptions(enable_async=True))
  checkpoint_integrity.wait_for_writes(manager.checkpoint)
  assert tf.train.latest_checkpoint(str(tmp_path)) == path
  assert tf.train.load_variable(path, "step/.ATTRIBUTES/VARIABLE_VALUE") == 3

  from tensorflow.python.ops import gen_io_ops  # pylint: disable=g-import-not-at-top
  def full_disk(*args, **kwargs):
    raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
  monkeypatch.setattr(gen_io_ops, "merge_v2_checkpoints", full_disk)
  step.assign(4)
  manager.save(checkpoint_number=4,
               options=tf.train.CheckpointOptions(enable_async=True))
  with pytest.raises(tf.errors.ResourceExhaustedError, match="No space"):
    checkpoint_integrity.wait_for_writes(manager.checkpoint)
  assert tf.train.latest_checkpoint(str(tmp_path)) == path  # never ckpt-4


# --- Checkpoint temporaries -----------------------------------------------------
@pytest.mark.parametrize("root", ["local", "ram"])
def test_checkpoint_temporaries_are_removed(root, tmp_path):
  base = str(tmp_path) if root == "local" else "ram://runtime_test/temps"
  encoder = f"{base}/encoder"
  for path in (f"{base}/ckpt-4_temp/part-0", f"{encoder}/ckpt-4_temp/part-0",
               f"{base}/ckpt-2.index", f"{encoder}/ckpt-2.index"):
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
      f.write("x")
  removed = checkpoint_integrity.remove_temporaries([base, encoder])
  assert sorted(removed) == sorted([f"{base}/ckpt-4_temp", f"{encoder}/ckpt-4_temp"])
  assert tf.io.gfile.exists(f"{base}/ckpt-2.index")
  assert tf.io.gfile.exists(f"{encoder}/ckpt-2.index")
  assert not tf.io.gfile.glob(f"{base}/ckpt-*_temp")

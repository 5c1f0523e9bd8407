"""The `--strategy` names and the one factory every trainer uses.

Builds on Model Garden's `official.common.distribute_utils`
(`get_distribution_strategy`), which also gives TPUs the device assignment
newer generations need. What is added here: a TPU is looked for before
connecting (a clear error at once instead of a long time-out), and every
failure is one line naming the flag and the fix.

| name | strategy |
| --- | --- |
| `one_device` | `OneDeviceStrategy` on the first GPU, else the CPU |
| `mirrored` | `MirroredStrategy` over this host's GPUs (the CPU without one) |
| `multi_worker_mirrored` | `MultiWorkerMirroredStrategy` from `TF_CONFIG` (one process per host) |
| `tpu` | `TPUStrategy` (a TPU VM's own TPU, or `--tpu NAME` / `grpc://host:8470`) |
| `default` | TensorFlow's default strategy (no `tf.distribute` scope) |

Example:
```python
from rembert_tf.runtime import strategies
strategy = strategies.make_strategy("one_device")
strategy.num_replicas_in_sync                      # 1
strategies.is_multi_worker(strategy)               # False
strategies.jit_compile_default(strategy)            # False on a CPU, True on a GPU / TPU
strategies.process_label()  # 'worker1' under a TF_CONFIG naming worker 1 of 2
```
"""
import json
import os
from typing import List, Optional

import tensorflow as tf
from official.common import distribute_utils
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.distribute import multi_worker_util  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.eager import context as tf_context  # pylint: disable=g-direct-tensorflow-import

from rembert_tf.common import errors
from rembert_tf.common import fileio
# The names, defined without TensorFlow (for the commands' flags).
from rembert_tf.runtime.choices import DEFAULT_STRATEGY, STRATEGIES
from rembert_tf.runtime.choices import MODEL_GARDEN_STRATEGY_NAMES


# A worker that sends no heartbeat for this long is declared lost by the
# cluster's coordination service, which then fails every worker's pending
# collective: no worker waits longer for a dead peer. Heartbeats come from a
# thread of TensorFlow's runtime, so long steps or saves do not delay them.
WORKER_HEARTBEAT_TIMEOUT_SECONDS = 10


class StrategyError(errors.RemBertError, ValueError):
  """A strategy cannot be built; the message names the flag and the fix."""


def make_strategy(name: str = DEFAULT_STRATEGY,
                  tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The tf.distribute strategy of a `--strategy` name (see STRATEGIES).

  `tpu` is a TPU name or grpc:// address; without it the TPU attached to
  this VM is used (a TPU VM needs no `--tpu`).
  """
  if name not in STRATEGIES:
    raise StrategyError(f"--strategy {name!r}: expected one of "
                        f"{', '.join(STRATEGIES)}.")
  if name == "tpu":
    return _make_tpu_strategy(tpu)
  if name == "multi_worker_mirrored":
    _configure_worker_heartbeats(WORKER_HEARTBEAT_TIMEOUT_SECONDS)
  return distribute_utils.get_distribution_strategy(
      distribution_strategy=MODEL_GARDEN_STRATEGY_NAMES.get(name, name),
      num_gpus=len(tf.config.list_physical_devices("GPU")))


def _configure_worker_heartbeats(timeout_seconds: int) -> None:
  """Sets up the coordination service MultiWorkerMirroredStrategy starts
  (the same service, leader and jobs) with an explicit heartbeat timeout;
  the strategy keeps a service configured before it is built."""
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  spec = resolver.cluster_spec()
  jobs = [job for job in ("chief", "worker") if job in spec.jobs]
  if (resolver.task_type not in jobs
      or sum(spec.num_tasks(job) for job in jobs) < 2
      or tf_context.context().coordination_service is not None):
    return
  tf_context.context().configure_coordination_service(
      service_type="standalone",
      service_leader=multi_worker_util.coordination_leader(spec),
      coordinated_jobs=[coordination_config_pb2.CoordinatedJob(
          name=job, num_tasks=spec.num_tasks(job)) for job in jobs],
      heartbeat_timeout_in_ms=timeout_seconds * 1000)


def _tpu_hints() -> List[str]:
  """What says a TPU is in reach: its devices, or the variables that name one."""
  hints = [p for p in ("/dev/accel0", "/dev/vfio/0") if fileio.exists(p)]
  hints += [f"${k}" for k in ("TPU_NAME", "COLAB_TPU_ADDR",
                             "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")
            if os.environ.get(k)]
  return hints


def _make_tpu_strategy(tpu: Optional[str]) -> tf.distribute.Strategy:
  if not tpu and not _tpu_hints():
    raise StrategyError(
        "--strategy tpu: no TPU found on this machine (no /dev/accel*, no "
        "$TPU_NAME) and no --tpu given. On a TPU VM install the TPU build of "
        "TensorFlow (docs/cloud_tpu.md); pass --tpu <name or "
        "grpc://host:8470> for a remote TPU; or run on CPU/GPU with "
        "--strategy one_device or --strategy mirrored.")
  address = "" if tpu in (None, "", "local") else tpu
  try:
    return distribute_utils.get_distribution_strategy(
        "tpu", tpu_address=address)
  except (ValueError, RuntimeError, tf.errors.OpError) as e:
    raise StrategyError(
        f"--strategy tpu --tpu {tpu or '(this VM)'}: cannot connect to the "
        f"TPU ({errors.one_line(e)}). Check the TPU name / address and that "
        "this VM can reach it.") from None


def jit_compile_default(strategy: tf.distribute.Strategy) -> bool:
  """Whether a step compiled with XLA is the faster choice on the strategy's
  devices: yes on TPUs (which need it) and GPUs, no on CPUs, where the
  uncompiled step with padding removal runs faster (docs/performance.md)."""
  try:
    devices = strategy.extended.worker_devices
  except (RuntimeError, NotImplementedError):
    # TensorFlow's default strategy: ops go to a GPU when there is one.
    devices = [d.name for d in tf.config.list_logical_devices()]
  return any(tf.DeviceSpec.from_string(d).device_type in ("GPU", "TPU")
             for d in devices)


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
  """MultiWorkerMirroredStrategy over several processes (a TPU pod has one
  controller, so it is not)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return False
  resolver = strategy.cluster_resolver
  if resolver is None:
    return False
  spec = resolver.cluster_spec().as_dict()
  return sum(len(spec.get(job, [])) for job in ("chief", "worker")) > 1


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """The process that writes a run's files (every process but MWMS workers)."""
  return (not is_multi_worker(strategy)) or strategy.extended.should_checkpoint


def process_label() -> str:
  """`worker1` for the process TF_CONFIG names in a cluster of several
  (read from the environment, before any strategy connects); '' otherwise."""
  try:
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  except ValueError:
    return ""
  task = tf_config.get("task") or {}
  cluster = tf_config.get("cluster") or {}
  size = sum(len(tasks) for job, tasks in cluster.items()
             if job in ("chief", "worker"))
  if size < 2 or "type" not in task:
    return ""
  return f"{task['type']}{task.get('index', 0)}"

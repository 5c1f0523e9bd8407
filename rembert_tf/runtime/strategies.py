"""The `--strategy` names and their factory, Model Garden's
`distribute_utils.get_distribution_strategy`; a TPU is looked for before
connecting (a clear error instead of a long time-out).

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
strategies.jit_compile_default(strategy)           # False on a CPU
```
"""
import contextlib
import json
import os
from typing import Optional

import tensorflow as tf
from official.common import distribute_utils

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.runtime.choices import DEFAULT_STRATEGY, FLAG_SPELLING
from rembert_tf.runtime.choices import STRATEGIES

# What says a TPU is in reach: its devices, or the variables that name one.
_TPU_DEVICES = ("/dev/accel0", "/dev/vfio/0")
_TPU_VARIABLES = ("TPU_NAME", "COLAB_TPU_ADDR",
                  "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")


class StrategyError(errors.RemBertError, ValueError):
  """A strategy cannot be built; the message names the flag and the fix."""


def make_strategy(name: Optional[str] = None,
                  tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The strategy of a `--strategy` name (or Model Garden's; None:
  DEFAULT_STRATEGY); `tpu` is a TPU name or grpc:// address."""
  name = FLAG_SPELLING.get(name, name or DEFAULT_STRATEGY)
  if name not in STRATEGIES:
    raise StrategyError(f"--strategy {name!r}: expected one of "
                        f"{', '.join(STRATEGIES)}.")
  if name != "tpu":
    return distribute_utils.get_distribution_strategy(
        distribution_strategy="off" if name == "default" else name,
        num_gpus=len(tf.config.list_physical_devices("GPU")))
  if not tpu and not (any(map(fileio.exists, _TPU_DEVICES))
                      or any(map(os.environ.get, _TPU_VARIABLES))):
    raise StrategyError(
        "--strategy tpu: no TPU found on this machine (no /dev/accel*, no "
        "$TPU_NAME) and no --tpu given. On a TPU VM install the TPU build of "
        "TensorFlow (docs/cloud_tpu.md); pass --tpu <name or "
        "grpc://host:8470> for a remote TPU; or run on CPU/GPU with "
        "--strategy one_device or --strategy mirrored.")
  try:
    return distribute_utils.get_distribution_strategy(
        "tpu", tpu_address="" if tpu in (None, "", "local") else tpu)
  except (ValueError, RuntimeError, tf.errors.OpError) as e:
    raise StrategyError(
        f"--strategy tpu --tpu {tpu or '(this VM)'}: cannot connect to the "
        f"TPU ({errors.one_line(e)}). Check the TPU name / address and that "
        "this VM can reach it.") from None


def jit_compile_default(strategy: tf.distribute.Strategy) -> bool:
  """Whether XLA is the faster choice on the strategy's devices: TPUs and
  GPUs, not CPUs (docs/performance.md)."""
  try:
    devices = strategy.extended.worker_devices
  except (RuntimeError, NotImplementedError):
    # TensorFlow's default strategy: ops go to a GPU when there is one.
    devices = [d.name for d in tf.config.list_logical_devices()]
  return any(tf.DeviceSpec.from_string(d).device_type in ("GPU", "TPU")
             for d in devices)


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
  """MultiWorkerMirroredStrategy over several processes."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
      resolver is None):
    return False
  spec = resolver.cluster_spec().as_dict()
  return sum(len(spec.get(job, [])) for job in ("chief", "worker")) > 1


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """The process that writes a run's files (every process but MWMS workers)."""
  return (not is_multi_worker(strategy)) or strategy.extended.should_checkpoint


def _tf_config():
  """(task, cluster) of TF_CONFIG, each {} when unset or unreadable."""
  try:
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  except ValueError:
    config = {}
  return config.get("task") or {}, config.get("cluster") or {}


def is_chief_process() -> bool:
  """False on the non-chief workers of a multi-worker run (from TF_CONFIG)."""
  task, cluster = _tf_config()
  if task.get("type") in (None, "chief"):
    return True
  return (task.get("type") == "worker" and int(task.get("index", 0)) == 0
          and "chief" not in cluster)


def writing_shared_output(path: fileio.PathLike, chief: Optional[bool] = None):
  """`output_lock.writing_output(path)` on the chief alone (`chief` None: from
  TF_CONFIG)."""
  if chief is None:
    chief = is_chief_process()
  return output_lock.writing_output(path) if chief else contextlib.nullcontext()


def process_label() -> str:
  """`worker1` for the process TF_CONFIG names in a cluster of several, else ''."""
  task, cluster = _tf_config()
  size = sum(len(tasks) for job, tasks in cluster.items()
             if job in ("chief", "worker"))
  if size < 2 or "type" not in task:
    return ""
  return f"{task['type']}{task.get('index', 0)}"

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
```
"""
import os
from typing import List, Optional

import tensorflow as tf
from official.common import distribute_utils

from rembert_tf.common import errors
from rembert_tf.common import fileio

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu",
              "default")
DEFAULT_STRATEGY = "one_device"
# Model Garden's name for TensorFlow's default strategy.
_MODEL_GARDEN_NAMES = {"default": "off"}


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
  return distribute_utils.get_distribution_strategy(
      distribution_strategy=_MODEL_GARDEN_NAMES.get(name, name),
      num_gpus=len(tf.config.list_physical_devices("GPU")))


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

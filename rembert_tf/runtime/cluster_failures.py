"""A worker of a multi-worker job that is gone, recognised and named in one line.

When a worker dies, the others see a failed collective or coordination
service call (`UnavailableError`, `AbortedError`, ... about sockets, tasks
and heartbeats) that reads like a fault of their own. `LostPeerError` says
which peer was lost and that a restart of the whole job resumes from the
newest complete checkpoint.

Example:
<!-- snippet: not run: a fragment: `experiment`, `strategy`, `latest` come from the caller's code -->
```python
from rembert_tf.runtime import cluster_failures
try:
  experiment.run()
except tf.errors.OpError as e:
  if cluster_failures.is_lost_peer(e, strategy):
    raise cluster_failures.LostPeerError.from_error(
        e, strategy.cluster_resolver, latest) from None
  raise
```
"""
import re
from typing import List, Optional

import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.runtime import strategies

# What the text of a failed collective or coordination-service call names
# (a storage error of the same type names none of them).
_PEER_MARKERS = ("collective", "coordination", "heartbeat", "/job:")
_PEER_ERROR_TYPES = (tf.errors.UnavailableError, tf.errors.AbortedError,
                     tf.errors.DeadlineExceededError, tf.errors.CancelledError)
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
_FUNCTION_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_CAUSE_CHARACTERS = 160


class LostPeerError(errors.RemBertError, RuntimeError):
  """Another worker of a multi-worker job is gone; this one stopped."""

  @classmethod
  def from_error(cls, error: BaseException,
                 cluster_resolver: tf.distribute.cluster_resolver.ClusterResolver,
                 newest_checkpoint: Optional[str]) -> "LostPeerError":
    return cls(
        f"lost contact with {describe_peers(error, cluster_resolver)}: this worker "
        f"stopped ({_cause(error)}). The newest complete checkpoint is "
        f"{newest_checkpoint or '(none yet)'}. Restart every worker with the "
        "same command: the job resumes from there.")


def is_lost_peer(error: BaseException,
                 strategy: Optional[tf.distribute.Strategy]) -> bool:
  """True for a failed collective / coordination call of a multi-worker run."""
  return (strategy is not None and strategies.is_multi_worker(strategy)
          and is_peer_failure(error))


def is_peer_failure(error: BaseException) -> bool:
  """Whether an error is what TensorFlow raises when a peer is gone."""
  if not isinstance(error, tf.errors.OpError):
    return False
  text = str(error).lower()
  return (isinstance(error, _PEER_ERROR_TYPES)
          and any(marker in text for marker in _PEER_MARKERS))


def describe_peers(error: BaseException,
                   resolver: tf.distribute.cluster_resolver.ClusterResolver
                   ) -> str:
  """`worker 1 (127.0.0.1:2223)`: the peer the error names, else the others."""
  spec = resolver.cluster_spec().as_dict()
  own = (resolver.task_type, int(resolver.task_id))
  named = [(job, int(task)) for job, task in _TASK_NAME.findall(str(error))]
  peers = [t for t in dict.fromkeys(named) if t != own]
  if not peers:
    peers = [(job, index) for job, tasks in sorted(spec.items())
             for index in range(len(_task_list(tasks))) if (job, index) != own]
  return " or ".join(_describe(job, index, spec) for job, index in peers)


def _task_list(tasks) -> List[str]:
  return list(tasks.values()) if isinstance(tasks, dict) else list(tasks)


def _describe(job: str, index: int, spec) -> str:
  tasks = spec.get(job)
  address = None
  if isinstance(tasks, dict):
    address = tasks.get(index)
  elif tasks is not None and index < len(tasks):
    address = tasks[index]
  return f"{job} {index}" + (f" ({address})" if address else "")


def _cause(error: BaseException) -> str:
  """What TensorFlow says went wrong, without the op that saw it, shortened."""
  text = _FUNCTION_NODE.sub("", errors.one_line(error))
  text = text.split("aborted by: ", 1)[-1]
  if len(text) > _CAUSE_CHARACTERS:
    text = text[:_CAUSE_CHARACTERS - 3] + "..."
  return text

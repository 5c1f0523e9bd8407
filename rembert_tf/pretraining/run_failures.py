"""What stops a pre-training run or refuses its resume, each one line: a
non-finite loss, a lost worker, records that fail to read mid-run, a
checkpoint of another model, records of another SentencePiece model.

Builds on TensorFlow's errors and checkpoint reader and
`data.pretraining_input_pipeline`'s shard checks.

Example:
```python
import tensorflow as tf
from rembert_tf.pretraining import run_failures
error = tf.errors.UnavailableError(None, None, "gs://b/x: HTTP 503")
run_failures.is_peer_failure(error)   # False: storage, not a worker
```
"""
import collections
import hashlib
import os
import re
from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from rembert_tf.checkpoints import checkpoint_integrity as checkpoints
from rembert_tf.common import errors
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import masked_lm_task

# What a failed collective or coordination call names (storage errors don't).
_PEER_MARKERS = ("collective", "coordination", "heartbeat", "/job:")
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
# How many names of a kind a checkpoint mismatch lists before "(+N more)".
_LISTED_VARIABLES = 8


class PretrainingError(errors.RemBertError, ValueError):
  """A pre-training run cannot start or go on; the message names the cause and fix."""


class TokenizerMismatchError(PretrainingError):
  """The records were made with another SentencePiece model than model_dir's."""


class CorruptRecordsError(PretrainingError):
  """A record shard is corrupted or truncated."""


class NonFiniteLossError(errors.RemBertError, RuntimeError):
  """The training loss became NaN or inf; the last good checkpoint is kept."""

  exit_code = errors.EXIT_NON_FINITE_LOSS

  @classmethod
  def at(cls, loss, global_step: tf.Variable,
         last: Optional[str]) -> "NonFiniteLossError":
    return cls(
        f"training loss is {float(np.asarray(loss))} at step "
        f"{int(global_step.numpy())}; stopped without saving these weights. "
        f"The last good checkpoint is {last or '(none yet)'}. Lower the "
        "learning rate, raise the warmup, or check the records, then run "
        "again (it resumes from there).")


class LostPeerError(errors.RemBertError, RuntimeError):
  """Another worker of a multi-worker job is gone; this one stopped."""

  @classmethod
  def from_error(cls, error: BaseException, resolver,
                 newest_checkpoint: Optional[str]) -> "LostPeerError":
    """Names the peer the error names (else the others of the cluster)."""
    spec = resolver.cluster_spec().as_dict()
    own = (resolver.task_type, int(resolver.task_id))
    named = [(job, int(task)) for job, task in _TASK_NAME.findall(str(error))]
    peers = [t for t in dict.fromkeys(named) if t != own] or [
        (job, index) for job in sorted(spec) for index in range(len(spec[job]))
        if (job, index) != own]
    cause = re.sub(r"\{\{function_node [^}]*\}\}\s*", "",
                   errors.one_line(error)).split("aborted by: ", 1)[-1]
    return cls(
        "lost contact with " + " or ".join(
            f"{job} {index} ({spec[job][index]})" for job, index in peers) +
        f": this worker stopped ({cause[:160]}). The newest complete "
        f"checkpoint is {newest_checkpoint or '(none yet)'}. Restart every "
        "worker with the same command: the job resumes from there.")


def is_peer_failure(error: BaseException) -> bool:
  """Whether an error is what TensorFlow raises when a peer is gone."""
  return isinstance(error, (
      tf.errors.UnavailableError, tf.errors.AbortedError,
      tf.errors.DeadlineExceededError, tf.errors.CancelledError)) and any(
          marker in str(error).lower() for marker in _PEER_MARKERS)


def check_async_checkpointing(config, multi_worker: bool) -> None:
  """Refuses asynchronous checkpoints (one host's) in a multi-worker job."""
  if config.trainer.enable_async_checkpointing and multi_worker:
    raise PretrainingError(
        "trainer.enable_async_checkpointing=true writes checkpoints from one "
        "host; under --strategy multi_worker_mirrored every worker joins each "
        "save. Set trainer.enable_async_checkpointing=false for this job.")


def records_error(config, mode: str, error: Exception) -> Exception:
  """The one line naming the shard that failed to read mid-run (corrupted,
  or of another shape); else `error` itself."""
  for field, data in experiments.data_sections(config, mode):
    if isinstance(error, tf.errors.DataLossError):
      culprit = pretraining_input_pipeline.unreadable_shard(data)
      if culprit:
        return CorruptRecordsError(
            f"{field}.input_path: record shard {culprit} is corrupted or "
            "truncated. Recreate the records (rembert-create-pretraining-data "
            "--overwrite) or copy the shard again, then run the same command: "
            "it resumes from the newest checkpoint.")
    else:
      other = pretraining_input_pipeline.shard_of_other_shape(data)
      if other:
        return PretrainingError(
            f"{field}.input_path: record shard {other}; the records changed "
            "under the run. Put back records of the experiment's shape, then "
            "run the same command: it resumes from the newest checkpoint.")
  return error


def _checkpoint_keys(checkpoint: tf.train.Checkpoint, model) -> Dict[str, list]:
  """Checkpoint keys -> shapes of the model's variables in `checkpoint`, named
  as `tf.train.Checkpoint` names them (first path of a breadth-first walk)."""
  escape = lambda name: name.replace(".", "..").replace("/", ".S")
  paths, queue = {id(checkpoint): ()}, collections.deque([checkpoint])
  while queue:
    node = queue.popleft()
    for name, child in tf.train.TrackableView.children(node).items():
      if id(child) not in paths:
        paths[id(child)] = paths[id(node)] + (escape(name),)
        queue.append(child)
  return {"/".join(paths[id(v)]) + _VARIABLE_SUFFIX: list(v.shape)
          for v in model.variables if id(v) in paths}


def _listing(keys: List[str], describe: Callable[[str], str]) -> str:
  more = len(keys) - _LISTED_VARIABLES
  return (", ".join(describe(k).replace(_VARIABLE_SUFFIX, "")
                    for k in keys[:_LISTED_VARIABLES])
          + (f" (+{more} more)" if more > 0 else ""))


def variable_differences(prefix: str, trainer) -> List[str]:
  """How checkpoint `prefix`'s model variables differ from the trainer's
  model: other shapes, missing, extra."""
  expected = _checkpoint_keys(trainer.checkpoint, trainer.model)
  roots = {k.split("/")[0] for k in expected}
  reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  found = {name: shape for name, shape in
           reader.get_variable_to_shape_map().items()
           if name.endswith(_VARIABLE_SUFFIX) and ".OPTIMIZER_SLOT" not in name
           and name.split("/")[0] in roots}
  reshaped = sorted(k for k in set(expected) & set(found)
                    if list(expected[k]) != list(found[k]))
  problems = []
  if reshaped:
    problems.append("variables with other shapes: " + _listing(
        reshaped, lambda k: f"{k} {found[k]} in checkpoint vs {expected[k]} "
        "in the model"))
  for what, keys in (("model variables missing from the checkpoint",
                      set(expected) - set(found)),
                     ("checkpoint variables the model lacks",
                      set(found) - set(expected))):
    if keys:
      problems.append(f"{what}: " + _listing(sorted(keys), str))
  return problems


def sentencepiece_of(model_dir: str):
  """(sha256, file) of the SentencePiece model model_dir was trained with."""
  for name in (checkpoints.SENTENCEPIECE_FILE,
               checkpoints.SENTENCEPIECE_SHA256_FILE):
    path = os.path.join(model_dir, name)
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path, "rb") as f:
        content = f.read()
      if name == checkpoints.SENTENCEPIECE_FILE:
        return hashlib.sha256(content).hexdigest(), path
      return content.decode().strip(), path
  return None, ""


def check_sentencepiece(model_dir: str, data_config, allow_mismatch: bool,
                         warn: Callable[[str], None]) -> None:
  """Refuses a resume on records of another SentencePiece model than the
  checkpoint's; with `allow_mismatch` a warning."""
  ours, trained_with = sentencepiece_of(model_dir)
  records_sha, meta_path, named = masked_lm_task.records_sentencepiece(
      data_config)
  if not ours or not records_sha or ours == records_sha:
    return
  message = (
      f"the records were made with another SentencePiece model than this "
      f"run: {meta_path} records sha256 {records_sha}"
      f"{f' ({named})' if named else ''}, but {trained_with} (the model the "
      f"checkpoint was trained with) has sha256 {ours}.")
  if not allow_mismatch:
    raise TokenizerMismatchError(
        message + " Use records made with that model, or a new --model_dir; "
        "--allow_sentencepiece_mismatch goes on anyway.")
  warn(message + " Going on (--allow_sentencepiece_mismatch)" + (
      f"; {os.path.join(model_dir, checkpoints.SENTENCEPIECE_FILE)} is "
      f"replaced by {named}." if named else "."))

"""What stops a pre-training run, each one line naming the cause and the fix.

`PretrainingError` and its subclasses are refused starts (nothing written) or
failed writes; `NonFiniteLossError` stops training before a NaN / inf loop's
weights are saved (exit code 3); `TrainingPreempted` is the runtime's one
preempted error (exit code 42) and `LostPeerError` its report of a lost
worker of a multi-worker job (exit code 1), exported here because
pre-training raises them.

Example:
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from rembert_tf.pretraining import pretraining_errors, runner
try:
  runner.run(config, "/tmp/pretrain")
except pretraining_errors.TokenizerMismatchError as e:
  print(e)  # names both sha256s and --allow_sentencepiece_mismatch
```
"""
from rembert_tf.common import errors
from rembert_tf.runtime.cluster_failures import LostPeerError  # noqa: F401  (exported)
from rembert_tf.runtime.preemption import TrainingPreempted  # noqa: F401  (exported)


class PretrainingError(errors.RemBertError, ValueError):
  """A pre-training run cannot start or go on; the message names the cause and fix."""


class CheckpointMismatchError(PretrainingError):
  """model_dir holds a checkpoint of a different model."""


class TokenizerMismatchError(PretrainingError):
  """The records were made with another SentencePiece model than model_dir's."""


class CorruptRecordsError(PretrainingError):
  """A record shard is corrupted or truncated."""


class NonFiniteLossError(errors.RemBertError, RuntimeError):
  """The training loss became NaN or inf; the last good checkpoint is kept."""

  exit_code = errors.EXIT_NON_FINITE_LOSS

"""Asynchronous checkpoint writes: the options, and waiting until they are complete.

Builds on TensorFlow's asynchronous checkpointing (what orbit's
`Controller(enable_async_checkpointing=True)` turns on): a save copies the
variables into host memory and returns; a background thread writes the copy.
A save in flight is never visible as complete: the shards are written under
`ckpt-N_temp/` and renamed when whole, and a `CheckpointManager` records
`ckpt-N` in its `checkpoint` index (what `tf.train.latest_checkpoint` reads)
only after the write succeeded. What a trainer still has to do itself:

* wait before it reports a checkpoint or exits (the final save, a preemption
  save; a killed process loses the write in flight);
* surface a failed background write: `tf.train.Checkpoint.sync` waits but
  does not raise; `wait_for_writes` does.

The host copy costs memory: the size of every variable saved (weights and
optimizer slots), once per checkpoint object written asynchronously.

Example:
<!-- snippet: not run: a fragment: `manager` comes from the caller's code -->
```python
from rembert_tf.checkpoints import async_checkpoints
manager.save(checkpoint_number=step, options=async_checkpoints.options(True))
...  # training goes on while the checkpoint is written
async_checkpoints.wait_for_writes(manager.checkpoint)  # raises a failed write
```
"""
import tensorflow as tf


def options(enabled: bool) -> tf.train.CheckpointOptions:
  """Checkpoint options that write in the background when `enabled`."""
  return tf.train.CheckpointOptions(enable_async=enabled)


def wait_for_writes(checkpoint: tf.train.Checkpoint) -> None:
  """Returns once every write of `checkpoint` started so far is complete;
  raises the error of one that failed (OSError / tf.errors.OpError)."""
  checkpoint.sync()
  # TensorFlow keeps a background thread's error until the next save or the
  # process's exit; read it now (the helper exists once a write was async).
  helper = getattr(checkpoint, "_async_checkpointer_impl", None)
  if helper is not None:
    helper._check_async_thread_error()  # pylint: disable=protected-access

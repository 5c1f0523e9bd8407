"""One masked-LM pre-training run on JAX under Keras' BackupAndRestore, for pretraining_resume_test.py.

`python pretraining_resume_child.py RECORDS_GLOB BACKUP_DIR STEPS KILL_AT OUT`
(KERAS_BACKEND=jax): pre-trains a tiny RemBertMaskedLM for STEPS steps with
`BackupAndRestore(BACKUP_DIR, save_freq=1)`; with KILL_AT > 0 the process
SIGKILLs itself once step KILL_AT is backed up. Writes OUT (JSON): the
batches this run trained and the optimizer's step count at the end.
"""
import json
import os
import signal
import sys

import keras

from rembert_tf.keras_hub import masked_lm_pretraining
from rembert_tf.keras_hub import rembert_backbone


class KillAfter(keras.callbacks.Callback):
  """SIGKILLs this process after batch `step` (after the backup's save:
  callbacks run in list order)."""

  def __init__(self, step):
    super().__init__()
    self.step = step

  def on_train_batch_end(self, batch, logs=None):
    if self.step and batch + 1 == self.step:
      os.kill(os.getpid(), signal.SIGKILL)


class CountBatches(keras.callbacks.Callback):
  def __init__(self):
    super().__init__()
    self.batches = 0

  def on_train_batch_end(self, batch, logs=None):
    self.batches += 1


def main(records, backup_dir, steps, kill_at, out):
  keras.utils.set_random_seed(0)
  backbone = rembert_backbone.RemBertBackbone(
      vocabulary_size=2000, num_layers=1, num_heads=2, hidden_dim=16,
      intermediate_dim=32, embedding_dim=8, max_sequence_length=32)
  count = CountBatches()
  masked_lm, _ = masked_lm_pretraining.pretrain(
      records, backbone, steps, batch_size=4, seed=0, verbose=0,
      callbacks=[keras.callbacks.BackupAndRestore(backup_dir, save_freq=1),
                 count, KillAfter(kill_at)])
  with open(out, "w", encoding="utf-8") as f:
    json.dump({"batches": count.batches, "optimizer_steps": int(
        keras.ops.convert_to_numpy(masked_lm.optimizer.iterations))}, f)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
       sys.argv[5])

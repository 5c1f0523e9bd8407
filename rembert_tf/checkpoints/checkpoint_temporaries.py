"""Removing what a killed or failed checkpoint save leaves behind.

TensorFlow writes a checkpoint's shards under `PREFIX_temp/` and renames them
when the save is complete; a save that fails or is killed leaves that
directory, which no reader ever uses. Trainers remove them when a run starts
(before anything is written) and after a failed save.

Example:
```python
from rembert_tf.checkpoints import checkpoint_temporaries
checkpoint_temporaries.remove(["run", "run/encoder"])  # -> removed paths
```
"""
from typing import Iterable, List

from rembert_tf.common import fileio

CHECKPOINT_TEMP_GLOB = "ckpt-*_temp"


def remove(directories: Iterable[str]) -> List[str]:
  """Removes every `ckpt-N_temp` in `directories`; returns what was removed."""
  removed = []
  for directory in directories:
    for stale in fileio.glob(fileio.join(directory, CHECKPOINT_TEMP_GLOB)):
      fileio.rmtree(stale)
      removed.append(stale)
  return removed

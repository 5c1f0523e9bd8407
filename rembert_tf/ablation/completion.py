"""Completion markers: how the suite knows a step finished and skips it.

A step writes `<dir>/ablation_complete.json` once its outputs are whole, with
the figures later steps need; without it the step runs again.

Example:
```python
from rembert_tf.ablation import completion
completion.mark_complete("run", {"eval_masked_lm_accuracy": 0.23})
completion.read_complete("run")      # {"eval_masked_lm_accuracy": 0.23}
completion.read_complete("other")    # None: not finished
```
"""
from typing import Any, Dict, Optional

from rembert_tf.common import fileio

MARKER = "ablation_complete.json"


def mark_complete(directory, payload: Dict[str, Any]) -> None:
  fileio.makedirs(directory)
  fileio.write_json(fileio.join(directory, MARKER), payload)


def read_complete(directory) -> Optional[Dict[str, Any]]:
  """The payload of a finished step, or None when it has not finished."""
  path = fileio.join(directory, MARKER)
  return fileio.read_json(path) if fileio.exists(path) else None

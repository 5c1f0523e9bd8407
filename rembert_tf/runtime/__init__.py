"""The training runtime both trainers share: strategies, precision and seeds
(`strategies`, `process_settings`), the experiment YAML layering
(`experiment_files`), the orbit loop's device calls, saves and console line
(`orbit_loop`, `stop_checks`), SIGTERM (`preemption`) and a lost worker
(`cluster_failures`), on tf.distribute, orbit and Model Garden's runner.

Example:
```python
from rembert_tf.runtime import process_settings, strategies
strategy = strategies.make_strategy("one_device")
with process_settings.training_settings("float32", deterministic=True, seed=0):
  ...  # train under `strategy`
```
"""

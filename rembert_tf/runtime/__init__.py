"""The training runtime every trainer shares, defined once.

Pre-training (`rembert_tf.pretraining`), fine-tuning (`rembert_tf.finetuning`),
the ablation suite and retrieval take these from here and nowhere else:

| module | what it holds |
| --- | --- |
| `choices` | the `--strategy` and `--mixed_precision` names, without TensorFlow (for the flags) |
| `strategies` | the `--strategy` names and the one factory (Model Garden's `distribute_utils`) |
| `process_settings` | precision policy, op determinism and seeds for a block of work |
| `orbit_loop` | the orbit loop's shared pieces: the trainer that checks for a stop between device calls, the per-loop progress line, the experiment runner that binds the actions needing it |
| `preemption` | the SIGTERM stop flag, the stop checks it installs in a trainer, the controller that saves then stops, the multi-worker preemption hook, `TrainingPreempted` (exit code 42): every trainer's SIGTERM path |
| `stop_checks` | how many steps a device call runs between two stop checks (about a second's worth) |
| `cluster_failures` | a lost worker of a multi-worker job, recognised and named (`LostPeerError`) |

Example:
```python
from rembert_tf.runtime import preemption, process_settings, strategies
strategy = strategies.make_strategy("one_device")
with process_settings.training_settings("float32", deterministic=True, seed=0), \
     preemption.sigterm_stop_flag() as stop:
  ...  # train under `strategy`, save and raise TrainingPreempted once stop.is_set()
```
"""

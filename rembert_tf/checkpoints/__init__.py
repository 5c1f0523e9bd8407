"""Checkpoints, in one place: how a checkpoint directory is laid out, read,
restored into the models of `rembert_tf.modeling`, checked and written.

This package sits between the model core and its users: it imports
`rembert_tf.modeling` and `rembert_tf.common`, and every command that reads
or writes weights (pre-training, fine-tuning, export, conversion, retrieval,
the ablation suite) takes its checkpoints from here.

| module | what it holds |
| --- | --- |
| `checkpoint_layout` | the directory layout, `resolve(source)` of any checkpoint source, writing a checkpoint directory, waiting for asynchronous writes, removing a killed save's `ckpt-N_temp` |
| `checkpoint_reading` | tensors of a checkpoint by name, without building a model |
| `checkpoint_restore` | an encoder or pretrainer built from a source's config and its weights restored |
| `checkpoint_integrity` | whether a checkpoint's index and shards are complete (the newest intact one is used) |
| `checkpoint_snapshot` | a copy of a live `model_dir`'s newest intact checkpoint, held while it is read |

Example:
<!-- snippet: not run: needs a checkpoint directory -->
```python
from rembert_tf.checkpoints import checkpoint_layout, checkpoint_restore
resolved = checkpoint_layout.resolve("runs/pretrain")
config, encoder = checkpoint_restore.load_encoder("runs/pretrain")
```
"""

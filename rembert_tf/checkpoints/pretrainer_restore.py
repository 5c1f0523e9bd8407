"""Reading a checkpoint source's whole pre-trainer: the encoder and the output side.

The output side (MLM transform, output embedding and bias, output-side
layers) is only in a pre-trainer checkpoint: a pre-training `model_dir`, or
a conversion with `--with_output_side`. The optimizer and the step are never
read. The node is found by its children and read in bounded batches
(`checkpoint_reading`), as the encoder alone is (`checkpoint_restore`).

Example:
<!-- snippet: not run: needs a checkpoint directory converted with its output side -->
```python
from rembert_tf.checkpoints import pretrainer_restore
cfg, pretrainer = pretrainer_restore.load_pretrainer("converted/rembert")
```
"""
from typing import Tuple

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_pretrainer

# A node is the pre-trainer when it has these children.
_PRETRAINER_CHILDREN = frozenset({"encoder_network", "masked_lm"})


def has_output_side(source) -> bool:
  """True when the source holds a whole pretrainer (encoder + output side)."""
  prefix = checkpoint_layout.resolve(source).pretrainer_checkpoint
  return bool(prefix) and checkpoint_reading.find_node(
      checkpoint_reading.object_graph(prefix)[1],
      _PRETRAINER_CHILDREN) is not None


def restore_pretrainer(pretrainer: rembert_pretrainer.RemBertPretrainer,
                       source) -> str:
  """Reads encoder + output side (MLM head, output layers); returns the
  prefix. CheckpointError when the source has no output side."""
  resolved = checkpoint_layout.resolve(source)
  if not has_output_side(resolved):
    raise checkpoint_layout.CheckpointError(
        f"{resolved.path}: no output side (no "
        f"{checkpoint_layout.PRETRAINER_SUBDIR}/ckpt-N and no pre-training "
        "ckpt-N holding the MLM head); only the encoder can be read from it. "
        "Convert the released checkpoint with `--with_output_side`, or start "
        "from a pre-training model_dir.")
  checkpoint_reading.read_node(pretrainer, resolved.pretrainer_checkpoint,
                               _PRETRAINER_CHILDREN,
                               "pretrainer (encoder + output side)")
  return resolved.pretrainer_checkpoint


def load_pretrainer(source,
                    config: checkpoint_layout.ModelConfigLike = None
                    ) -> Tuple[rembert_config.RemBertConfig,
                               rembert_pretrainer.RemBertPretrainer]:
  """Builds the pretrainer of a checkpoint source, encoder + output side restored."""
  resolved = checkpoint_layout.resolve(source)
  cfg = checkpoint_restore.model_config_of(resolved, config)
  with checkpoint_restore.zero_initialized_variables():  # all restored below
    pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  restore_pretrainer(pretrainer, resolved)
  return cfg, pretrainer

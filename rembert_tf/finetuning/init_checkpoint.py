"""The encoder a fine-tuning run starts from (a thin layer over `modeling.checkpoints`).

Every checkpoint source `rembert_tf.modeling.checkpoints` reads is accepted (a
pre-training model_dir, a converted checkpoint directory, a checkpoint prefix,
an exported SavedModel); the output side is never loaded. Without a
checkpoint, the encoder of `model_config` starts from random weights.

Example:
```python
from rembert_tf.finetuning import init_checkpoint
cfg, encoder, source = init_checkpoint.load_encoder("converted/rembert")
```
"""
from typing import Optional, Tuple

from absl import logging

from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder


class InitCheckpointError(checkpoints.CheckpointError):
  """The init checkpoint cannot be read into the encoder."""


def load_encoder(init_checkpoint: Optional[str],
                 model_config=None) -> Tuple[rembert_config.RemBertConfig,
                                             rembert_encoder.RemBertEncoder, str]:
  """Returns (config, encoder, description of what was restored)."""
  if not init_checkpoint:
    if model_config is None:
      raise InitCheckpointError("Give --init_checkpoint, or --model_config to "
                                "fine-tune from random weights.")
    cfg = (model_config if isinstance(model_config, rembert_config.RemBertConfig)
           else rembert_config.load_model_config(model_config))
    logging.warning("No init checkpoint: fine-tuning from random weights.")
    return cfg, rembert_encoder.build_encoder(cfg), "random initialisation"
  try:
    source = checkpoints.resolve(init_checkpoint)
    cfg, encoder = checkpoints.load_encoder(source, model_config)
  except checkpoints.CheckpointError as e:
    raise InitCheckpointError(str(e)) from None
  if source.kind == "saved_model":
    return cfg, encoder, f"SavedModel {source.path}"
  return cfg, encoder, source.encoder_checkpoint

"""RemBertMaskedLMPreprocessor: strings -> masked backbone inputs and targets.

Builds on `keras_hub.models.MaskedLMPreprocessor` (pack as the text classifier
preprocessor does, then keras-hub's `MaskedLMMaskGenerator`: select
`mask_selection_rate` of the tokens, replace 80% by `[MASK]`, 10% by a random
id, keep 10%). The special pieces of `RemBertTokenizer` (padding, `[CLS]`,
`[SEP]`, `[MASK]`) are never selected, the same ids the project's
pre-training masking skips.

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertMaskedLMPreprocessor
preprocessor = RemBertMaskedLMPreprocessor.from_preset("presets/rembert",
                                                       sequence_length=128)
x, y, sample_weight = preprocessor(["The cat sleeps on the mat."])
x["mask_positions"], y          # positions and the ids they held
```
"""
import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_tokenizer


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertMaskedLMPreprocessor(keras_hub.models.MaskedLMPreprocessor):
  """RemBERT masked-LM preprocessing (arguments as keras-hub's base class)."""

  backbone_cls = rembert_backbone.RemBertBackbone
  tokenizer_cls = rembert_tokenizer.RemBertTokenizer

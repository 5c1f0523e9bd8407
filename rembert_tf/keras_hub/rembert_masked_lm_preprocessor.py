"""RemBertMaskedLMPreprocessor: strings -> masked backbone inputs and targets.

Builds on `keras_hub.models.MaskedLMPreprocessor` (BERT's 80/10/10 masking);
the special pieces are never selected, as in the project's pre-training data.

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

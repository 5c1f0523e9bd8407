import keras

from keras_hub.src.models.rembert.rembert_masked_lm_head import (
    RemBertMaskedLMHead,
)
from keras_hub.src.tests.test_case import TestCase


class RemBertMaskedLMHeadTest(TestCase):
    def test_layer_behaviors(self):
        self.run_layer_test(
            cls=RemBertMaskedLMHead,
            init_kwargs={"vocabulary_size": 50, "output_embedding_dim": 12},
            input_data={
                "inputs": keras.random.uniform(shape=(4, 10, 16)),
                "mask_positions": keras.random.randint(
                    minval=0, maxval=10, shape=(4, 5)
                ),
            },
            expected_output_shape=(4, 5, 50),
            # The transform's kernel and bias, its LayerNorm's scale and
            # offset, the decoupled output embedding and the output bias.
            expected_num_trainable_weights=6,
        )

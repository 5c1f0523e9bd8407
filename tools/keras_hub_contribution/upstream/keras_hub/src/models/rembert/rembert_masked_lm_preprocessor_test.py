import os

import pytest

from keras_hub.src.models.rembert.rembert_masked_lm_preprocessor import (
    RemBertMaskedLMPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertMaskedLMPreprocessorTest(TestCase):
    def setUp(self):
        self.tokenizer = RemBertTokenizer(
            # Generated using create_rembert_test_proto.py
            proto=os.path.join(
                self.get_test_data_dir(), "rembert_test_vocab.spm"
            )
        )
        self.init_kwargs = {
            "tokenizer": self.tokenizer,
            # Simplify our testing by masking every available token.
            "mask_selection_rate": 1.0,
            "mask_token_rate": 1.0,
            "random_token_rate": 0.0,
            "mask_selection_length": 4,
            "sequence_length": 8,
        }
        self.input_data = ["the quick brown fox"]

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=RemBertMaskedLMPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
            expected_output=(
                {
                    "token_ids": [[2, 4, 4, 4, 4, 3, 0, 0]],
                    "segment_ids": [[0, 0, 0, 0, 0, 0, 0, 0]],
                    "padding_mask": [[1, 1, 1, 1, 1, 1, 0, 0]],
                    "mask_positions": [[1, 2, 3, 4]],
                },
                [[6, 11, 9, 7]],
                [[1.0, 1.0, 1.0, 1.0]],
            ),
        )

    def test_no_masking_zero_rate(self):
        no_mask_preprocessor = RemBertMaskedLMPreprocessor(
            self.tokenizer,
            mask_selection_rate=0.0,
            mask_selection_length=4,
            sequence_length=8,
        )
        x, y, sw = no_mask_preprocessor(self.input_data)
        self.assertAllEqual(x["token_ids"], [[2, 6, 11, 9, 7, 3, 0, 0]])
        self.assertAllEqual(x["mask_positions"], [[0, 0, 0, 0]])
        self.assertAllEqual(y, [[0, 0, 0, 0]])
        self.assertAllEqual(sw, [[0.0, 0.0, 0.0, 0.0]])

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertMaskedLMPreprocessor.presets:
            self.run_preset_test(
                cls=RemBertMaskedLMPreprocessor,
                preset=preset,
                input_data=self.input_data,
            )

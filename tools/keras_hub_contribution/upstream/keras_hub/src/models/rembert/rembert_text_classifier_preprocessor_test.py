import os

import pytest

from keras_hub.src.models.rembert.rembert_text_classifier_preprocessor import (
    RemBertTextClassifierPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertTextClassifierPreprocessorTest(TestCase):
    def setUp(self):
        self.tokenizer = RemBertTokenizer(
            # Generated using create_rembert_test_proto.py
            proto=os.path.join(
                self.get_test_data_dir(), "rembert_test_vocab.spm"
            )
        )
        self.init_kwargs = {
            "tokenizer": self.tokenizer,
            "sequence_length": 8,
        }
        self.input_data = (
            ["the quick brown fox"],
            [1],  # Pass through labels.
            [1.0],  # Pass through sample_weights.
        )

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=RemBertTextClassifierPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
            expected_output=(
                {
                    "token_ids": [[2, 6, 11, 9, 7, 3, 0, 0]],
                    "segment_ids": [[0, 0, 0, 0, 0, 0, 0, 0]],
                    "padding_mask": [[1, 1, 1, 1, 1, 1, 0, 0]],
                },
                [1],
                [1.0],
            ),
        )

    def test_segment_pairs(self):
        preprocessor = RemBertTextClassifierPreprocessor(
            self.tokenizer, sequence_length=12
        )
        x = preprocessor(x=(["the quick brown fox"], ["the earth is round"]))
        self.assertAllEqual(
            x["token_ids"], [[2, 6, 11, 9, 7, 3, 6, 10, 8, 12, 3, 0]]
        )
        self.assertAllEqual(
            x["segment_ids"], [[0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0]]
        )

    def test_errors_for_2d_list_input(self):
        preprocessor = RemBertTextClassifierPreprocessor(**self.init_kwargs)
        ambiguous_input = [["one", "two"], ["three", "four"]]
        with self.assertRaises(ValueError):
            preprocessor(ambiguous_input)

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertTextClassifierPreprocessor.presets:
            self.run_preset_test(
                cls=RemBertTextClassifierPreprocessor,
                preset=preset,
                input_data=self.input_data,
            )

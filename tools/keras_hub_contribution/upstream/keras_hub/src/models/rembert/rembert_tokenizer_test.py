import os

import pytest

from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertTokenizerTest(TestCase):
    def setUp(self):
        self.init_kwargs = {
            # Generated using create_rembert_test_proto.py
            "proto": os.path.join(
                self.get_test_data_dir(), "rembert_test_vocab.spm"
            )
        }
        self.input_data = ["the quick brown fox", "the earth is round"]

    def test_tokenizer_basics(self):
        self.run_preprocessing_layer_test(
            cls=RemBertTokenizer,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
            expected_output=[[6, 11, 9, 7], [6, 10, 8, 12]],
        )

    def test_special_tokens_found_by_name(self):
        tokenizer = RemBertTokenizer(**self.init_kwargs)
        self.assertEqual(tokenizer.pad_token_id, 0)
        self.assertEqual(tokenizer.unk_token_id, 1)
        self.assertEqual(tokenizer.cls_token_id, 2)
        self.assertEqual(tokenizer.sep_token_id, 3)
        self.assertEqual(tokenizer.mask_token_id, 4)

    def test_errors_missing_special_tokens(self):
        with open(self.init_kwargs["proto"], "rb") as f:
            proto = f.read()
        with self.assertRaisesRegex(ValueError, "no \\[CLS\\] piece"):
            RemBertTokenizer(proto=proto.replace(b"[CLS]", b"[XLS]"))

    @pytest.mark.large
    def test_smallest_preset(self):
        self.run_preset_test(
            cls=RemBertTokenizer,
            preset="rembert_multi",
            input_data=["The quick brown fox."],
        )

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertTokenizer.presets:
            self.run_preset_test(
                cls=RemBertTokenizer,
                preset=preset,
                input_data=self.input_data,
            )

import os

import pytest

from keras_hub.src.models.rembert.rembert_backbone import RemBertBackbone
from keras_hub.src.models.rembert.rembert_masked_lm import RemBertMaskedLM
from keras_hub.src.models.rembert.rembert_masked_lm_preprocessor import (
    RemBertMaskedLMPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertMaskedLMTest(TestCase):
    def setUp(self):
        # Setup model.
        self.preprocessor = RemBertMaskedLMPreprocessor(
            RemBertTokenizer(
                # Generated using create_rembert_test_proto.py
                proto=os.path.join(
                    self.get_test_data_dir(), "rembert_test_vocab.spm"
                )
            ),
            # Simplify our testing by masking every available token.
            mask_selection_rate=1.0,
            mask_token_rate=1.0,
            random_token_rate=0.0,
            mask_selection_length=5,
            sequence_length=8,
        )
        self.backbone = RemBertBackbone(
            vocabulary_size=self.preprocessor.tokenizer.vocabulary_size(),
            num_layers=2,
            num_heads=2,
            hidden_dim=4,
            embedding_dim=2,
            intermediate_dim=8,
            max_sequence_length=self.preprocessor.sequence_length,
        )
        self.init_kwargs = {
            "preprocessor": self.preprocessor,
            "backbone": self.backbone,
            # The decoupled output embedding, wider than the input one.
            "output_embedding_dim": 6,
        }
        self.train_data = (
            ["the quick brown fox", "the earth is round"],  # Features.
        )
        self.input_data = self.preprocessor(*self.train_data)[0]

    def test_masked_lm_basics(self):
        self.run_task_test(
            cls=RemBertMaskedLM,
            init_kwargs=self.init_kwargs,
            train_data=self.train_data,
            expected_output_shape=(2, 5, 14),
        )

    def test_output_embedding_is_decoupled(self):
        masked_lm = RemBertMaskedLM(**self.init_kwargs)
        masked_lm(self.input_data)
        head = masked_lm.masked_lm_head
        self.assertEqual(head.output_embedding_dim, 6)
        shapes = {tuple(w.shape) for w in head.trainable_weights}
        self.assertIn((14, 6), shapes | {tuple(reversed(s)) for s in shapes})

    @pytest.mark.large
    def test_saved_model(self):
        self.run_model_saving_test(
            cls=RemBertMaskedLM,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
        )

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertMaskedLM.presets:
            self.run_preset_test(
                cls=RemBertMaskedLM,
                preset=preset,
                input_data=self.input_data,
            )

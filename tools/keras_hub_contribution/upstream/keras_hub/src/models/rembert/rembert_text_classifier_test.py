import os

import pytest

from keras_hub.src.models.rembert.rembert_backbone import RemBertBackbone
from keras_hub.src.models.rembert.rembert_text_classifier import (
    RemBertTextClassifier,
)
from keras_hub.src.models.rembert.rembert_text_classifier_preprocessor import (
    RemBertTextClassifierPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertTextClassifierTest(TestCase):
    def setUp(self):
        # Setup model.
        self.preprocessor = RemBertTextClassifierPreprocessor(
            RemBertTokenizer(
                # Generated using create_rembert_test_proto.py
                proto=os.path.join(
                    self.get_test_data_dir(), "rembert_test_vocab.spm"
                )
            ),
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
            "num_classes": 2,
        }
        self.train_data = (
            ["the quick brown fox", "the earth is round"],  # Features.
            [1, 0],  # Labels.
        )
        self.input_data = self.preprocessor(*self.train_data)[0]

    def test_classifier_basics(self):
        self.run_task_test(
            cls=RemBertTextClassifier,
            init_kwargs=self.init_kwargs,
            train_data=self.train_data,
            expected_output_shape=(2, 2),
        )

    @pytest.mark.large
    def test_saved_model(self):
        self.run_model_saving_test(
            cls=RemBertTextClassifier,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
        )

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertTextClassifier.presets:
            self.run_preset_test(
                cls=RemBertTextClassifier,
                preset=preset,
                init_kwargs={"num_classes": 2},
                input_data=self.input_data,
                expected_output_shape=(2, 2),
            )

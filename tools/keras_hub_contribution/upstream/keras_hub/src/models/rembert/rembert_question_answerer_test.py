import os

import pytest

from keras_hub.src.models.rembert.rembert_backbone import RemBertBackbone
from keras_hub.src.models.rembert.rembert_question_answerer import (
    RemBertQuestionAnswerer,
)
from keras_hub.src.models.rembert.rembert_question_answerer_preprocessor import (  # noqa: E501
    RemBertQuestionAnswererPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertQuestionAnswererTest(TestCase):
    def setUp(self):
        # Setup model.
        self.preprocessor = RemBertQuestionAnswererPreprocessor(
            RemBertTokenizer(
                # Generated using create_rembert_test_proto.py
                proto=os.path.join(
                    self.get_test_data_dir(), "rembert_test_vocab.spm"
                )
            ),
            sequence_length=12,
            doc_stride=2,
            max_query_length=4,
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
        }
        self.train_data = (
            (
                ["where is the fox", "where is the earth"],  # Questions.
                ["the quick brown fox", "the earth is round"],  # Contexts.
            ),
            ([10, 13], ["brown fox", "round"]),  # Answer starts and texts.
        )
        self.input_data = self.preprocessor(*self.train_data)[0]

    def test_question_answerer_basics(self):
        self.run_task_test(
            cls=RemBertQuestionAnswerer,
            init_kwargs=self.init_kwargs,
            train_data=self.train_data,
            expected_output_shape={
                "start_logits": (2, 12),
                "end_logits": (2, 12),
            },
        )

    @pytest.mark.large
    def test_saved_model(self):
        self.run_model_saving_test(
            cls=RemBertQuestionAnswerer,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
        )

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertQuestionAnswerer.presets:
            self.run_preset_test(
                cls=RemBertQuestionAnswerer,
                preset=preset,
                input_data=self.input_data,
            )

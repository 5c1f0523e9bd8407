import pytest
from keras import ops

from keras_hub.src.models.rembert.rembert_backbone import RemBertBackbone
from keras_hub.src.tests.test_case import TestCase


class RemBertBackboneTest(TestCase):
    def setUp(self):
        # The input embedding (4) is narrower than the blocks (8): the
        # decoupled embedding is projected up, as in the released model.
        self.init_kwargs = {
            "vocabulary_size": 10,
            "num_layers": 2,
            "num_heads": 2,
            "hidden_dim": 8,
            "intermediate_dim": 16,
            "embedding_dim": 4,
            "max_sequence_length": 5,
        }
        self.input_data = {
            "token_ids": ops.ones((2, 5), dtype="int32"),
            "segment_ids": ops.zeros((2, 5), dtype="int32"),
            "padding_mask": ops.ones((2, 5), dtype="int32"),
        }

    def test_backbone_basics(self):
        self.run_backbone_test(
            cls=RemBertBackbone,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
            expected_output_shape={
                "sequence_output": (2, 5, 8),
                "pooled_output": (2, 8),
            },
            # Below: the slowest part of the harness on a tiny model.
            run_mixed_precision_check=False,
            run_quantization_check=False,
        )

    @pytest.mark.large
    def test_precision_and_quantization(self):
        self.run_precision_test(
            RemBertBackbone, self.init_kwargs, self.input_data
        )
        self.run_quantization_test(
            RemBertBackbone(**self.init_kwargs),
            RemBertBackbone,
            self.init_kwargs,
            self.input_data,
        )

    def test_projection_only_between_different_widths(self):
        backbone = RemBertBackbone(**self.init_kwargs)
        self.assertIsNotNone(backbone.embeddings_projection)
        same_width = RemBertBackbone(
            **{**self.init_kwargs, "embedding_dim": 8}
        )
        self.assertIsNone(same_width.embeddings_projection)
        self.assertEqual(len(same_width.weights), len(backbone.weights) - 2)

    @pytest.mark.large
    def test_saved_model(self):
        self.run_model_saving_test(
            cls=RemBertBackbone,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
        )

    @pytest.mark.large
    def test_smallest_preset(self):
        self.run_preset_test(
            cls=RemBertBackbone,
            preset="rembert_multi",
            input_data={
                "token_ids": ops.array([[312, 6, 313]], dtype="int32"),
                "segment_ids": ops.zeros((1, 3), dtype="int32"),
                "padding_mask": ops.ones((1, 3), dtype="int32"),
            },
            expected_output_shape={
                "sequence_output": (1, 3, 1152),
                "pooled_output": (1, 1152),
            },
        )

    @pytest.mark.extra_large
    def test_all_presets(self):
        for preset in RemBertBackbone.presets:
            self.run_preset_test(
                cls=RemBertBackbone,
                preset=preset,
                input_data=self.input_data,
            )

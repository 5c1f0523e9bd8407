import os
import shutil

import numpy as np
import pytest

from keras_hub.src.models.backbone import Backbone
from keras_hub.src.models.rembert.rembert_backbone import RemBertBackbone
from keras_hub.src.tests.test_case import TestCase


class RemBertConverterTest(TestCase):
    """A tiny RemBERT written by transformers' own `save_pretrained`, loaded
    through `from_preset`: the same outputs as transformers'."""

    def setUp(self):
        transformers = pytest.importorskip("transformers")
        self.torch = pytest.importorskip("torch")
        self.torch.manual_seed(0)
        config = transformers.RemBertConfig(
            vocab_size=14,
            hidden_size=8,
            input_embedding_size=4,
            output_embedding_size=6,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=16,
            max_position_embeddings=16,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            pad_token_id=0,
        )
        # A classifier folder: the encoder under `rembert.`, with its pooler.
        self.model = transformers.RemBertForSequenceClassification(config)
        self.model.eval()
        self.preset = os.path.join(self.get_temp_dir(), "tiny_rembert")
        self.model.save_pretrained(self.preset)
        shutil.copy(
            # Generated using create_rembert_test_proto.py
            os.path.join(self.get_test_data_dir(), "rembert_test_vocab.spm"),
            os.path.join(self.preset, "sentencepiece.model"),
        )
        self.token_ids = np.array([[2, 6, 11, 9, 7, 3, 0]], dtype="int32")
        self.padding_mask = np.array([[1, 1, 1, 1, 1, 1, 0]], dtype="int32")
        self.segment_ids = np.array([[0, 0, 0, 1, 1, 1, 0]], dtype="int32")

    def test_backbone_equals_transformers(self):
        backbone = RemBertBackbone.from_preset(self.preset)
        self.assertEqual(backbone.embedding_dim, 4)
        self.assertEqual(backbone.hidden_dim, 8)
        outputs = backbone(
            {
                "token_ids": self.token_ids,
                "segment_ids": self.segment_ids,
                "padding_mask": self.padding_mask,
            }
        )
        with self.torch.no_grad():
            expected = self.model.rembert(
                input_ids=self.torch.tensor(self.token_ids, dtype=int),
                attention_mask=self.torch.tensor(self.padding_mask),
                token_type_ids=self.torch.tensor(self.segment_ids, dtype=int),
            )
        real = self.padding_mask[0] == 1
        self.assertAllClose(
            np.asarray(outputs["sequence_output"])[:, real],
            expected.last_hidden_state.numpy()[:, real],
            atol=1e-5,
            rtol=0,
        )
        self.assertAllClose(
            outputs["pooled_output"],
            expected.pooler_output.numpy(),
            atol=1e-5,
            rtol=0,
        )

    def test_class_detection(self):
        model = Backbone.from_preset(self.preset, load_weights=False)
        self.assertIsInstance(model, RemBertBackbone)

import os

import tensorflow as tf

from keras_hub.src.models.rembert.rembert_token_classifier_preprocessor import (  # noqa: E501
    RemBertTokenClassifierPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertTokenClassifierPreprocessorTest(TestCase):
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
        self.words = [
            ["the", "quick", "brown", "fox"],
            ["where", "is", "the", "earth"],
        ]
        self.tags = [[1, 0, 0, 5], [0, 0, 2, 0]]

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=RemBertTokenClassifierPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=(self.words, self.tags),
            expected_output=(
                {
                    "token_ids": [
                        [2, 6, 11, 9, 7, 3, 0, 0],
                        [2, 13, 8, 6, 10, 3, 0, 0],
                    ],
                    "segment_ids": [[0] * 8, [0] * 8],
                    "padding_mask": [[1] * 6 + [0] * 2, [1] * 6 + [0] * 2],
                },
                # The word's tag at its first piece, 0 elsewhere.
                [[0, 1, 0, 0, 5, 0, 0, 0], [0, 0, 0, 2, 0, 0, 0, 0]],
                # Weight 1 at each word's first piece only.
                [[0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]] * 2,
            ),
        )

    def test_unknown_and_empty_words(self):
        preprocessor = RemBertTokenClassifierPreprocessor(**self.init_kwargs)
        x, y, sw = preprocessor([["the", "", "zebra"]], [[1, 2, 3]])
        # A word without a piece gets the unknown piece, and its tag.
        self.assertAllEqual(x["token_ids"], [[2, 6, 1, 1, 3, 0, 0, 0]])
        self.assertAllEqual(y, [[0, 1, 2, 3, 0, 0, 0, 0]])
        self.assertAllEqual(sw, [[0, 1, 1, 1, 0, 0, 0, 0]])

    def test_long_sentence_keeps_whole_words(self):
        preprocessor = RemBertTokenClassifierPreprocessor(
            self.tokenizer, sequence_length=5
        )
        x, y, _ = preprocessor(self.words[:1], self.tags[:1])
        self.assertAllEqual(x["token_ids"], [[2, 6, 11, 9, 3]])
        self.assertAllEqual(y, [[0, 1, 0, 0, 0]])

    def test_one_sentence_and_ragged_batches(self):
        preprocessor = RemBertTokenClassifierPreprocessor(**self.init_kwargs)
        batch = preprocessor(self.words)
        one = preprocessor(self.words[1])
        self.assertEqual(tuple(one["token_ids"].shape), (8,))
        self.assertAllEqual(one["token_ids"], batch["token_ids"][1])
        ragged = preprocessor([["the", "fox"], ["the", "quick", "brown"]])
        self.assertAllEqual(
            ragged["token_ids"],
            [[2, 6, 7, 3, 0, 0, 0, 0], [2, 6, 11, 9, 3, 0, 0, 0]],
        )

    def test_tf_data_runs_in_graph(self):
        preprocessor = RemBertTokenClassifierPreprocessor(**self.init_kwargs)
        expected_x, expected_y, _ = preprocessor(self.words, self.tags)
        ds = tf.data.Dataset.from_tensor_slices((self.words, self.tags))
        x, y, _ = ds.batch(2).map(preprocessor).get_single_element()
        self.assertAllEqual(x["token_ids"], expected_x["token_ids"])
        self.assertAllEqual(y, expected_y)
        x, y, _ = next(iter(ds.map(preprocessor)))
        self.assertAllEqual(x["token_ids"], expected_x["token_ids"][0])
        self.assertAllEqual(y, expected_y[0])

import os

import tensorflow as tf

from keras_hub.src.models.rembert.rembert_question_answerer_preprocessor import (  # noqa: E501
    RemBertQuestionAnswererPreprocessor,
)
from keras_hub.src.models.rembert.rembert_tokenizer import RemBertTokenizer
from keras_hub.src.tests.test_case import TestCase


class RemBertQuestionAnswererPreprocessorTest(TestCase):
    def setUp(self):
        self.tokenizer = RemBertTokenizer(
            # Generated using create_rembert_test_proto.py
            proto=os.path.join(
                self.get_test_data_dir(), "rembert_test_vocab.spm"
            )
        )
        self.init_kwargs = {
            "tokenizer": self.tokenizer,
            "sequence_length": 12,
            "doc_stride": 2,
            "max_query_length": 4,
        }
        self.questions = ["where is the fox", "where is the earth"]
        self.contexts = ["the quick brown fox", "the  earth is round"]
        self.answers = ["brown fox", "round"]
        self.answer_starts = [10, 14]

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=RemBertQuestionAnswererPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=(
                (self.questions, self.contexts),
                (self.answer_starts, self.answers),
            ),
            expected_output=(
                {
                    # [CLS] question [SEP] context [SEP]
                    "token_ids": [
                        [2, 13, 8, 6, 7, 3, 6, 11, 9, 7, 3, 0],
                        [2, 13, 8, 6, 10, 3, 6, 10, 8, 12, 3, 0],
                    ],
                    "segment_ids": [[0] * 6 + [1] * 5 + [0]] * 2,
                    "padding_mask": [[1] * 11 + [0]] * 2,
                },
                # The answer's first and last piece.
                {"start_logits": [8, 9], "end_logits": [9, 9]},
            ),
        )

    def test_window_holding_the_answer(self):
        # Three context pieces a window, a new window every two pieces:
        # "brown fox" is whole in the second window only.
        preprocessor = RemBertQuestionAnswererPreprocessor(
            self.tokenizer,
            sequence_length=10,
            doc_stride=2,
            max_query_length=4,
        )
        x, y = preprocessor(
            x=(self.questions[:1], self.contexts[:1]),
            y=(self.answer_starts[:1], self.answers[:1]),
        )
        self.assertAllEqual(x["token_ids"], [[2, 13, 8, 6, 7, 3, 9, 7, 3, 0]])
        self.assertAllEqual(y["start_logits"], [6])
        self.assertAllEqual(y["end_logits"], [7])
        # Without an answer: the first window.
        x = preprocessor(x=(self.questions[:1], self.contexts[:1]))
        self.assertAllEqual(x["token_ids"], [[2, 13, 8, 6, 7, 3, 6, 11, 9, 3]])

    def test_answer_outside_every_piece(self):
        preprocessor = RemBertQuestionAnswererPreprocessor(**self.init_kwargs)
        _, y = preprocessor(
            x=(self.questions[:1], ["the fox   "]),
            y=([8], [" "]),
        )
        self.assertAllEqual(y["start_logits"], [0])
        self.assertAllEqual(y["end_logits"], [0])

    def test_one_example_and_tf_data(self):
        preprocessor = RemBertQuestionAnswererPreprocessor(**self.init_kwargs)
        batch, labels = preprocessor(
            x=(self.questions, self.contexts),
            y=(self.answer_starts, self.answers),
        )
        one = preprocessor(x=(self.questions[1], self.contexts[1]))
        self.assertEqual(tuple(one["token_ids"].shape), (12,))
        self.assertAllEqual(one["token_ids"], batch["token_ids"][1])
        ds = tf.data.Dataset.from_tensor_slices(
            ((self.questions, self.contexts), (self.answer_starts, self.answers))
        )
        x, y = next(iter(ds.skip(1).map(lambda x, y: preprocessor(x=x, y=y))))
        self.assertAllEqual(x["token_ids"], batch["token_ids"][1])
        self.assertAllEqual(y["start_logits"], labels["start_logits"][1])
        x, y = ds.batch(2).map(preprocessor).get_single_element()
        self.assertAllEqual(x["segment_ids"], batch["segment_ids"])
        self.assertAllEqual(y["end_logits"], labels["end_logits"])

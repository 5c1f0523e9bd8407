"""The data engine's output for a fixed input and seed, pinned byte for byte.

The SentencePiece training sample and the pre-training records of a small
fixed corpus (two languages, two files each, cut from the demo corpus) have
the digests below on every engine: the local processes (one or two workers)
and Apache Beam's local runner (skipped when Apache Beam is not installed).
A change of the engine that moves one example from one shard to another, or
one line of the sample, fails here.
"""
import hashlib
import os

import pytest

import data_testlib
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import sentencepiece_sample
from rembert_tf.data import sentencepiece_training
from rembert_tf.data import text_inputs

# sha256 of each shard file (3 shards, sequence 32, 5 predictions, seed 12345).
RECORD_DIGESTS = {
    "pretrain-00000-of-00003.tfrecord":
        "8c6205cf33ff210815507726109a42d7c83498ad9e17bd104278495d03ed0716",
    "pretrain-00001-of-00003.tfrecord":
        "c1f220516d4e45ff5153e334a756d490354f4e076334ccc10d7f6dbe0b878769",
    "pretrain-00002-of-00003.tfrecord":
        "b2c9ed59fcd6ecc6f8b9e9b583a2487db45f69b27d9e6a740e6fc238c24f919a",
}
NUM_EXAMPLES = 219
# sha256 of the sample file (200 of the 320 lines, alpha 0.7, seed 0).
SAMPLE_DIGEST = "34631415a2d0e185bd4db249480e126123791b180a13bdcf2dc581e772472026"


def _sha256(path) -> str:
  return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _engine(name):
  if name == "beam":
    pytest.importorskip("apache_beam")
    return dict(runner="DirectRunner", num_workers=2)
  return dict(num_workers=int(name[-1]))


@pytest.mark.parametrize("engine", ["local-1", "local-2", "beam"])
def test_the_records_of_a_fixed_corpus_and_seed(engine, tmp_path):
  inputs = data_testlib.tiny_corpus(tmp_path / "corpus")
  meta = pretraining_record_creation.create_pretraining_data(
      inputs, tmp_path / "records", data_testlib.sentencepiece_model(),
      seq_length=32, max_predictions_per_seq=5, num_output_shards=3,
      seed=12345, verbose=False, **_engine(engine))
  shards = sorted(n for n in os.listdir(tmp_path / "records")
                  if n.endswith(".tfrecord"))
  digests = {n: _sha256(tmp_path / "records" / n) for n in shards}
  assert (digests, meta["num_examples"]) == (RECORD_DIGESTS, NUM_EXAMPLES)


@pytest.mark.parametrize("sample_with_beam", [False, True],
                         ids=["local", "beam"])
def test_the_sentencepiece_sample_of_a_fixed_corpus_and_seed(sample_with_beam,
                                                             tmp_path):
  if sample_with_beam:
    pytest.importorskip("apache_beam")
  inputs = data_testlib.tiny_corpus(tmp_path / "corpus")
  sample = tmp_path / "sample.txt"
  sentencepiece_training.draw_training_sample(
      text_inputs.resolve_inputs(inputs), str(sample),
      sentencepiece_sample.SampleOptions(sample_size=200, seed=0),
      sample_with_beam=sample_with_beam, log=lambda *a: None, inputs=inputs)
  assert _sha256(sample) == SAMPLE_DIGEST

"""The data tests' view of the shared fixtures in tests/testlib.py."""
from testlib import SENTENCEPIECE_VOCAB_SIZE  # noqa: F401
from testlib import demo_corpus_dir as corpus_dir  # noqa: F401
from testlib import sentencepiece_model  # noqa: F401
from testlib import shared_dir  # noqa: F401

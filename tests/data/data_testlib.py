"""The data tests' view of the shared fixtures in tests/testlib.py."""
from testlib import SENTENCEPIECE_VOCAB_SIZE  # noqa: F401
from testlib import demo_corpus_dir as corpus_dir  # noqa: F401
from testlib import sentencepiece_model  # noqa: F401
from testlib import shared_dir  # noqa: F401


def tiny_corpus(root):
  """2 languages x 2 files, 80 lines each (about 300 in all), cut from the demo
  corpus; returns the input pattern the data tools take."""
  for lang in ("el", "zh"):
    for k, path in enumerate(sorted((corpus_dir() / lang).glob("*.txt"))):
      lines = path.read_text(encoding="utf-8").splitlines()[:80]
      (root / lang).mkdir(parents=True, exist_ok=True)
      (root / lang / f"part-{k}.txt").write_text("\n".join(lines) + "\n",
                                                 encoding="utf-8")
  return [str(root / "{lang}" / "*.txt")]

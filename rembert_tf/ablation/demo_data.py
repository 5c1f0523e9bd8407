"""Data of the demo-scale suite: the demo corpus, its vocabulary and records,
and the demo's XNLI-like task in the XTREME `download/` layout, each written
once under `data_dir` and reused.

Example:
<!-- snippet: not run: builds the demo corpus, vocabulary and records (a minute on a CPU); tests/ablation builds them -->
```python
from rembert_tf.ablation import demo_data
paths = demo_data.prepare("/tmp/suite/data", vocab_size=2000, seq_length=64,
                          max_predictions_per_seq=10)
paths["train_records"], paths["download_dir"], paths["sp_model"]
```
"""
from typing import Callable, Dict, Optional, Sequence

from rembert_tf.ablation import completion
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import sentencepiece_training
from rembert_tf.demo import corpus as demo_corpus
from rembert_tf.demo import nli as demo_nli

DEMO_TASK = "xnli"


def prepare(data_dir: str, vocab_size: int, seq_length: int,
            max_predictions_per_seq: int, corpus_megabytes: float = 3.0,
            num_train_pairs: int = 2000, num_dev_pairs: int = 300,
            languages: Optional[Sequence[str]] = None, num_workers: int = 2,
            unmasked_train: bool = False,
            say: Callable[[str], None] = print) -> Dict[str, str]:
  """Writes what is missing under data_dir; returns the paths the suite uses.

  `unmasked_train`: training records without masks, for dynamic masking;
  held-out records are always masked once.
  """
  corpus = fileio.join(data_dir, "corpus")
  heldout = fileio.join(data_dir, "corpus_heldout")
  sp_dir = fileio.join(data_dir, "sentencepiece")
  sp_model = fileio.join(sp_dir, "sentencepiece.model")
  records = fileio.join(data_dir, "records")
  download = fileio.join(data_dir, "download")
  if completion.read_complete(corpus) is None:
    say(f"[ablation] demo corpus ({corpus_megabytes:g} MB) -> {corpus}")
    # Not marked complete: a killed run's corpus, replaced whole.
    demo_corpus.generate_corpus(corpus, target_megabytes=corpus_megabytes,
                                seed=0, overwrite=True)
    completion.mark_complete(corpus, {})
  if completion.read_complete(heldout) is None:
    demo_corpus.generate_corpus(heldout, target_megabytes=max(
        0.05, corpus_megabytes / 10), seed=1, files_per_language=1,
                                overwrite=True)
    completion.mark_complete(heldout, {})
  if not fileio.exists(sp_model):
    say(f"[ablation] SentencePiece vocabulary ({vocab_size} pieces)")
    sentencepiece_training.train_sentencepiece(
        [f"{corpus}/{{lang}}/*.txt"], sp_dir, vocab_size=vocab_size,
        sample_size=200_000, overwrite=True, verbose=False)
  for split, source, shards, unmasked in (
      ("train", corpus, 8, unmasked_train), ("eval", heldout, 1, False)):
    out = fileio.join(records, split)
    if not fileio.exists(fileio.join(out, "metadata.json")):
      say(f"[ablation] pre-training records ({split}) -> {out}")
      pretraining_record_creation.create_pretraining_data(
          [f"{source}/{{lang}}/*.txt"], out, sp_model, seq_length=seq_length,
          max_predictions_per_seq=max_predictions_per_seq, unmasked=unmasked,
          num_output_shards=shards, num_workers=num_workers, overwrite=True)
  if completion.read_complete(download) is None:
    demo_nli.write_xnli_files(download, num_train=num_train_pairs,
                              num_dev=num_dev_pairs, languages=languages)
    completion.mark_complete(download, {})
  return dict(sp_model=sp_model, download_dir=download,
              train_records=fileio.join(records, "train", "*.tfrecord"),
              eval_records=fileio.join(records, "eval", "*.tfrecord"),
              similarity_sentences=fileio.join(download, DEMO_TASK, "dev-en.tsv"))

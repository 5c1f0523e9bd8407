"""Data of the CPU-scale suite: the demo corpus, its vocabulary and records,
and the demo's XNLI-like task in the XTREME `download/` layout, each written
once under `data_dir` and reused.

Example:
<!-- snippet: not run: builds the demo corpus, vocabulary and records (a minute on a CPU); tests/ablation builds them -->
```python
from rembert_tf.ablation import demo_data, rows, suite
experiment = rows.load_row_config(rows.scale_rows("demo")[0], {})
paths = demo_data.prepare("/tmp/suite/data", experiment,
                          suite.SuiteOptions(output_dir="/tmp/suite"))
paths["train_records"], paths["xtreme_data_dir"], paths["sentencepiece_model"]
```
"""
from typing import Callable, Dict

from rembert_tf.ablation import completion
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import sentencepiece_training
from rembert_tf.demo import corpus as demo_corpus
from rembert_tf.demo import nli as demo_nli


def prepare(data_dir: str, experiment, options,
            say: Callable[[str], None] = print) -> Dict[str, str]:
  """Writes what is missing under data_dir; returns the paths the suite uses.

  `experiment`: the rows' pre-training experiment (vocabulary size, record
  layout); `options`: the suite's (corpus size, pairs, languages, workers).
  """
  corpora = {"train": fileio.join(data_dir, "corpus"),
             "heldout": fileio.join(data_dir, "corpus_heldout")}
  megabytes = options.corpus_megabytes
  for name, size, seed, files in (("train", megabytes, 0, 2),
                                  ("heldout", max(0.05, megabytes / 10), 1, 1)):
    if not fileio.exists(corpora[name]):
      say(f"[ablation] demo corpus ({size:g} MB) -> {corpora[name]}")
      demo_corpus.generate_corpus(corpora[name], target_megabytes=size,
                                  seed=seed, files_per_language=files)
  sp_dir = fileio.join(data_dir, "sentencepiece")
  sp_model = fileio.join(sp_dir, "sentencepiece.model")
  if not fileio.exists(sp_model):
    say(f"[ablation] SentencePiece vocabulary "
        f"({experiment.task.model.vocab_size} pieces)")
    sentencepiece_training.train_sentencepiece(
        [f"{corpora['train']}/{{lang}}/*.txt"], sp_dir,
        vocab_size=experiment.task.model.vocab_size, sample_size=200_000,
        overwrite=True, verbose=False)
  data = experiment.task.train_data
  for split, source, shards, unmasked in (
      ("train", corpora["train"], 8, data.use_dynamic_masking),
      ("eval", corpora["heldout"], 1, False)):
    out = fileio.join(data_dir, "records", split)
    if not fileio.exists(fileio.join(out, "metadata.json")):
      say(f"[ablation] pre-training records ({split}) -> {out}")
      pretraining_record_creation.create_pretraining_data(
          [f"{source}/{{lang}}/*.txt"], out, sp_model,
          seq_length=data.seq_length,
          max_predictions_per_seq=data.max_predictions_per_seq,
          unmasked=unmasked, num_output_shards=shards,
          num_workers=options.num_workers, overwrite=True)
  download = fileio.join(data_dir, "download")
  if completion.read_complete(download) is None:
    demo_nli.write_xnli_files(download, num_train=options.demo_train_pairs,
                              num_dev=options.demo_dev_pairs,
                              languages=options.demo_languages)
    completion.mark_complete(download, {})
  return dict(train_records=fileio.join(data_dir, "records/train/*.tfrecord"),
              eval_records=fileio.join(data_dir, "records/eval/*.tfrecord"),
              xtreme_data_dir=download, sentencepiece_model=sp_model,
              similarity_sentences=options.similarity_sentences or fileio.join(
                  download, "xnli", "dev-en.tsv"))

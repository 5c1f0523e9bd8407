"""A small XNLI-like task from the demo corpus's grammar, in the XTREME layout.

`rembert_tf.data.demo_corpus.nli_examples` renders the same premise /
hypothesis frames in every demo language with the same label, so the task is
zero-shot cross-lingual like XNLI: English train, every language dev and test.
The files are written exactly as XTREME's download leaves XNLI
(`xnli/train-en.tsv`, `xnli/dev-<lang>.tsv`: `premise<TAB>hypothesis<TAB>label`;
`xnli/test-<lang>.tsv` without labels), so the regular XNLI code path reads
them.

Example:
```python
from rembert_tf.finetuning import demo_xnli
download = demo_xnli.write_demo_xnli("/tmp/demo_download", num_train=2000)
results = demo_xnli.run_demo_xnli("/tmp/pretrain_model_dir", "/tmp/demo_ft")
print(results["markdown"])   # zero-shot accuracy per language
```
"""
import pathlib
from typing import Dict, Optional, Sequence

from rembert_tf.data import demo_corpus
from rembert_tf.modeling import checkpoints

# Distinct seeds: train / dev / test pairs are drawn independently.
_TRAIN_SEED, _DEV_SEED, _TEST_SEED = 101, 202, 303


def _clean(text: str) -> str:
  return " ".join(text.replace("\t", " ").split())


def _write_rows(path: pathlib.Path, rows, with_labels: bool):
  tmp = path.with_name(f".{path.name}.tmp")
  with tmp.open("w", encoding="utf-8") as f:
    for row in rows:
      fields = [_clean(row["premise"]), _clean(row["hypothesis"])]
      if with_labels:
        fields.append(row["label"])
      f.write("\t".join(fields) + "\n")
  tmp.replace(path)


def write_demo_xnli(download_dir, num_train: int = 2000, num_dev: int = 300,
                    num_test: int = 300,
                    languages: Optional[Sequence[str]] = None,
                    seed: int = 0) -> pathlib.Path:
  """Writes download_dir/xnli/{train-en,dev-<lang>,test-<lang>}.tsv; returns download_dir."""
  languages = list(languages or demo_corpus.LANGUAGES)
  xnli_dir = pathlib.Path(download_dir) / "xnli"
  xnli_dir.mkdir(parents=True, exist_ok=True)
  _write_rows(xnli_dir / "train-en.tsv",
              demo_corpus.nli_examples(num_train, seed=seed + _TRAIN_SEED,
                                       language="en"), with_labels=True)
  for lang in languages:
    _write_rows(xnli_dir / f"dev-{lang}.tsv",
                demo_corpus.nli_examples(num_dev, seed=seed + _DEV_SEED,
                                         language=lang), with_labels=True)
    if num_test:
      _write_rows(xnli_dir / f"test-{lang}.tsv",
                  demo_corpus.nli_examples(num_test, seed=seed + _TEST_SEED,
                                           language=lang), with_labels=False)
  return pathlib.Path(download_dir)


def run_demo_xnli(init_checkpoint, work_dir, sp_model=None,
                  num_train: int = 2000, num_dev: int = 300,
                  num_test: int = 0, languages: Optional[Sequence[str]] = None,
                  learning_rate: float = 5e-4, num_train_epochs: float = 3.0,
                  num_train_steps: Optional[int] = None,
                  train_batch_size: int = 32, seq_length: int = 64,
                  seed: int = 0, distribution_strategy=None,
                  progress=print) -> Dict:
  """Writes the demo task, fine-tunes `init_checkpoint` on English, scores all.

  `init_checkpoint`: a pre-training model_dir (or any input of
  `init_checkpoint.load_encoder`); `sp_model` defaults to its
  sentencepiece.model. Returns `run_finetuning`'s results; results["markdown"]
  is the zero-shot per-language accuracy table.
  """
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  work_dir = pathlib.Path(work_dir)
  if sp_model is None:
    sp_model = pathlib.Path(init_checkpoint) / checkpoints.SENTENCEPIECE_FILE
  download = write_demo_xnli(work_dir / "download", num_train=num_train,
                             num_dev=num_dev, num_test=num_test,
                             languages=languages, seed=seed)
  return finetuning_runner.run_finetuning(
      task="xnli", output_dir=work_dir / "finetune",
      init_checkpoint=str(init_checkpoint), data_dir=download, sp_model=sp_model,
      learning_rates=[learning_rate], num_seeds=1, seed=seed,
      num_train_epochs=num_train_epochs, num_train_steps=num_train_steps,
      train_batch_size=train_batch_size, seq_length=seq_length,
      languages=languages, splits=("dev", "test") if num_test else ("dev",),
      distribution_strategy=distribution_strategy, progress=progress)

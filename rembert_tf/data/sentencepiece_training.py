"""Trains the multilingual SentencePiece unigram model on a language-balanced sample.

Steps: (1) count the lines of every language, (2) give each language a share
q_l of the training sample by exponentially smoothed sampling (q_l ~ p_l**alpha,
mBERT's alpha=0.7; p_l from input bytes, see `text_inputs`), drawing lines
without replacement when a language has more than its share and repeating
lines when it has fewer, (3) for small vocabularies, count whole-word seed
pieces by token frequency (`write_seed_pieces`: works around SentencePiece
0.2's type-frequency seeds, which split frequent short words), (4) train a unigram model with high
character coverage and the fixed special ids of `rembert_tf.data.tokenizer`, (5) write
`<prefix>.model`, `<prefix>.vocab` and `<prefix>.json` (vocab size, special
ids, sha256), all under temporary names first.

Builds on `sentencepiece.SentencePieceTrainer` as Model Garden's
`official/nlp/data/train_sentencepiece.py` does; that script samples from TFDS
without language balancing and reserves other ids, hence this module.

Example:
```python
from rembert_tf.data import sentencepiece_training
meta = sentencepiece_training.train_sentencepiece(
    ["/tmp/corpus/{lang}/*.txt"], "/tmp/spm", vocab_size=2000)
# /tmp/spm/sentencepiece.model, .vocab, .json; meta["sha256"], meta["sample"]
```
"""
import collections
import os
import pathlib
import re
import tempfile
import time
import unicodedata
from typing import Any, Dict, Optional, Sequence

import numpy as np
import sentencepiece as spm

from rembert_tf.data import text_inputs
from rembert_tf.data import tokenizer

_WORD_START = "\u2581"  # SentencePiece's whitespace / word-start marker.


def _combining_marks_class() -> str:
  marks = [chr(c) for c in range(0x300, 0x10000)
           if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")]
  return "".join(re.escape(m) for m in marks)


# Runs of letters (with combining marks: Devanagari vowel signs, Arabic
# harakat, ...), of digits, or of other non-space characters.
_MARKS = _combining_marks_class()
_RUNS = re.compile(rf"(?:[^\W\d_]|[{_MARKS}])+|\d+|[^\w\s{_MARKS}]+|_+")
SEED_PIECES = ("auto", "words", "sentencepiece")
AUTO_WORD_SEEDS_MAX_VOCAB = 8000


def _line_counts(files, log) -> Dict[str, int]:
  counts: Dict[str, int] = {}
  for f in files:
    stats = text_inputs.ReadStats()
    for _ in text_inputs.iter_documents(f, stats):
      pass
    counts[f.language] = counts.get(f.language, 0) + stats.lines
    if stats.invalid_utf8_replacements:
      log(f"  {f.path}: {stats.invalid_utf8_replacements} invalid UTF-8 "
          "sequences replaced")
  return counts


def sample_plan(line_counts: Dict[str, int], probabilities: Dict[str, float],
                sample_size: int, rng: np.random.Generator
                ) -> Dict[str, np.ndarray]:
  """Per language: how many times each of its lines goes into the sample."""
  plan = {}
  for lang, n in line_counts.items():
    quota = int(round(sample_size * probabilities.get(lang, 0.0)))
    if n == 0 or quota == 0:
      continue
    repeats = np.full(n, quota // n, dtype=np.int64)
    remainder = quota - int(repeats.sum())
    if remainder:
      repeats[rng.choice(n, size=remainder, replace=False)] += 1
    plan[lang] = repeats
  return plan


def write_seed_pieces(sample_file, output_file, *, max_pieces: int = 200_000,
                      max_piece_length: int = 16) -> int:
  """Writes whole-word SentencePiece seed pieces (`piece<TAB>count`) by token count.

  SentencePiece's unigram trainer (0.2.x) extracts its seed pieces from the
  distinct whitespace-separated words (type frequency), so on a small or
  repetitive corpus a frequent short word ("the") can miss the vocabulary and
  be split into letters. These seeds are the corpus's words, split like
  SentencePiece pre-tokenises (letter runs apart from digits and
  punctuation; the first run of a whitespace token carries the word-start
  marker), weighted by how often they occur. Characters are always added by
  the trainer. Returns the number of seed pieces written.
  """
  counts = collections.Counter()
  with open(sample_file, encoding="utf-8") as f:
    for line in f:
      for token in line.split():
        runs = _RUNS.findall(token)
        if runs:
          counts[_WORD_START + runs[0]] += 1
          counts.update(runs[1:])
  written = 0
  with open(output_file, "w", encoding="utf-8") as f:
    for piece, count in counts.most_common():
      if len(piece) < 2 or len(piece) > max_piece_length or count < 2:
        continue
      f.write(f"{piece}\t{count}\n")
      written += 1
      if written >= max_pieces:
        break
  return written


def train_sentencepiece(inputs: Sequence[str],
                        output_dir,
                        vocab_size: int,
                        *,
                        model_prefix: str = "sentencepiece",
                        input_format: str = "auto",
                        languages: Optional[Sequence[str]] = None,
                        language_sampling_alpha: float = 0.7,
                        sample_size: int = 2_000_000,
                        character_coverage: float = 0.99995,
                        seed: int = 0,
                        num_threads: int = 0,
                        max_sentence_length: int = 8192,
                        seed_pieces: str = "auto",
                        overwrite: bool = False,
                        verbose: bool = True) -> Dict[str, Any]:
  """Trains `<output_dir>/<model_prefix>.model`; returns its metadata dict.

  Args:
    inputs: input specs (see `text_inputs.resolve_inputs`).
    output_dir: created if needed.
    vocab_size: exact vocabulary size (special pieces included).
    language_sampling_alpha: smoothing exponent of the language mix.
    sample_size: lines in the training sample (at most the total line count:
      the mix is rebalanced, low-resource lines are repeated).
    character_coverage: SentencePiece character coverage (high for many
      scripts; characters outside it become <unk>).
    num_threads: trainer threads (0: all cores).
    seed_pieces: "sentencepiece" (the library's own seed extraction, for
      large vocabularies), "words" (whole-word seeds counted by token
      frequency, `write_seed_pieces`; for small vocabularies), or "auto"
      (words when vocab_size <= AUTO_WORD_SEEDS_MAX_VOCAB).
    overwrite: replace an existing model of that prefix.
  Raises:
    text_inputs.InputError for missing / empty input, FileExistsError when the
    model exists and not overwrite, RuntimeError when SentencePiece cannot
    build `vocab_size` pieces from the sample (the message says to lower it).
  """
  log = print if verbose else (lambda *a, **k: None)
  output_dir = pathlib.Path(output_dir)
  model_path = output_dir / f"{model_prefix}.model"
  if model_path.exists() and not overwrite:
    raise FileExistsError(f"{model_path} already exists; pass --overwrite "
                          "(overwrite=True) to replace it.")
  if seed_pieces not in SEED_PIECES:
    raise ValueError(f"seed_pieces must be one of {SEED_PIECES}, got "
                     f"{seed_pieces!r}.")
  if vocab_size <= tokenizer.NUM_SPECIAL_IDS:
    raise ValueError(f"vocab_size must exceed {tokenizer.NUM_SPECIAL_IDS} "
                     f"(the special pieces), got {vocab_size}.")
  files = text_inputs.resolve_inputs(inputs, input_format, languages)
  start = time.time()
  log(f"train_sentencepiece: counting lines in {len(files)} files")
  counts = _line_counts(files, log)
  empty = sorted(l for l, n in counts.items() if n == 0)
  if empty:
    log(f"  languages without text (skipped): {', '.join(empty)}")
  total_lines = sum(counts.values())
  if total_lines == 0:
    raise text_inputs.InputError(
        f"inputs {list(inputs)} contain no text (every file is empty or "
        "blank); nothing to train on.")
  sizes = text_inputs.language_sizes(files)
  sizes = {l: (s if counts.get(l) else 0) for l, s in sizes.items()}
  probabilities = text_inputs.smoothed_language_probabilities(
      sizes, language_sampling_alpha)
  sample_size = min(sample_size, total_lines)
  rng = np.random.default_rng(seed)
  plan = sample_plan(counts, probabilities, sample_size, rng)
  output_dir.mkdir(parents=True, exist_ok=True)
  tmp_dir = pathlib.Path(tempfile.mkdtemp(prefix=f".{model_prefix}.tmp-",
                                          dir=output_dir))
  sample_file = tmp_dir / "sample.txt"
  per_language = {}
  try:
    positions = {l: 0 for l in plan}
    with open(sample_file, "w", encoding="utf-8") as out:
      for f in files:
        repeats = plan.get(f.language)
        if repeats is None:
          continue
        for document in text_inputs.iter_documents(f):
          for line in document:
            k = repeats[positions[f.language]]
            positions[f.language] += 1
            for _ in range(k):
              out.write(line.replace("\n", " ") + "\n")
    for lang in sorted(counts):
      per_language[lang] = {
          "lines": counts[lang],
          "input_bytes": sizes.get(lang, 0),
          "sampling_probability": round(probabilities.get(lang, 0.0), 6),
          "sample_lines": int(plan[lang].sum()) if lang in plan else 0,
      }
      log(f"  {lang}: {counts[lang]} lines -> {per_language[lang]['sample_lines']}"
          f" in the sample (q={probabilities.get(lang, 0.0):.3f})")
    log(f"train_sentencepiece: training a unigram model, vocab_size "
        f"{vocab_size}, on {sample_size} lines")
    tmp_prefix = tmp_dir / model_prefix
    seed_options = {}
    if seed_pieces == "words" or (seed_pieces == "auto" and
                                  vocab_size <= AUTO_WORD_SEEDS_MAX_VOCAB):
      seed_file = tmp_dir / "seed_pieces.tsv"
      write_seed_pieces(sample_file, seed_file)
      seed_options["seed_sentencepieces_file"] = str(seed_file)
    try:
      spm.SentencePieceTrainer.Train(
          input=str(sample_file), model_prefix=str(tmp_prefix),
          model_type="unigram", vocab_size=vocab_size,
          character_coverage=character_coverage,
          pad_id=tokenizer.PAD_ID, unk_id=tokenizer.UNK_ID, bos_id=-1,
          eos_id=-1, pad_piece=tokenizer.PAD_PIECE,
          unk_piece=tokenizer.UNK_PIECE,
          control_symbols=[tokenizer.CLS_PIECE, tokenizer.SEP_PIECE,
                           tokenizer.MASK_PIECE],
          input_sentence_size=0, shuffle_input_sentence=False,
          max_sentence_length=max_sentence_length,
          num_threads=num_threads or os.cpu_count() or 1,
          hard_vocab_limit=True, minloglevel=2, **seed_options)
    except RuntimeError as e:
      raise RuntimeError(
          f"SentencePiece could not train vocab_size {vocab_size} on the "
          f"sample of {inputs}: {e}. Lower --vocab_size or add text.") from None
    for suffix in (".vocab", ".model"):
      os.replace(str(tmp_prefix) + suffix,
                 output_dir / f"{model_prefix}{suffix}")
  finally:
    for p in tmp_dir.iterdir() if tmp_dir.exists() else ():
      p.unlink()
    if tmp_dir.exists():
      tmp_dir.rmdir()
  meta = tokenizer.write_tokenizer_metadata(model_path)
  log(f"train_sentencepiece: wrote {model_path} (sha256 {meta['sha256'][:12]}"
      f"...) in {time.time() - start:.1f}s")
  meta = dict(meta)
  meta["sample"] = {"alpha": language_sampling_alpha, "lines": sample_size,
                    "languages": per_language}
  return meta

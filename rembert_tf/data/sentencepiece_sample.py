"""The language-balanced training sample of the SentencePiece model.

Counts the lines of every language (`count_languages`), gives each language
a share q_l ~ p_l**alpha of the sample (`plan_sample`: lines drawn without
replacement, or repeated where a language has too few) and draws each file's
lines (`draw_file`). `draw_sample` runs these steps on `data_engine`, in this
process or as an Apache Beam pipeline: the same sample for a seed.
"""
import collections
import dataclasses
import functools
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import data_engine
from rembert_tf.data import text_inputs


@dataclasses.dataclass(frozen=True)
class SampleOptions:
  """How the language-balanced training sample is drawn."""
  language_sampling_alpha: float = 0.7
  sample_size: int = 2_000_000
  seed: int = 0
  # Languages kept from files whose documents name their language.
  languages: Optional[Tuple[str, ...]] = None
  # SentencePiece skips longer lines (its max_sentence_length): they are
  # neither counted nor sampled, so no sample repeats a line it ignores.
  max_line_bytes: int = 8192

  def check(self) -> "SampleOptions":
    if self.sample_size < 1:
      raise errors.UsageError(
          f"--sample_size must be >= 1 (lines in the training sample), got "
          f"{self.sample_size}.")
    if self.language_sampling_alpha < 0:
      raise errors.UsageError(
          f"--alpha must be >= 0, got {self.language_sampling_alpha}.")
    return self


@dataclasses.dataclass
class LanguageCounts:
  """The first pass: lines and input bytes per language (lines SentencePiece
  would skip left out; `longest_skipped`: bytes of the longest of those)."""
  lines: Dict[str, int]
  sizes: Dict[str, int]
  longest_skipped: Dict[str, int] = dataclasses.field(default_factory=dict)

  def probabilities(self, alpha: float) -> Dict[str, float]:
    """Smoothed shares of the languages that have lines."""
    sizes = {l: (s if self.lines.get(l) else 0) for l, s in self.sizes.items()}
    return text_inputs.smoothed_language_probabilities(sizes, alpha)


def line_bytes(line: str) -> int:
  return len(line.replace("\n", " ").encode("utf-8"))


def count_languages(input_file: text_inputs.InputFile,
                    log: Callable[[str], None],
                    keep: Optional[Sequence[str]] = None,
                    max_line_bytes: int = 8192) -> LanguageCounts:
  """Lines and bytes per language of one file; lines longer than
  `max_line_bytes` are not counted, and their bytes not either."""
  lines: Dict[str, int] = {}
  skipped: Dict[str, int] = {}
  skipped_bytes: Dict[str, int] = {}
  stats = text_inputs.ReadStats()
  for language, document in text_inputs.iter_language_documents(
      input_file, stats, keep):
    sizes = [line_bytes(line) for line in document]
    long_lines = [n for n in sizes if n > max_line_bytes]
    lines[language] = lines.get(language, 0) + len(sizes) - len(long_lines)
    if long_lines:
      skipped[language] = max(skipped.get(language, 0), *long_lines)
      skipped_bytes[language] = (skipped_bytes.get(language, 0) +
                                 sum(long_lines) + len(long_lines))
  lines.setdefault(input_file.language, 0)
  if stats.invalid_utf8_replacements:
    log(f"  {input_file.path}: {stats.invalid_utf8_replacements} invalid "
        "UTF-8 sequences replaced")
  lines.pop("", None)
  sizes = text_inputs.file_language_bytes(input_file, keep)
  for language, n in skipped_bytes.items():
    sizes[language] = max(sizes.get(language, 0) - n, 0)
  return LanguageCounts(lines, sizes, skipped)


@dataclasses.dataclass
class SamplePlan:
  """How often each line goes into the sample.

  Every line of language l `copies[l][0]` times, the lines at positions
  `copies[l][1]` (numbered across the files) once more; `offsets[i]`: per
  language, the position of file i's first line.
  """
  counts: LanguageCounts
  probabilities: Dict[str, float]
  copies: Dict[str, Tuple[int, np.ndarray]]
  offsets: List[Dict[str, int]]


def plan_sample(per_file: Sequence[LanguageCounts], options: SampleOptions
                ) -> SamplePlan:
  """The plan from each file's counts (in file order): each language gets
  round(sample_size * q_l) lines, drawn without replacement when it has more
  lines, repeated when it has fewer, with a generator seeded by the seed."""
  lines, sizes = collections.Counter(), collections.Counter()
  longest: Dict[str, int] = {}
  offsets = []
  for counts in per_file:
    offsets.append({l: lines[l] for l in counts.lines})
    lines.update(counts.lines)
    sizes.update(counts.sizes)
    for language, n in counts.longest_skipped.items():
      longest[language] = max(longest.get(language, 0), n)
  counts = LanguageCounts(dict(lines), dict(sizes), longest)
  if not sum(lines.values()):  # No text: check_has_text says so.
    return SamplePlan(counts, {}, {}, offsets)
  probabilities = counts.probabilities(options.language_sampling_alpha)
  sample_size = min(options.sample_size, sum(lines.values()))
  rng = np.random.default_rng(options.seed)
  copies = {}
  for lang, n in lines.items():
    quota = int(round(sample_size * probabilities.get(lang, 0.0)))
    if n == 0 or quota == 0:
      continue
    remainder = quota - (quota // n) * n
    once_more = (rng.choice(n, size=remainder, replace=False) if remainder
                 else np.zeros(0, np.int64))
    copies[lang] = (quota // n, np.sort(once_more))
  return SamplePlan(counts, probabilities, copies, offsets)


def draw_file(input_file: text_inputs.InputFile, file_index: int,
              plan: SamplePlan, options: SampleOptions
              ) -> Iterator[Tuple[str, str]]:
  """(language, line) for every copy the plan gives a line of one file, in
  the file's order; lines longer than `max_line_bytes` are left out."""
  position = dict(plan.offsets[file_index])
  # Per language: the next of its positions that gets one copy more.
  following = {l: int(np.searchsorted(extra, position.get(l, 0)))
               for l, (_, extra) in plan.copies.items()}
  for language, document in text_inputs.iter_language_documents(
      input_file, keep=options.languages):
    if language not in plan.copies:
      continue
    base, extra = plan.copies[language]
    for line in document:
      if line_bytes(line) > options.max_line_bytes:
        continue
      copies = base
      j = following[language]
      if j < len(extra) and extra[j] == position[language]:
        copies += 1
        following[language] = j + 1
      position[language] += 1
      for _ in range(copies):
        yield language, line.replace("\n", " ")


def draw_sample(files: Sequence[text_inputs.InputFile], sample_path: str,
                options: SampleOptions, *, log: Callable[..., None] = print,
                inputs: Sequence[str] = (), runner: Optional[str] = None,
                beam_args: Sequence[str] = ()) -> Dict[str, Any]:
  """Counts, plans and draws (module doc) into `sample_path` and `PATH.json`,
  locally or on the Apache Beam `runner`; returns the per-language summary."""
  if runner:
    data_engine.require_beam("--sample_with_beam")
    if (runner not in data_engine.DIRECT_RUNNERS and
        not fileio.is_remote(sample_path)):
      raise errors.UsageError(
          f"--sample_path {sample_path!r} is local, but the {runner} workers "
          "cannot write to this machine; give a shared location "
          "(--sample_path gs://bucket/spm/sample.txt).")
  log(f"train_sentencepiece: drawing the sample of {len(files)} files"
      f"{f' with Apache Beam {runner}' if runner else ''} -> {sample_path}")
  steps = [
      data_engine.Step("Count", files, functools.partial(
          _count, options=options, log=log), functools.partial(
              _plan, options=options)),
      data_engine.Step("Draw", list(enumerate(files)), functools.partial(
          _draw_part, options=options, sample_path=sample_path),
                       functools.partial(_write_sample, options=options,
                                         sample_path=sample_path))]
  try:
    data_engine.run(steps, runner=runner, beam_args=beam_args)
  finally:
    for part in fileio.glob(sample_path + ".part-*"):
      fileio.remove(part)
  summary = fileio.read_json(sample_path + ".json")
  try:
    check_has_text(summary, inputs, log, options.max_line_bytes)
  except text_inputs.TextInputError:
    for written in (sample_path, sample_path + ".json"):
      fileio.remove(written)
    raise  # also an input without any text
  return summary


def _count(input_file, unused_previous, options: SampleOptions, log):
  return count_languages(input_file, log, options.languages,
                         options.max_line_bytes)


def _plan(per_file, unused_previous, options: SampleOptions) -> SamplePlan:
  return plan_sample(per_file, options)


def _part_path(sample_path: str, file_index: int) -> str:
  return f"{sample_path}.part-{file_index:06d}"


def _draw_part(task, plan: SamplePlan, options: SampleOptions,
               sample_path: str) -> Dict[str, int]:
  """One file's drawn lines into its part of the sample; their counts."""
  file_index, input_file = task
  written: Dict[str, int] = {}
  lines = []
  for language, line in draw_file(input_file, file_index, plan, options):
    written[language] = written.get(language, 0) + 1
    lines.append(line + "\n")
  fileio.write_bytes(_part_path(sample_path, file_index),
                     "".join(lines).encode("utf-8"))
  return written


def _write_sample(per_file: List[Dict[str, int]], plan: SamplePlan,
                  options: SampleOptions, sample_path: str) -> None:
  """The parts in file order as the sample, its summary as `PATH.json`."""
  written: Dict[str, int] = {}
  with fileio.atomic_write(sample_path, "wb") as out:
    for file_index, counts in enumerate(per_file):
      part = _part_path(sample_path, file_index)
      out.write(fileio.read_bytes(part))
      fileio.remove(part)
      for language, n in counts.items():
        written[language] = written.get(language, 0) + n
  fileio.write_json(sample_path + ".json", sample_summary(
      plan.counts, plan.probabilities, written, options))


def check_has_text(summary: Dict[str, Any], inputs, log,
                   max_line_bytes: int = 8192) -> None:
  """Refuses a language whose every line SentencePiece would skip (it would
  get no piece, silently); skips languages without text, saying so."""
  languages = summary["languages"]
  only_long = sorted(l for l, m in languages.items()
                     if m["lines"] == 0 and "longest_skipped_line_bytes" in m)
  if only_long:
    lang = only_long[0]
    raise text_inputs.TextInputError(
        f"inputs {list(inputs)}: language {', '.join(only_long)}: every line "
        f"is longer than {max_line_bytes} bytes (the longest has "
        f"{languages[lang]['longest_skipped_line_bytes']}), and SentencePiece "
        "skips such lines. Split the text into lines: one sentence or "
        f"paragraph per line, or leave {lang} out (--languages).")
  empty = sorted(l for l, m in languages.items() if m["lines"] == 0)
  if empty:
    log(f"  languages without text (skipped): {', '.join(empty)}")
  if not any(m["lines"] for m in languages.values()):
    raise text_inputs.TextInputError(
        f"inputs {list(inputs)} contain no text (every file is empty or "
        "blank); nothing to train on.")


def sample_summary(counts: LanguageCounts, probabilities: Dict[str, float],
                   written: Dict[str, int], options: SampleOptions
                   ) -> Dict[str, Any]:
  """The `sample` entry of the returned metadata."""
  per_language = {}
  for lang in sorted(counts.lines):
    per_language[lang] = {
        "lines": counts.lines[lang],
        "input_bytes": counts.sizes.get(lang, 0),
        "sampling_probability": round(probabilities.get(lang, 0.0), 6),
        "sample_lines": int(written.get(lang, 0)),
    }
    if counts.longest_skipped.get(lang):
      per_language[lang]["longest_skipped_line_bytes"] = int(
          counts.longest_skipped[lang])
  return {"alpha": options.language_sampling_alpha,
          "lines": int(sum(written.values())), "languages": per_language}

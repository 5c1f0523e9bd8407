"""The language-balanced training sample of the SentencePiece model: the steps.

Counts the lines of every language (`count_languages`), gives each language
a share q_l ~ p_l**alpha of the sample (`plan_sample`: lines drawn without
replacement, or repeated where a language has too few) and draws each file's
lines into its part of the sample (`draw_part`), which `write_sample` joins
in file order. `sentencepiece_training.draw_training_sample` runs these steps
on `data_engine`, in this process or as an Apache Beam pipeline: the same
sample for a seed.
"""
import collections
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rembert_tf.common import fileio
from rembert_tf.data import text_inputs

# SentencePiece skips longer lines (its max_sentence_length, which the
# trainer is given): they are neither counted nor sampled, so no sample
# repeats a line it ignores.
MAX_LINE_BYTES = 8192

@dataclasses.dataclass(frozen=True)
class SampleOptions:
  """How the language-balanced training sample is drawn."""
  language_sampling_alpha: float = 0.7
  sample_size: int = 2_000_000
  seed: int = 0
  # Languages kept from files whose documents name their language.
  languages: Optional[Tuple[str, ...]] = None


@dataclasses.dataclass
class LanguageCounts:
  """The first pass: lines and input bytes per language (lines SentencePiece
  would skip left out; `longest_skipped`: bytes of the longest of those)."""
  lines: Dict[str, int]
  sizes: Dict[str, int]
  longest_skipped: Dict[str, int] = dataclasses.field(default_factory=dict)


def line_bytes(line: str) -> int:
  return len(line.replace("\n", " ").encode("utf-8"))


def count_languages(input_file: text_inputs.InputFile, unused_previous,
                    options: SampleOptions,
                    log: Callable[[str], None]) -> LanguageCounts:
  """Lines and bytes per language of one file; lines longer than
  MAX_LINE_BYTES are not counted, and their bytes not either."""
  lines: Dict[str, int] = {}
  skipped: Dict[str, int] = {}
  skipped_bytes: Dict[str, int] = {}
  stats = text_inputs.ReadStats()
  for language, document in input_file.language_documents(stats,
                                                          options.languages):
    sizes = [line_bytes(line) for line in document]
    long_lines = [n for n in sizes if n > MAX_LINE_BYTES]
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
  sizes = input_file.language_bytes(options.languages)
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


def plan_sample(per_file: Sequence[LanguageCounts], unused_previous,
                options: SampleOptions) -> SamplePlan:
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
  probabilities = text_inputs.smoothed_language_probabilities(
      {l: (s if lines.get(l) else 0) for l, s in counts.sizes.items()},
      options.language_sampling_alpha)
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


def part_path(sample_path: str, file_index: int) -> str:
  return f"{sample_path}.part-{file_index:06d}"


def draw_part(task, plan: SamplePlan, options: SampleOptions,
              sample_path: str) -> Dict[str, int]:
  """Every copy the plan gives a line of one file, in the file's order,
  into the file's part of the sample; the lines drawn per language."""
  file_index, input_file = task
  position = dict(plan.offsets[file_index])
  # Per language: the next of its positions that gets one copy more.
  following = {l: int(np.searchsorted(extra, position.get(l, 0)))
               for l, (_, extra) in plan.copies.items()}
  written: Dict[str, int] = {}
  drawn = []
  for language, document in input_file.language_documents(
      text_inputs.ReadStats(), options.languages):
    if language not in plan.copies:
      continue
    base, extra = plan.copies[language]
    for line in document:
      if line_bytes(line) > MAX_LINE_BYTES:
        continue
      copies = base
      j = following[language]
      if j < len(extra) and extra[j] == position[language]:
        copies += 1
        following[language] = j + 1
      position[language] += 1
      written[language] = written.get(language, 0) + copies
      drawn.extend([line.replace("\n", " ") + "\n"] * copies)
  fileio.write_bytes(part_path(sample_path, file_index),
                     "".join(drawn).encode("utf-8"))
  return written


def write_sample(per_file: List[Dict[str, int]], plan: SamplePlan,
                 options: SampleOptions, sample_path: str) -> None:
  """The parts in file order as the sample, its summary as `PATH.json`."""
  written: Dict[str, int] = {}
  with fileio.atomic_write(sample_path, "wb") as out:
    for file_index, counts in enumerate(per_file):
      part = part_path(sample_path, file_index)
      out.write(fileio.read_bytes(part))
      fileio.remove(part)
      for language, n in counts.items():
        written[language] = written.get(language, 0) + n
  fileio.write_json(sample_path + ".json", sample_summary(
      plan.counts, plan.probabilities, written, options))


def check_has_text(summary: Dict[str, Any], inputs, log) -> None:
  """Refuses a language whose every line SentencePiece would skip (it would
  get no piece, silently); skips languages without text, saying so."""
  languages = summary["languages"]
  only_long = sorted(l for l, m in languages.items()
                     if m["lines"] == 0 and "longest_skipped_line_bytes" in m)
  if only_long:
    lang = only_long[0]
    raise text_inputs.TextInputError(
        f"inputs {list(inputs)}: language {', '.join(only_long)}: every line "
        f"is longer than {MAX_LINE_BYTES} bytes (the longest has "
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

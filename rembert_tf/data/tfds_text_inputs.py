"""Pre-training text from prepared TensorFlow Datasets: `--input 'tfds:NAME/CONFIG[:SPLIT]'`.

Specs: `tfds:wiki40b/{lang}`, `tfds:c4/multilingual:{lang}`,
`en=tfds:wikipedia/20230601.en` (split `train` by default), read from the
given data dir only (`data.tfds_reader`); anything missing is one
`TfdsError` line. Each shard of a split is a unit of work (`TfdsShard`), read
as `tfds.beam.ReadFromTFDS` reads it; an example is one document, its text's
lines with known corpora's markup undone (`CORPORA`).
"""
import dataclasses
import functools
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from rembert_tf.common import fileio
from rembert_tf.data import tfds_reader
from rembert_tf.data import text_inputs

PREFIX = "tfds:"
DEFAULT_SPLIT = "train"
_LANG = "{lang}"
_SPEC = re.compile(r"^tfds:(?P<name>[^/:]+)(?:/(?P<config>[^:]+))?"
                   r"(?::(?P<split>.+))?$")
_EXPLICIT = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(tfds:.+)$")
TfdsError = tfds_reader.TfdsError


@dataclasses.dataclass(frozen=True)
class TfdsTextOptions:
  """Where TFDS inputs are prepared, and the feature holding their text."""
  data_dir: Optional[str] = None
  text_feature: Optional[str] = None   # None: "text"


@dataclasses.dataclass(frozen=True)
class CorpusMarkup:
  """How a corpus marks up its text: lines that are markup, line breaks."""
  dropped_lines: Tuple[str, ...] = ()
  line_break: str = "\n"


CORPORA = {
    "wiki40b": CorpusMarkup(dropped_lines=("_START_ARTICLE_",
                                           "_START_SECTION_",
                                           "_START_PARAGRAPH_"),
                            line_break="_NEWLINE_"),
}


def is_tfds_spec(spec: str) -> bool:
  return spec.startswith(PREFIX) or bool(_EXPLICIT.match(spec))


@functools.cache
def _builder(name: str, config: Optional[str], data_dir: str):
  """One builder per dataset per process (workers read many shards)."""
  return tfds_reader.open_builder(
      tfds_reader.SplitRef(name, config, DEFAULT_SPLIT), data_dir)


@dataclasses.dataclass(frozen=True)
class TfdsShard:
  """One shard of a prepared TFDS split: a unit of work of one language."""
  language: str
  path: str                      # tfds:NAME/CONFIG:SPLIT[Kshard]
  ref: tfds_reader.SplitRef
  shard: int
  data_dir: str
  text_feature: str
  num_bytes: int
  # What metadata.json says of an input (as of a `text_inputs.InputFile`).
  format: str = "tfds"
  language_field: Optional[str] = None
  languages_known_from_path: bool = True

  def size(self) -> int:
    return self.num_bytes

  def language_bytes(self, keep: Optional[Sequence[str]] = None
                     ) -> Dict[str, int]:
    return {self.language: self.num_bytes}

  def language_documents(self, stats: text_inputs.ReadStats,
                         keep: Optional[Sequence[str]] = None
                         ) -> Iterator[Tuple[str, List[str]]]:
    """(language, lines) of each example of the shard, in file order."""
    if keep and self.language not in keep:
      return
    markup = CORPORA.get(self.ref.name, CorpusMarkup())
    builder = _builder(self.ref.name, self.ref.config, self.data_dir)
    for raw in tfds_reader.iter_text_bytes(
        builder, f"{self.ref.split}[{self.shard}shard]", self.text_feature):
      text = text_inputs.decode_line(raw, stats)
      lines = [l.strip() for l in text.replace(markup.line_break, "\n").split(
          "\n") if l.strip() and l.strip() not in markup.dropped_lines]
      if lines:
        stats.lines += len(lines)
        stats.documents += 1
        yield self.language, lines


@dataclasses.dataclass(frozen=True)
class _Spec:
  """One parsed `tfds:` input spec."""
  text: str
  name: str
  config: Optional[str]
  split: str
  language: Optional[str]        # explicit (LANG=tfds:...), else from {lang}

  def ref(self, lang: str) -> tfds_reader.SplitRef:
    fill = lambda v: None if v is None else v.replace(_LANG, lang)  # noqa: E731
    return tfds_reader.SplitRef(self.name, fill(self.config), fill(self.split))


def _parse(spec: str) -> _Spec:
  language = None
  explicit = _EXPLICIT.match(spec)
  if explicit:
    language, spec = explicit.groups()
  match = _SPEC.match(spec)
  if not match or _LANG in match.group("name"):
    raise TfdsError(f"input {spec!r}: a TFDS input is tfds:NAME/CONFIG[:SPLIT] "
                    "(e.g. tfds:wiki40b/{lang}, tfds:c4/multilingual:{lang}).")
  parsed = _Spec(spec, match.group("name"), match.group("config"),
                 match.group("split") or DEFAULT_SPLIT, language)
  count = spec.count(_LANG)
  if count > 1 or (count and language):
    raise TfdsError(f"input {spec!r}: use {{lang}} once, or an explicit "
                    "language (en=tfds:...) without {lang}.")
  if not count and not language:
    raise TfdsError(
        f"input {spec!r} does not say its language: put {{lang}} in its "
        "config or split (tfds:wiki40b/{lang}) or prefix it with the language "
        "(en=tfds:wikipedia/20230601.en).")
  return parsed


def _pattern_regex(pattern: str) -> re.Pattern:
  prefix, _, suffix = pattern.partition(_LANG)
  return re.compile("^" + re.escape(prefix) + r"(.+?)" + re.escape(suffix) +
                    "$")


Candidates = Tuple[Dict[str, str], Dict[str, str]]  # (present, known) by lang


def _config_candidates(spec: _Spec, data_dir: str) -> Candidates:
  """{lang: config} of a `{lang}` config: the builder's configs that match,
  and those of them with a folder in data_dir (a prepared one has one)."""
  configs = tfds_reader.builder_configs(spec.name)
  if not configs:
    raise TfdsError(f"input {spec.text!r}: TFDS dataset {spec.name!r} has no "
                    "configs to put {lang} in; put it in the split or give "
                    f"the language (en=tfds:{spec.name}).")
  regex = _pattern_regex(spec.config)
  known = {m.group(1): c for c in configs for m in [regex.match(c)] if m}
  if not known:
    raise TfdsError(f"input {spec.text!r}: no config of {spec.name} matches "
                    f"{spec.config!r} (its configs include "
                    f"{', '.join(configs[:6])}).")
  folder = fileio.join(data_dir, spec.name)
  present = ({p.rstrip("/") for p in fileio.listdir(folder)}
             if fileio.isdir(folder) else set())
  return {l: c for l, c in known.items() if c in present}, known


def _split_candidates(spec: _Spec, data_dir: str) -> Candidates:
  """{lang: split} of a `{lang}` split: the config's languages (mC4's) or
  the split names that match, and those the prepared dataset has."""
  builder = tfds_reader.open_builder(
      tfds_reader.SplitRef(spec.name, spec.config, DEFAULT_SPLIT), data_dir)
  splits = set(builder.info.splits)
  config_languages = getattr(builder.builder_config, "languages", None)
  if config_languages:
    known = {l: spec.split.replace(_LANG, l) for l in config_languages}
  else:
    regex = _pattern_regex(spec.split)
    known = {m.group(1): s for s in sorted(splits)
             for m in [regex.match(s)] if m}
  return {l: s for l, s in known.items() if s in splits}, known


def _languages_of(spec: _Spec, languages: Optional[Sequence[str]],
                  data_dir: str) -> List[str]:
  """The languages a `{lang}` spec reads (checked when asked for)."""
  in_config = spec.config is not None and _LANG in spec.config
  present, known = (_config_candidates if in_config else _split_candidates)(
      spec, data_dir)
  if languages:
    missing = [l for l in languages if l not in known]
    if missing and len(missing) == len(languages):
      where = "config" if in_config else "split"
      raise TfdsError(f"input {spec.text!r}: TFDS dataset {spec.name} has no "
                      f"{where} for language(s) {', '.join(missing)}.")
    return [l for l in languages if l in known]
  if not present:
    example = spec.ref(next(iter(known)))
    raise TfdsError(
        f"input {spec.text!r}: no {spec.name} dataset matching it is prepared "
        f"in {data_dir}; prepare one, e.g. "
        f"{tfds_reader.build_command(spec.name, example.config, data_dir)}.")
  return sorted(present)


def _shards(spec: _Spec, lang: str, options: TfdsTextOptions
            ) -> List[TfdsShard]:
  """The units of one language of a spec, checked to be prepared."""
  ref = spec.ref(lang)
  builder = tfds_reader.open_split(ref, options.data_dir)
  feature = options.text_feature or "text"
  tfds_reader.require_features(
      builder, ref, [feature], fix="name the text feature with "
      "--tfds_text_feature")
  units = []
  for shard, (examples, num_bytes) in enumerate(
      tfds_reader.shard_sizes(builder, ref.split)):
    if examples:
      units.append(TfdsShard(
          language=lang, path=f"{PREFIX}{ref}[{shard}shard]", ref=ref,
          shard=shard, data_dir=options.data_dir, text_feature=feature,
          num_bytes=num_bytes or examples))
  return units


def resolve_inputs(specs: Sequence[str], input_format: str = "auto",
                   languages: Optional[Sequence[str]] = None,
                   language_field: Optional[str] = None,
                   tfds: Optional[TfdsTextOptions] = None) -> list:
  """Every input spec -> sorted units: `tfds:` specs' shards here, each
  checked to be prepared, file specs through `text_inputs.resolve_inputs`
  (the same arguments)."""
  specs = text_inputs.split_specs(specs)
  tfds_specs = [s for s in specs if is_tfds_spec(s)]
  file_specs = [s for s in specs if not is_tfds_spec(s)]
  units = []
  if file_specs or not tfds_specs:
    units += text_inputs.resolve_inputs(file_specs, input_format, languages,
                                        language_field)
  if tfds_specs:  # Without --tfds_data_dir: TFDS's default, as tfds.load's.
    tfds = tfds or TfdsTextOptions()
    tfds = dataclasses.replace(
        tfds, data_dir=tfds_reader.data_dir_or_default(tfds.data_dir))
  for spec in map(_parse, tfds_specs):
    if spec.language is None:
      spec_languages = _languages_of(spec, languages, tfds.data_dir)
    else:
      spec_languages = [] if languages and spec.language not in languages else [
          spec.language]
    for lang in spec_languages:
      units += _shards(spec, lang, tfds)
  if not units:
    raise text_inputs.TextInputError(
        f"inputs {specs} hold no data of the languages {list(languages or [])}.")
  return sorted(units, key=lambda u: (u.language, u.path))

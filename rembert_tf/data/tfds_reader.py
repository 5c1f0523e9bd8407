"""Reading prepared TensorFlow Datasets: one split of one builder, as Python values.

Builds on `tensorflow_datasets` (the builder, its features and its reader),
adding what every caller needs: data only from the given `data_dir` (local
or `gs://`; without one, TFDS's own default), never downloaded, prepared or
looked up on TFDS's public bucket; one-line errors (`TfdsError`) naming the
builder, config, split or directory and the fix; examples as plain Python
values (text as `str`, sequences as lists; a class label stays its integer,
the names are `class_names`), in their prepared order. `tensorflow_datasets`
is imported on first use: importing this module costs nothing.

Example:
<!-- snippet: not run: reads TFDS data from `gs://` -->
```python
from rembert_tf.data import tfds_reader
split = tfds_reader.SplitRef("paws_x_wiki", "de", "validation")
builder = tfds_reader.open_split(split, "gs://bucket/tensorflow_datasets")
names = tfds_reader.class_names(builder, "label")  # different_meaning, paraphrase
for example in tfds_reader.iter_examples(builder, split):
  example["sentence1"], names[example["label"]]
```
"""
import dataclasses
import difflib
import re
import shlex
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class TfdsError(errors.InputError):
  """A TFDS builder, config or split does not exist or is not prepared."""


@dataclasses.dataclass(frozen=True)
class SplitRef:
  """One split of one TFDS dataset: `name/config:split`."""
  name: str
  config: Optional[str]
  split: str

  @property
  def dataset(self) -> str:
    return self.name if self.config is None else f"{self.name}/{self.config}"

  def __str__(self) -> str:
    return f"{self.dataset}:{self.split}"


def data_dir_or_default(data_dir=None) -> str:
  """`data_dir` when given, else what `tfds.load` reads without one
  (`TFDS_DATA_DIR`, else `~/tensorflow_datasets`, read when called)."""
  if data_dir:
    return fileio.as_str(data_dir)
  from tensorflow_datasets.core import constants  # pylint: disable=g-import-not-at-top
  return constants.get_default_data_dir()


def _tfds():
  """tensorflow_datasets, imported on first use (it takes a second or more),
  with its Cloud Storage lookups off: TFDS looks a dataset's info up on its
  public bucket when the dataset is not prepared locally; rembert_tf reads
  prepared data only."""
  import tensorflow_datasets  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.core.utils import gcs_utils  # pylint: disable=g-import-not-at-top
  gcs_utils._is_gcs_disabled = True  # pylint: disable=protected-access
  return tensorflow_datasets


def _builder_class(name: str):
  if not _NAME.match(name):
    raise TfdsError(f"{name!r} is not a TFDS dataset name (lower-case letters, "
                    "digits and underscores, e.g. wiki40b).")
  tfds = _tfds()
  try:
    return tfds.builder_cls(name)
  except tfds.core.registered.DatasetNotFoundError:
    close = difflib.get_close_matches(name, tfds.list_builders(
        with_community_datasets=False), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise TfdsError(
        f"TFDS has no dataset {name!r}{hint} in tensorflow-datasets "
        f"{tfds.__version__}; check the name in the TFDS catalog "
        "(tfds.list_builders()).") from None


def builder_configs(name: str) -> List[str]:
  """The config names of a TFDS builder (TfdsError if there is none such)."""
  return [c.name for c in (_builder_class(name).BUILDER_CONFIGS or [])]


def _check_config(ref: SplitRef) -> None:
  configs = builder_configs(ref.name)
  if ref.config is None or ref.config in configs:
    return
  if not configs:
    raise TfdsError(f"TFDS dataset {ref.name!r} has no configs; name it "
                    f"without one ({ref.name}), not {ref.dataset}.")
  close = difflib.get_close_matches(ref.config, configs, n=3, cutoff=0.5)
  shown = close or configs[:8]
  raise TfdsError(
      f"TFDS dataset {ref.name!r} has no config {ref.config!r}; its configs "
      f"include {', '.join(shown)}{'' if close or len(configs) <= 8 else ', ...'}"
      f" ({len(configs)} in all).")


def build_command(name: str, config: Optional[str], data_dir: str) -> str:
  """The command that prepares a dataset, as every TFDS error suggests it:
  `tfds build` (tensorflow-datasets' CLI; setup.py installs what it imports)."""
  config_flag = f" --config {config}" if config else ""
  return (f"`tfds build {name}{config_flag} --data_dir "
          f"{shlex.quote(fileio.as_str(data_dir))}`")


def _not_prepared(builder, ref: SplitRef, data_dir: str) -> TfdsError:
  version_dir = fileio.dirname(builder.data_path)
  found = sorted(fileio.listdir(version_dir)) if fileio.isdir(version_dir) else []
  other = (f" (it holds version(s) {', '.join(found)}; this "
           f"tensorflow-datasets reads {builder.version})" if found else "")
  return TfdsError(
      f"TFDS dataset {ref.dataset} is not prepared in {data_dir}: no "
      f"{fileio.join(builder.data_path, 'dataset_info.json')}{other}; prepare "
      f"it with {build_command(ref.name, ref.config, data_dir)}.")


def open_builder(ref: SplitRef, data_dir):
  """The builder of `ref.dataset` prepared in data_dir (TfdsError if not)."""
  data_dir = fileio.as_str(data_dir)
  _check_config(ref)
  kwargs = {"config": ref.config} if ref.config is not None else {}
  builder = _tfds().builder(ref.name, data_dir=data_dir, try_gcs=False, **kwargs)
  if not builder.is_prepared():
    raise _not_prepared(builder, ref, data_dir)
  return builder


def is_prepared(ref: SplitRef, data_dir) -> bool:
  """Whether ref's dataset is prepared in data_dir and has ref's split."""
  try:
    return ref.split in open_builder(ref, data_dir).info.splits
  except TfdsError:
    return False


def open_split(ref: SplitRef, data_dir, fix: str = ""):
  """`open_builder`, and the split must exist; `fix` ends the error line."""
  builder = open_builder(ref, data_dir)
  splits = list(builder.info.splits)
  if ref.split not in splits:
    raise TfdsError(
        f"TFDS dataset {ref.dataset} in {fileio.as_str(data_dir)} has no split "
        f"{ref.split!r} (its splits: {', '.join(sorted(splits)) or 'none'})"
        f"{'; ' + fix if fix else '.'}")
  return builder


def require_features(builder, ref: SplitRef, names, fix: str = "") -> None:
  """Each of `names` must be a top-level feature of the builder."""
  present = sorted(builder.info.features.keys())
  for name in names:
    if name not in present:
      raise TfdsError(
          f"TFDS dataset {ref.dataset} has no feature {name!r} (its features: "
          f"{', '.join(present)}){'; ' + fix if fix else '.'}")


def class_names(builder, name: str) -> Optional[List[str]]:
  """The names of the ClassLabel feature `name` (or of a Sequence of them);
  None when it holds no class labels."""
  connector = builder.info.features[name]
  element = getattr(connector, "feature", connector)  # Sequence -> element
  return list(element.names) if hasattr(element, "names") else None


def is_translation(builder, name: str) -> bool:
  """Whether the feature `name` holds one text per language (a dict)."""
  features = _tfds().features
  return isinstance(builder.info.features[name], (
      features.Translation, features.TranslationVariableLanguages))


def _to_python(value: Any) -> Any:
  if isinstance(value, dict):
    return {k: _to_python(v) for k, v in value.items()}
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, np.ndarray):
    return [_to_python(v) for v in value.tolist()] if value.ndim else \
        _to_python(value.item())
  if isinstance(value, (list, tuple)):
    return [_to_python(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value


def _as_numpy(builder, split: str, decoders=None):
  tfds = _tfds()
  dataset = builder.as_dataset(split=split, shuffle_files=False,
                               decoders=decoders,
                               read_config=tfds.ReadConfig(try_autocache=False))
  return tfds.as_numpy(dataset)


def iter_examples(builder, ref: SplitRef) -> Iterator[Dict[str, Any]]:
  """The examples of ref's split, in file order, as Python values."""
  for example in _as_numpy(builder, ref.split):
    yield _to_python(example)


def iter_text_bytes(builder, split: str, name: str) -> Iterator[bytes]:
  """The undecoded UTF-8 bytes of the text feature `name` of each example of
  `split` (a split name or a slice such as `train[3shard]`), in file order;
  the other features are not decoded."""
  decoders = _tfds().decode.PartialDecoding({name: True})
  for example in _as_numpy(builder, split, decoders):
    yield example[name]


def shard_sizes(builder, split: str) -> List[Tuple[int, int]]:
  """(examples, bytes) of each shard of a split; the split's bytes are spread
  over its shards by example count (TFDS records bytes per split only)."""
  info = builder.info.splits[split]
  lengths = list(info.shard_lengths)
  total = max(sum(lengths), 1)
  return [(n, info.num_bytes * n // total) for n in lengths]

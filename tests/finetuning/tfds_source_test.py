"""`--data_source tfds`: the same records as from `download/`, one-line errors.

The TFDS side runs the command itself (rembert-create-finetuning-data's
`main`, in one process under `tfds.testing.mock_data`, with metadata written
as a prepared dataset has it); the download side is the library on the same
examples written in XTREME's layout (`xtreme_fixtures`).
"""
import json
import pathlib

import pytest

import tfds_testlib
import xtreme_fixtures
from rembert_tf.data import tfds_reader
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.data import finetuning_data
from rembert_tf.retrieval import bitext

HERE = pathlib.Path(__file__).resolve().parent
QUIET = lambda s: None  # noqa: E731
TASKS = tuple(xtreme_fixtures.LANGUAGES)
# Short sequences: tagging sentences split, QA contexts in several windows.
QA_OPTIONS = {"seq_length": 32, "doc_stride": 8, "max_query_length": 12}
OPTIONS = {"xnli": {"seq_length": 16, "languages": ["en", "de", "ar"]},
           "pawsx": {"seq_length": 16}, "udpos": {"seq_length": 8},
           "panx": {"seq_length": 8}, "xquad": QA_OPTIONS,
           "mlqa": QA_OPTIONS, "tydiqa": QA_OPTIONS}
# Bad input: (argv, what the one line names).
ERRORS = [
    (["--task=panx", "--languages=en,fr"],
     "wikiann/fr is not prepared in {tfds}"),
    (["--task=panx", "--languages=xx"], "has no config 'xx'"),
    (["--task=udpos", "--languages=tl", "--splits=dev"],
     "xtreme_pos/xtreme_pos_ta in {tfds} has no split 'dev' (its splits: test)"),
]


def _argv(task, out, tfds_dir, sp_model):
  return [f"--task={task}", "--data_source=tfds", f"--tfds_data_dir={tfds_dir}",
          f"--sentencepiece_model={sp_model}", f"--output_dir={out}"] + [
              f"--{k}={','.join(v) if isinstance(v, list) else v}"
              for k, v in OPTIONS[task].items()]


@pytest.fixture(scope="module")
def both_sources(sp_model, tmp_path_factory):
  """(records from TFDS by the command, records from download/, error results)."""
  root = tmp_path_factory.mktemp("sources")
  tfds_dir = root / "tfds"
  cases = [_argv(t, root / "from_tfds", tfds_dir, sp_model) for t in TASKS]
  cases += [[f"--sentencepiece_model={sp_model}", f"--output_dir={root / 'bad'}",
             "--data_source=tfds", f"--tfds_data_dir={tfds_dir}"] + argv
            for argv, _ in ERRORS]
  # Without --tfds_data_dir: TFDS's default, here TFDS_DATA_DIR.
  cases.append([a for a in _argv("panx", root / "from_default", tfds_dir,
                                 sp_model)
                if not a.startswith("--tfds_data_dir")])
  results = tfds_testlib.run_command_cases(
      "rembert_tf.cli.create_finetuning_data", "xtreme_fixtures:tfds_examples",
      tfds_dir, cases, paths=[HERE])
  download = xtreme_fixtures.write_download(root / "download")
  for task in TASKS:
    finetuning_data.create_finetuning_data(
        task, download, sp_model, root / "from_download", progress=QUIET,
        **OPTIONS[task])
  return root, results


def _files(directory: pathlib.Path):
  return sorted(str(p.relative_to(directory)) for p in directory.rglob("*")
                if p.is_file())


@pytest.mark.parametrize("task", TASKS)
def test_tfds_records_equal_download_records(both_sources, task):
  root, results = both_sources
  assert results[TASKS.index(task)] == {"code": 0, "stderr": ""}
  from_tfds, from_download = root / "from_tfds" / task, root / "from_download" / task
  assert _files(from_tfds) == _files(from_download)
  meta_tfds = json.loads((from_tfds / "metadata.json").read_text())
  meta_download = json.loads((from_download / "metadata.json").read_text())
  assert (meta_tfds["data_source"], meta_download["data_source"]) == (
      "tfds", "download")
  # Where the examples come from (a file's sha256, a TFDS split's name).
  assert set(meta_tfds["sources_sha256"]) == set(meta_download["sources_sha256"])
  for meta in (meta_tfds, meta_download):
    del meta["data_source"], meta["data_dir"], meta["sources_sha256"]
    for split in meta["splits"].values():
      for info in split.values():
        info["source"] = info["source"].startswith("tfds:")
  for split in meta_tfds["splits"].values():
    assert all(info["source"] for info in split.values())
    for info in split.values():
      info["source"] = False
  assert meta_tfds == meta_download
  assert meta_tfds["splits"]["train"]["en"]["num_features"] > 0
  for name in _files(from_tfds):
    if name == "metadata.json":
      continue
    if name.endswith(".json"):  # SQuAD gold: the same answers per question
      assert xtreme_scorer.read_squad_answers(from_tfds / name) == \
          xtreme_scorer.read_squad_answers(from_download / name), name
    else:
      assert (from_tfds / name).read_bytes() == \
          (from_download / name).read_bytes(), name


def test_tfds_languages_and_splits_follow_the_builders(both_sources):
  root, _ = both_sources
  meta = json.loads((root / "from_tfds/udpos/metadata.json").read_text())
  # Tamil from xtreme_pos_tl, Tagalog (test only) from xtreme_pos_ta.
  assert {s: sorted(l) for s, l in meta["splits"].items()} == {
      "train": ["en"], "dev": ["en", "ta"], "test": ["tl"]}
  assert meta["splits"]["dev"]["ta"]["source"] == \
      "tfds:xtreme_pos/xtreme_pos_tl:dev"
  gold = (root / "from_tfds/udpos/labels/udpos/test-tl.tsv").read_text()
  assert gold == "DET\nNOUN\nAUX\nVERB\n\n"
  tydiqa = json.loads((root / "from_tfds/tydiqa/metadata.json").read_text())
  # TyDi QA trains on the English questions of its multilingual train split.
  assert tydiqa["splits"]["train"]["en"]["num_examples"] == 4
  xquad = json.loads((root / "from_tfds/xquad/metadata.json").read_text())
  assert list(xquad["splits"]["dev"]) == ["en"]
  assert list(xquad["splits"]["test"]) == ["ar", "zh"]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_bad_tfds_input_is_one_line_and_writes_nothing(both_sources, case):
  root, results = both_sources
  result = results[len(TASKS) + case]
  lines = result["stderr"].strip().splitlines()
  assert result["code"] == 1, result
  assert len(lines) == 1, lines
  assert lines[0].startswith("prog: error: ") or lines[0].startswith(
      "rembert-create-finetuning-data: error: "), lines
  expected = ERRORS[case][1].format(tfds=root / "tfds")
  assert expected in lines[0]
  assert not (root / "bad").exists()


def test_not_prepared_error_names_the_build_command(both_sources):
  root, results = both_sources
  line = results[len(TASKS)]["stderr"]
  assert f"tfds build wikiann --config fr --data_dir {root / 'tfds'}" in line


def test_retrieval_sides_from_tfds(tmp_path):
  source = bitext.TfdsSource(tmp_path)
  with tfds_testlib.mocked_tfds(tmp_path, xtreme_fixtures.retrieval_examples()):
    bucc = source("bucc2018", "test", "de")
    tatoeba = source("tatoeba", "test", "de")
    with pytest.raises(tfds_reader.TfdsError,
                       match="bucc/bucc_fr is not prepared"):
      source("bucc2018", "dev", "fr")
  assert not (tmp_path / "bucc/bucc_fr").exists()  # reading writes nothing
  pairs = xtreme_fixtures.BUCC_PAIRS[::-1]  # the test split's order
  assert bucc.source_ids == tuple(p[0] for p in pairs)
  assert bucc.target_sentences == tuple(p[3] for p in pairs)
  assert bucc.gold == {(p[0], p[2]) for p in pairs}
  assert bucc.origin == "bucc/bucc_de:test"
  assert tatoeba.source_sentences == tuple(
      s for s, _ in xtreme_fixtures.TATOEBA_PAIRS)
  assert tatoeba.target_ids == ("0", "1")
  assert tatoeba.gold == {("0", "0"), ("1", "1")}


def test_every_task_names_its_tfds_builders_configs_and_features(
    tmp_path, monkeypatch):
  """The table's TFDS names against the builders' code: each config exists,
  each field is a feature, each renamed label a class of the builder."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.core.utils import gcs_utils  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(gcs_utils, "_is_gcs_disabled", True)  # code only
  for dataset in xtreme_tasks.XTREME_TASKS.values():
    layout = dataset.tfds
    splits = (["train"] if layout.train else []) + list(layout.eval_splits)
    for split in splits:
      for lang in dataset.languages or ["de", "fr", "ru", "zh"]:
        if not layout.holds(split, lang):
          continue
        ref = layout.split(split, lang)
        configs = [c.name for c in (tfds.builder_cls(ref.builder)
                                    .BUILDER_CONFIGS or [])]
        assert ref.config in (configs or [None]), (dataset.name, split, lang)
    ref = layout.split(splits[-1], "de")
    features = tfds.builder(ref.builder, data_dir=str(tmp_path), **(
        {"config": ref.config} if ref.config else {})).info.features
    assert set(layout.fields.values()) <= set(features.keys()), dataset.name
    for feature in layout.fields.values():
      element = getattr(features[feature], "feature", features[feature])
      names = getattr(element, "names", None)
      if names and dataset.labels:
        renamed = {layout.label_names.get(n, n) for n in names}
        assert set(dataset.labels) <= renamed, dataset.name


def test_without_tfds_data_dir_tfds_default_is_read(both_sources):
  root, results = both_sources
  assert results[-1] == {"code": 0, "stderr": ""}
  from_default = root / "from_default" / "panx"
  from_tfds = root / "from_tfds" / "panx"
  assert _files(from_default) == _files(from_tfds)
  for name in _files(from_tfds):
    if name.endswith(".tfrecord"):
      assert ((from_default / name).read_bytes()
              == (from_tfds / name).read_bytes()), name

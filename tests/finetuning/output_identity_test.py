"""A fine-tuning output_dir knows what it holds.

Its identity is the experiment (every setting that changes a result, the
model config included) and its inputs by content (the download/ files, the
records, the checkpoint), never a path. A rerun into it with another rate
adds to the sweep; with another language or dev file it predicts again (from
the kept checkpoints, or trained again) and the table says which; with
other training settings or inputs it is refused in one line naming the
setting, both values and --overwrite.
"""
import json
import shutil

import pytest

from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.data import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
import finetuning_testlib  # tests/finetuning/

QUIET = lambda s: None  # noqa: E731


def _finetune(out, checkpoint_dir, data_dir, **fields):
  args = dict(init_checkpoint=checkpoint_dir and str(checkpoint_dir),
              data_dir=data_dir and str(data_dir),
              seq_length=24, learning_rates=[1e-3], num_train_steps=1,
              train_batch_size=4, eval_batch_size=4, jit_compile=False,
              splits=["dev"], progress=QUIET)
  args.update(fields)
  return finetuning_testlib.finetune("xnli", out, **args)


def _records_metadata(out):
  return (out / "records/xnli/metadata.json").read_bytes()


@pytest.fixture(scope="module")
def first_sweep(checkpoint_dir, download_dir, tmp_path_factory):
  """One sweep of the default settings (one rate), copied by each test that
  reruns into it."""
  out = tmp_path_factory.mktemp("first_sweep") / "o"
  _finetune(out, checkpoint_dir, download_dir)
  return out


def test_a_second_learning_rate_adds_to_the_sweep_and_the_table_lists_both(
    first_sweep, checkpoint_dir, download_dir, tmp_path, monkeypatch):
  """... and the download/ folder named by a relative path is the same input."""
  out = tmp_path / "o"
  shutil.copytree(first_sweep, out)
  before = _records_metadata(out)
  monkeypatch.chdir(download_dir.parent)
  lines = []
  results = _finetune(out, checkpoint_dir, download_dir.name,
                      learning_rates=[3e-3], progress=lines.append)
  assert any("records of an earlier run reused" in l for l in lines), lines
  assert _records_metadata(out) == before
  assert set(results["english_dev_by_rate"]) == {"0.001", "0.003"}
  assert sorted(r["learning_rate"] for r in results["runs"]) == [1e-3, 3e-3]
  assert json.loads((out / "results.json").read_text())[
      "english_dev_by_rate"] == results["english_dev_by_rate"]
  markdown = (out / "results.md").read_text()
  selected = f"{results['selected_learning_rate']:g}"
  for rate, score in results["english_dev_by_rate"].items():
    mark = "selected" if rate == selected else ""
    assert f"| {rate} | {score:.2f} | {mark} |" in markdown
  assert "Selected: the best English dev score" in markdown
  assert any("run 2/2" in l and "lr=0.001" in l and "earlier command" in l
             for l in lines), lines
  assert any("lr=0.001 seed=0: finished earlier, skipped" in l for l in lines)
  # Another rate with other steps would sit beside runs of 1 step: refused.
  with pytest.raises(finetuning_experiment.FinetuningError,
                     match=r"lr-0.001_seed-0/run_config.json: this run was "
                     r"made with other settings \(num_train_steps is 1 there, "
                     r"2 now\). Pass --overwrite to start .*o again"):
    _finetune(out, checkpoint_dir, download_dir, learning_rates=[5e-3],
              num_train_steps=2)
  assert not (out / "runs/lr-0.005_seed-0").exists()


def test_another_seq_length_is_refused_before_the_records_change(
    first_sweep, checkpoint_dir, download_dir, tmp_path):
  out = tmp_path / "o"
  shutil.copytree(first_sweep, out)
  before = _records_metadata(out)
  with pytest.raises(finetuning_data.TaskDataError,
                     match=r"o: its runs were trained on records made with "
                     r"other settings or files \(seq_length is 24 there, 32 "
                     r"now\). Pass --overwrite to start .*o again"):
    _finetune(out, checkpoint_dir, download_dir, seq_length=32)
  assert _records_metadata(out) == before
  # --overwrite: the records are made again, the runs trained again.
  lines = []
  results = _finetune(out, checkpoint_dir, download_dir, seq_length=32,
                      overwrite=True, progress=lines.append)
  assert json.loads(_records_metadata(out))["seq_length"] == 32
  assert any("--overwrite: the runs and results" in l for l in lines)
  assert not any("finished earlier" in l for l in lines)
  assert len(results["runs"]) == 1


def test_a_new_language_is_predicted_from_the_kept_checkpoints(
    checkpoint_dir, download_dir, tmp_path):
  out = tmp_path / "o"
  first = _finetune(out, checkpoint_dir, download_dir, languages=["en"],
                    keep_checkpoints=True)
  assert set(first["scores"]["accuracy"]) == {"en"}
  lines = []
  results = _finetune(out, checkpoint_dir, download_dir,
                      languages=["en", "de"], keep_checkpoints=True,
                      progress=lines.append)
  assert set(results["scores"]["accuracy"]) == {"en", "de"}
  assert results["scores"]["accuracy"]["en"] == first["scores"]["accuracy"]["en"]
  assert any("note:" in l and "dev-de is absent there, sha256 " in l
             for l in lines), lines
  assert any("resuming from" in l and "at step 1/1" in l for l in lines)
  assert ("- lr=0.001 seed=0: predicted again from its kept checkpoint"
          in (out / "results.md").read_text())


def test_a_dev_file_added_to_download_is_predicted_by_training_again(
    checkpoint_dir, download_dir, tmp_path):
  data = tmp_path / "download"
  shutil.copytree(download_dir / "xnli", data / "xnli")
  (data / "xnli/dev-ar.tsv").rename(tmp_path / "dev-ar.tsv")
  out = tmp_path / "o"
  first = _finetune(out, checkpoint_dir, data)
  assert set(first["scores"]["accuracy"]) == {"en", "de"}
  (tmp_path / "dev-ar.tsv").rename(data / "xnli/dev-ar.tsv")
  results = _finetune(out, checkpoint_dir, data)
  assert set(results["scores"]["accuracy"]) == {"en", "de", "ar"}
  assert ("- lr=0.001 seed=0: trained again (its checkpoint was not kept"
          in (out / "results.md").read_text())


def test_a_random_init_sweep_with_another_model_config_is_refused(
    checkpoint_dir, xnli_records, tmp_path):
  model_config = tmp_path / "model.yaml"
  shutil.copy(checkpoint_dir / checkpoint_layout.MODEL_CONFIG_FILE,
              model_config)
  args = dict(records_dir=str(xnli_records), seq_length=None,
              model_config=str(model_config))
  _finetune(tmp_path / "o", None, None, **args)
  text = model_config.read_text()
  assert "num_hidden_layers: 1" in text
  model_config.write_text(text.replace("num_hidden_layers: 1",
                                       "num_hidden_layers: 2"))
  lines = []
  with pytest.raises(finetuning_experiment.FinetuningError,
                     match="model_config.num_hidden_layers is 1 there, 2 now"):
    _finetune(tmp_path / "o", None, None, progress=lines.append, **args)
  assert not any("finished earlier" in l for l in lines)

"""Fine-tuning a tiny model per task type; predictions read back by the scorer."""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.finetuning import demo_xnli
from rembert_tf.finetuning import finetuning_data
from rembert_tf.finetuning import finetuning_runner
from rembert_tf.finetuning import init_checkpoint
from rembert_tf.modeling import checkpoints
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUIET = lambda s: None  # noqa: E731


@pytest.fixture(scope="module")
def tiny_cfg():
  return rembert_config.load_model_config(
      "tiny", {"max_position_embeddings": 64, "vocab_size": 256,
               "hidden_size": 64, "intermediate_size": 128,
               "input_embedding_size": 32, "output_embedding_size": 96,
               "num_hidden_layers": 1})


@pytest.fixture(scope="module")
def checkpoint_dir(tiny_cfg, sp_model, tmp_path_factory):
  """A rembert_tf checkpoint dir, as a pre-training model_dir leaves it."""
  d = tmp_path_factory.mktemp("pretrain_dir")
  encoder = rembert_encoder.build_encoder(tiny_cfg)
  rembert_config.save_model_config(tiny_cfg, d / checkpoints.MODEL_CONFIG_FILE)
  checkpoints.write_encoder_checkpoint(encoder, d, step=7)
  shutil.copy(sp_model, d / checkpoints.SENTENCEPIECE_FILE)
  return d


def _run(task, records, out, checkpoint, **kwargs):
  args = dict(learning_rates=[1e-3], num_train_steps=3, train_batch_size=4,
              eval_batch_size=4, progress=QUIET)
  args.update(kwargs)
  return finetuning_runner.run_finetuning(task, out, init_checkpoint=str(checkpoint),
                                          records_dir=records, **args)


def test_demo_xnli_zero_shot_two_replicas(checkpoint_dir, tmp_path,
                                          two_cpu_strategy):
  results = demo_xnli.run_demo_xnli(
      checkpoint_dir, tmp_path, num_train=16, num_dev=6, num_test=3,
      languages=["en", "ar", "zh"], num_train_steps=3, train_batch_size=4,
      seq_length=32, distribution_strategy=two_cpu_strategy, progress=QUIET)
  accuracy = results["scores"]["accuracy"]
  assert set(accuracy) == {"en", "ar", "zh"}
  run_dir = pathlib.Path(results["runs"][0]["run_dir"])
  preds = run_dir / "predictions/xnli"
  assert len((preds / "dev-zh.tsv").read_text().splitlines()) == 6
  assert len((preds / "test-ar.tsv").read_text().splitlines()) == 3
  # The scorer reads the written predictions and agrees with the run.
  rescored = xtreme_scorer.score_task(
      "xnli", run_dir / "predictions", results["records_dir"] + "/labels",
      split="dev")
  assert rescored["accuracy"] == accuracy
  assert "| accuracy |" in results["markdown"]
  assert json.loads((tmp_path / "finetune/results.json").read_text())[
      "selected_learning_rate"] == pytest.approx(5e-4)


def test_panx_tags_per_word(checkpoint_dir, sp_model, download_dir, tmp_path):
  finetuning_data.create_finetuning_data(
      "panx", download_dir, sp_model, tmp_path / "rec", seq_length=8,
      progress=QUIET)
  results = _run("panx", tmp_path / "rec/panx", tmp_path / "out", checkpoint_dir,
                 compare_paper=True)
  assert set(results["scores"]["f1"]) == {"ar", "en", "de"}
  assert "| panx | f1 |" in results["markdown"]
  assert "paper coupled" in results["markdown"]
  run_dir = pathlib.Path(results["runs"][0]["run_dir"])
  preds = (run_dir / "predictions/panx/dev-en.tsv").read_text()
  # One tag per word (sentences were split in several records), blank line
  # after each sentence: 6 sentences x 6 words.
  sentences = [s for s in preds.split("\n\n") if s.strip()]
  assert [len(s.split()) for s in sentences] == [6] * 6
  assert (run_dir / "predictions/panx/test-ar.tsv").read_text().count("\n") == 4
  rescored = xtreme_scorer.score_task("panx", run_dir / "predictions",
                                      tmp_path / "rec/panx/labels", split="dev")
  assert rescored["f1"] == results["scores"]["f1"]


def test_sweep_selects_rate_on_english_dev_and_reports_std():
  def run(rate, en_dev, ar, en):
    return {"learning_rate": rate, "english_dev_metric": en_dev,
            "scores": {"dev": xtreme_scorer.add_averages(
                "xnli", {"ar": {"accuracy": ar}, "en": {"accuracy": en}})}}
  runs = [run(1e-5, 60.0, 40.0, 60.0), run(1e-5, 70.0, 50.0, 70.0),
          run(3e-5, 80.0, 30.0, 80.0), run(3e-5, 60.0, 34.0, 60.0),
          run(5e-5, 50.0, 90.0, 50.0), run(5e-5, 50.0, 90.0, 50.0)]
  summary = finetuning_runner.summarize_runs("xnli", runs, "dev")
  assert summary["english_dev_by_rate"] == {"1e-05": 65.0, "3e-05": 70.0,
                                            "5e-05": 50.0}
  assert summary["selected_learning_rate"] == 3e-5
  assert summary["scores"]["accuracy"] == {"ar": 32.0, "en": 70.0}
  assert summary["scores"]["avg_accuracy"] == pytest.approx(51.0)
  assert summary["std"]["accuracy"]["ar"] == pytest.approx(np.std([30, 34], ddof=1))
  assert summary["std"]["avg_accuracy"] == pytest.approx(np.std([55, 47], ddof=1))
  table = xtreme_scorer.format_markdown({"xnli": summary["scores"]},
                                        std={"xnli": summary["std"]})
  assert "32.00 ± 2.83" in table


def test_mlqa_and_tydiqa_span_predictions(checkpoint_dir, sp_model, download_dir,
                                          tmp_path):
  finetuning_data.create_finetuning_data(
      "mlqa", download_dir, sp_model, tmp_path / "rec", seq_length=32,
      doc_stride=8, max_query_length=8, progress=QUIET)
  results = _run("mlqa", tmp_path / "rec/mlqa", tmp_path / "out", checkpoint_dir)
  assert set(results["scores"]["f1"]) == {"en", "ar", "zh"}
  preds_dir = pathlib.Path(results["runs"][0]["run_dir"]) / "predictions/mlqa"
  zh = json.loads((preds_dir / "dev-zh.json").read_text())
  assert set(zh) == {"z1"} and zh["z1"] in "北京是中国的首都。北京大学很有名。"
  # The CLI on tydiqa (test split = TyDi QA dev): records from --data_dir.
  proc = subprocess.run(
      [sys.executable, "-m", "rembert_tf.finetune", "--task=tydiqa",
       f"--data_dir={download_dir}", f"--init_checkpoint={checkpoint_dir}",
       f"--output_dir={tmp_path / 'tydiqa'}", "--seq_length=32",
       "--num_train_steps=2", "--train_batch_size=4", "--eval_batch_size=4",
       "--strategy=one_device", "--compare=paper"],
      capture_output=True, text=True, check=False, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  scores = json.loads((tmp_path / "tydiqa/results.json").read_text())["scores"]
  assert set(scores["exact_match"]) == {"en", "ar"}
  assert "| tydiqa | f1 |" in proc.stdout


def test_saved_model_with_output_embedding(tiny_cfg, tmp_path):
  pretrainer = rembert_pretrainer.build_pretrainer(tiny_cfg)
  module = tf.Module()
  module.pretrainer = pretrainer
  saved = tmp_path / "saved_model"
  tf.saved_model.save(module, str(saved))
  rembert_config.save_model_config(tiny_cfg, saved / "model_config.yaml")
  keys = [k for k, shape in tf.train.list_variables(str(saved / "variables/variables"))
          if shape == [tiny_cfg.vocab_size, tiny_cfg.output_embedding_size]]
  assert keys, "the SavedModel should carry the output embedding"
  cfg, encoder, source = init_checkpoint.load_encoder(str(saved))
  assert "SavedModel" in source
  for restored, original in zip(encoder.weights, pretrainer.encoder.weights):
    np.testing.assert_array_equal(restored.numpy(), original.numpy())
  # Nothing of the output side in the fine-tuning encoder.
  assert all(v.shape != (cfg.vocab_size, cfg.output_embedding_size)
             for v in encoder.weights)
  assert len(encoder.weights) == len(pretrainer.encoder.weights)


def test_init_checkpoint_errors(tiny_cfg, tmp_path):
  with pytest.raises(init_checkpoint.InitCheckpointError, match="does not exist"):
    init_checkpoint.load_encoder(str(tmp_path / "nope"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(init_checkpoint.InitCheckpointError,
                     match="neither a rembert_tf checkpoint directory"):
    init_checkpoint.load_encoder(str(tmp_path / "empty"))
  with pytest.raises(finetuning_data.TaskDataError, match="metadata.json"):
    finetuning_runner.run_finetuning("xnli", tmp_path / "o",
                                     records_dir=tmp_path / "empty",
                                     model_config=tiny_cfg, progress=QUIET)


def test_exported_encoder_savedmodel_needs_no_config(tiny_cfg, tmp_path):
  encoder_export = pytest.importorskip("rembert_tf.export.encoder_export")
  encoder = rembert_encoder.build_encoder(tiny_cfg)
  (tmp_path / "ckpt").mkdir()
  rembert_config.save_model_config(tiny_cfg, tmp_path / "ckpt/model_config.yaml")
  checkpoints.write_encoder_checkpoint(encoder, tmp_path / "ckpt", step=1)
  encoder_export.export_encoder(tmp_path / "ckpt", tmp_path / "export",
                                verify=False)
  cfg, restored, _ = init_checkpoint.load_encoder(str(tmp_path / "export"))
  assert cfg.num_hidden_layers == tiny_cfg.num_hidden_layers
  assert cfg.input_embedding_size == tiny_cfg.input_embedding_size
  for a, b in zip(restored.weights, encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_model_dir_with_only_full_training_checkpoint(tiny_cfg, tmp_path):
  """Model Garden's ckpt-N (model=pretrainer, optimizer): encoder read alone."""
  pretrainer = rembert_pretrainer.build_pretrainer(tiny_cfg)
  rembert_config.save_model_config(tiny_cfg, tmp_path / "model_config.yaml")
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=pretrainer, global_step=tf.Variable(3)),
      str(tmp_path), max_to_keep=1).save(checkpoint_number=3)
  _, encoder, source = init_checkpoint.load_encoder(str(tmp_path))
  assert "ckpt-3" in source
  for a, b in zip(encoder.weights, pretrainer.encoder.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())

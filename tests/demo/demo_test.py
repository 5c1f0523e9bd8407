"""The README's main job, end to end, at smoke-test size."""
import json

from rembert_tf import demo


def test_demo_runs_every_stage_into_one_run_directory(tmp_path):
  run_dir = tmp_path / "run"
  results = demo.run_demo(run_dir, train_steps=4, corpus_megabytes=0.6,
                          num_workers=1, finetune=True, finetune_examples=64,
                          finetune_dev_examples=20)
  assert results["run_dir"] == str(run_dir.resolve())
  assert results["steps"] == 4
  assert 0.0 <= results["baseline_accuracy"] <= 1.0
  assert 0.0 <= results["mlm_accuracy"] <= 1.0
  # Every stage left its output under the run directory.
  for path in ("corpus/en", "sentencepiece/sentencepiece.model",
               "records/train/metadata.json", "records/eval/metadata.json",
               "pretrain/model_config.yaml", "pretrain/encoder/checkpoint",
               "export/encoder/saved_model.pb",
               "export/preprocessor/saved_model.pb"):
    assert (run_dir / path).exists(), path
  metadata = json.loads((run_dir / "records/train/metadata.json").read_text())
  assert metadata["vocab_size"] == 2000
  assert set(results["xnli_accuracy"]) == {"en", "es", "ru", "el", "ar", "hi", "zh"}

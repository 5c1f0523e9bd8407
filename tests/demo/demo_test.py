"""The README's main job end to end, at a smaller size: pre-training must transfer.

One run (about two minutes on a 2-core machine) checks that every step leaves
its output in the run directory, that the summary shows the figures, and that
the model fine-tuned on English alone classifies the other languages' pairs
well above chance. The margin is set below the lowest non-English mean
measured over several seeds at this size (see MEASURED below), so the test
fails when transfer breaks, not when a seed is unlucky.
"""
import json

from rembert_tf.demo import nli
from rembert_tf.demo import runner

# Measured at this size (seeds 0-4): non-English mean zero-shot accuracy
# MEASURED_MIN..MEASURED_MAX %, English ENGLISH_MIN+ %.
CHANCE = 100.0 / len(nli.NLI_LABELS)
TRANSFER_MARGIN = 8.0  # points above chance for the non-English mean
SMALL = runner.DemoSettings(
    seed=0, train_steps=600, corpus_megabytes=1.0, heldout_megabytes=0.1,
    num_workers=1, random_init_baseline=False,
    recipe=nli.FinetuneRecipe(num_train=2000, num_dev=150))


def test_small_demo_transfers_zero_shot_and_leaves_every_step_in_the_run_dir(
    tmp_path, capsys):
  run_dir = tmp_path / "run"
  results = runner.run_demo(str(run_dir), SMALL)
  # Every step left its output under the run directory.
  for path in ("corpus/en", "corpus_heldout/zh",
               "sentencepiece/sentencepiece.model",
               "records/train/metadata.json", "records/eval/metadata.json",
               "pretrain/model_config.yaml", "pretrain/encoder/checkpoint",
               "export/encoder/saved_model.pb",
               "export/preprocessor/saved_model.pb",
               "xnli/download/xnli/train-en.tsv", "xnli/pretrained/results.json",
               "demo_results.json"):
    assert (run_dir / path).exists(), path
  train_meta = json.loads((run_dir / "records/train/metadata.json").read_text())
  assert train_meta["layout"] == "unmasked"  # Masked in the input pipeline.
  assert json.loads((run_dir / "records/eval/metadata.json").read_text())[
      "layout"] == "static"
  assert results["steps"] == SMALL.train_steps
  assert results["mlm_accuracy"] > 1.5 * results["baseline_accuracy"]
  accuracy = results["zero_shot"]["pretrained"]
  assert set(accuracy) == {"en", "es", "ru", "el", "ar", "hi", "zh"}
  others = [accuracy[lang] for lang in accuracy if lang != "en"]
  assert sum(others) / len(others) > CHANCE + TRANSFER_MARGIN, accuracy
  # The closing summary: where things are, the figures, what to run next.
  out = capsys.readouterr().out
  summary = out[out.index("=== summary ==="):]
  assert f"run directory {run_dir}" in summary
  assert "| language | pre-trained | random init | chance |" in summary
  assert "| non-English mean |" in summary
  assert "python -m rembert_tf.finetune --task xnli" in summary

"""The demo (`bash run.sh demo`) end to end, at a smaller size.

One run checks that every step leaves its output in the run directory, that
pre-training learns (held-out MLM accuracy against the most-frequent-token
baseline), that English fine-tuning learns the task, and that the summary
shows the zero-shot table with chance and the random-init column.

The run is deterministic (`DemoSettings(deterministic=True)`: both trainers'
own determinism), so its figures are the same for a seed on one machine; on
another CPU the floating-point sums differ and so do the figures, as with
another seed. To keep the test's CPU time low it pre-trains a narrower model
than the demo's (hidden 64, FFN 256) for 250 steps, and fine-tunes on 6000
English pairs. The margins hold for every seed measured with exactly this
configuration on a 2-core machine (seeds 0, 2 and 4; seeds 1 and 3 give a
corpus too small for the 2500-piece vocabulary): held-out MLM accuracy
1.78x-1.90x the most-frequent-token baseline (required 1.5x), English dev
accuracy 68.7-78.7% (required 48.3: 15 points above chance). Zero-shot
transfer itself is not asserted: at this size it stays at or near chance
(33.3), so no margin above chance is reliable (docs/demo.md).
"""
import json
import pathlib

from rembert_tf.demo import lexicon
from rembert_tf.demo import nli
from rembert_tf.demo import runner

CHANCE = 100.0 / len(nli.NLI_LABELS)
MLM_RATIO = 1.5  # measured: 1.78-1.90
ENGLISH_MARGIN = 15.0  # points above chance (measured: 35.3-45.3)
SMALL = runner.DemoSettings(
    seed=0, train_steps=250, corpus_megabytes=1.5, heldout_megabytes=0.1,
    num_workers=1, random_init_baseline=False, xnli_train_pairs=6000,
    xnli_dev_pairs=150, deterministic=True,
    params_override={"task": {"model": {"hidden_size": 64,
                                        "intermediate_size": 256}}})


def test_small_demo_learns_and_leaves_every_step_in_the_run_dir(tmp_path,
                                                                 capsys):
  run_dir = tmp_path / "run"
  results = runner.run_demo(str(run_dir), SMALL)
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
  eval_meta = json.loads((run_dir / "records/eval/metadata.json").read_text())
  assert eval_meta["layout"] == "static"
  assert results["steps"] == SMALL.train_steps
  assert results["mlm_accuracy"] > MLM_RATIO * results["baseline_accuracy"]
  accuracy = results["zero_shot"]["pretrained"]
  assert set(accuracy) == set(lexicon.LANGUAGES)
  assert accuracy["en"] > CHANCE + ENGLISH_MARGIN, accuracy
  assert all(0.0 <= value <= 100.0 for value in accuracy.values())
  # The closing summary: where things are, the figures, what to run next.
  out = capsys.readouterr().out
  summary = out[out.index("=== summary ==="):]
  assert f"run directory {run_dir}" in summary
  assert "| language | pre-trained | random init | chance |" in summary
  assert "| non-English mean |" in summary
  assert "  rembert-finetune --task xnli" in summary


FIGURES = {"run_dir": "runs/demo", "minutes": 1.0, "steps": 1200,
           "mlm_accuracy": 0.5, "baseline_accuracy": 0.1}


def test_the_next_commands_are_the_console_scripts():
  text = runner.summary(dict(FIGURES, zero_shot={"pretrained": {"en": 80.0}}))
  next_lines = text[text.index("next:"):]
  assert ("  rembert-finetune --task xnli --data_dir runs/demo/xnli/download "
          "--init_checkpoint runs/demo/pretrain") in next_lines
  assert "  rembert-demo --seed 1" in next_lines
  assert "python" not in next_lines


def test_next_names_only_what_the_run_wrote():
  """--nofinetune writes no xnli/download: no command that reads it."""
  next_lines = runner.summary(FIGURES).split("next:")[1]
  assert "xnli" not in next_lines and "--data_dir" not in next_lines
  assert "  tensorboard --logdir runs/demo/pretrain" in next_lines
  assert ("  the same rembert-demo command without --nofinetune    (skips the "
          "steps done, adds the zero-shot step)") in next_lines


def _demo_commands(text):
  for line in text.splitlines():
    if line.startswith("rembert-demo "):
      yield line.split("#")[0].split()


def test_the_guide_trains_past_the_demos_failure_line_with_headroom():
  """docs/demo.md's runs pre-train at least the steps its figures were
  measured at (the experiment's own): fewer ended at 2.2x the baseline, just
  above the 2x a run fails below."""
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  measured = experiments.load_experiment_config(
      [runner.DEMO_EXPERIMENT]).trainer.train_steps
  guide = (pathlib.Path(__file__).resolve().parents[2] / "docs" /
           "demo.md").read_text(encoding="utf-8")
  commands = list(_demo_commands(guide))
  assert commands
  for argv in commands:
    if "--train_steps" in argv:
      steps = int(argv[argv.index("--train_steps") + 1])
      assert steps >= measured, " ".join(argv)
  assert f"exits 1 below {runner.REQUIRED_MLM_RATIO:g}x the" in guide
  # The figures are one run's, with its machine, not a range over runs.
  assert "## What the demo guarantees" in guide and "±" not in guide
  assert "## One run, as an example" in guide and "Intel Xeon" in guide

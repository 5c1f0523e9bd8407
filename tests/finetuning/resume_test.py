"""A sweep killed with SIGKILL resumes: finished runs skipped, the interrupted
one continues from its checkpoint, and the results equal an uninterrupted
sweep's (deterministic mode)."""
import json
import os
import pathlib
import signal
import subprocess
import sys

import finetuning_testlib  # tests/finetuning/

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWEEP = dict(learning_rates=[1e-3, 2e-3], num_train_steps=6, steps_per_loop=2,
             checkpoint_interval=2, train_batch_size=4, eval_batch_size=4,
             deterministic=True, splits=("dev",), jit_compile=False)


def _flags(records, checkpoint, out):
  """The command as --config_file and --params_override, some settings as flags
  (aliases of the same fields); the library resumes it."""
  return ["--config_file=xtreme_xnli", f"--output_dir={out}",
          f"--params_override=data.records_dir={records},"
          f"encoder.init_checkpoint={checkpoint},"
          "sweep.learning_rates=[1e-3,2e-3],trainer.num_train_steps=6,"
          "trainer.steps_per_loop=2,trainer.checkpoint_interval=2",
          "--train_batch_size=4", "--eval_batch_size=4", "--deterministic",
          "--splits=dev", "--strategy=one_device", "--nojit_compile"]


def _comparable(results_file, out_dir):
  return json.loads(results_file.read_text().replace(str(out_dir), "OUT"))


def test_sigkill_mid_sweep_then_rerun_equals_uninterrupted(
    xnli_records, checkpoint_dir, tmp_path):
  out = tmp_path / "killed"
  proc = subprocess.Popen(
      [sys.executable, "-m", "rembert_tf.finetune"] +
      _flags(xnli_records, checkpoint_dir, out),
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
      env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT)))
  seen = []
  for line in proc.stdout:
    seen.append(line)
    # The second run has trained past its first checkpoint (step 2).
    if "lr=0.002 seed=0: step 4/6" in line:
      proc.send_signal(signal.SIGKILL)
      break
  proc.wait(timeout=60)
  assert proc.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
  run1, run2 = out / "runs/lr-0.001_seed-0", out / "runs/lr-0.002_seed-0"
  assert (run1 / "run.json").exists() and not (run2 / "run.json").exists()
  assert (run2 / "ckpt-2.index").exists()
  assert not (out / "results.json").exists()

  lines = []
  finetuning_testlib.finetune(
      "xnli", out, init_checkpoint=str(checkpoint_dir),
      records_dir=str(xnli_records), progress=lines.append, **SWEEP)
  console = "\n".join(lines)
  assert "xnli lr=0.001 seed=0: finished earlier, skipped" in console
  assert "xnli lr=0.002 seed=0: resuming from" in console
  assert "at step 2/6" in console or "at step 4/6" in console
  resumed_steps = [l.split(": step ")[1].split(" ")[0] for l in lines
                   if "lr=0.002 seed=0: step" in l]
  assert resumed_steps[-1] == "6/6" and "2/6" not in resumed_steps  # no redo
  assert "lr=0.001 seed=0: step" not in console

  reference = tmp_path / "uninterrupted"
  finetuning_testlib.finetune(
      "xnli", reference, init_checkpoint=str(checkpoint_dir),
      records_dir=str(xnli_records), progress=lambda s: None, **SWEEP)
  assert (_comparable(out / "results.json", out) ==
          _comparable(reference / "results.json", reference))
  # Finished runs keep their results, not their training checkpoints.
  assert not list(run2.glob("ckpt-*"))

"""Fine-tuning a tiny model per task type; predictions read back by the scorer."""
import json
import pathlib
import shutil

import pytest
import tensorflow as tf

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.data import finetuning_data
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.runtime import preemption
import finetuning_testlib  # tests/finetuning/

QUIET = lambda s: None  # noqa: E731


def _run(task, records, out, checkpoint, **kwargs):
  args = dict(learning_rates=[1e-3], num_train_steps=3, train_batch_size=4,
              eval_batch_size=4, progress=QUIET)  # XLA: the device's default
  args.update(kwargs)
  return finetuning_testlib.finetune(task, out, init_checkpoint=str(checkpoint),
                                          records_dir=records, **args)


def test_panx_tags_per_word_with_xla(checkpoint_dir, sp_model, download_dir,
                                     tmp_path):
  finetuning_data.create_finetuning_data(
      "panx", download_dir, sp_model, tmp_path / "rec", seq_length=8,
      progress=QUIET)
  lines = []
  results = _run("panx", tmp_path / "rec/panx", tmp_path / "out", checkpoint_dir,
                 compare_paper=True, jit_compile=True, progress=lines.append)
  assert set(results["scores"]["f1"]) == {"ar", "en", "de"}
  assert ("[finetune] XLA on: trainer.jit_compile=true in the experiment "
          "(--nojit_compile or trainer.jit_compile=false turns it off)") in lines
  assert "| panx | f1 |" in results["markdown"]
  assert "paper coupled" in results["markdown"]
  # One console line per loop, with the loss.
  assert any("panx lr=0.001 seed=0: step 3/3 | loss" in l for l in lines)
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
  assert list((run_dir / "train").iterdir()), "TensorBoard summaries"


def test_tydiqa_from_download_dir_span_predictions(checkpoint_dir,
                                                   download_dir, tmp_path):
  """Records written from --data_dir with the checkpoint's tokenizer; the
  test split (TyDi QA dev) is scored; answers are spans of the context."""
  results = finetuning_testlib.finetune(
      "tydiqa", tmp_path / "tydiqa", init_checkpoint=str(checkpoint_dir),
      data_dir=download_dir, seq_length=32, num_train_steps=2,
      train_batch_size=4, eval_batch_size=4, jit_compile=False,
      compare_paper=True, progress=QUIET)
  scores = json.loads((tmp_path / "tydiqa/results.json").read_text())["scores"]
  assert set(scores["exact_match"]) == {"en", "ar"}
  assert "| tydiqa | f1 |" in results["markdown"]
  preds = json.loads((pathlib.Path(results["runs"][0]["run_dir"]) /
                      "predictions/tydiqa/test-ar.json").read_text())
  assert set(preds) == {"a1"}
  assert preds["a1"] in "باريس عاصمة فرنسا. الكتاب الجديد على الطاولة."


def test_records_of_another_sentencepiece_model_are_refused(
    checkpoint_dir, sp_model, xnli_records, tmp_path):
  other = tmp_path / "other_ckpt"
  shutil.copytree(checkpoint_dir, other)
  (other / checkpoint_layout.SENTENCEPIECE_FILE).write_bytes(
      sp_model.read_bytes() + b"\n")  # another model, as far as hashes go
  with pytest.raises(finetuning_data.TaskDataError) as e:
    _run("xnli", xnli_records, tmp_path / "out", other, splits=("dev",))
  message = str(e.value)
  assert isinstance(e.value, errors.RemBertError)
  assert str(other / checkpoint_layout.SENTENCEPIECE_FILE) in message
  assert fileio.sha256(sp_model) in message
  assert fileio.sha256(other / checkpoint_layout.SENTENCEPIECE_FILE) in message
  assert "--allow_sentencepiece_mismatch" in message
  assert not (tmp_path / "out/runs").exists()
  lines = []
  _run("xnli", xnli_records, tmp_path / "out", other, splits=("dev",),
       allow_sentencepiece_mismatch=True, progress=lines.append)
  assert any("WARNING" in l and "sp_model_sha256" in l for l in lines)


def test_finetune_and_score_on_ram_filesystem(checkpoint_dir, sp_model,
                                              download_dir):
  root = "ram://finetune_test"
  finetuning_data.create_finetuning_data(
      "xnli", download_dir, sp_model, f"{root}/records", seq_length=24,
      languages=["en", "de"], splits=("dev",), progress=QUIET)
  results = _run("xnli", f"{root}/records/xnli", f"{root}/out", checkpoint_dir,
                 splits=("dev",))
  assert fileio.exists(f"{root}/out/results.json")
  run_dir = results["runs"][0]["run_dir"]
  assert run_dir.startswith("ram://")
  rescored = xtreme_scorer.evaluate_folders(
      f"{run_dir}/predictions", f"{root}/records/xnli/labels", split="dev")
  assert rescored["xnli"]["accuracy"] == results["scores"]["accuracy"]
  assert len(fileio.read_text(f"{run_dir}/predictions/xnli/dev-de.tsv")
             .splitlines()) == 2


def test_bad_inputs_are_one_line_errors(tiny_cfg, xnli_records, checkpoint_dir,
                                        tmp_path):
  (tmp_path / "empty").mkdir()
  with pytest.raises(finetuning_data.TaskDataError, match="metadata.json"):
    finetuning_testlib.finetune("xnli", tmp_path / "o",
                                     records_dir=tmp_path / "empty",
                                     model_config=tiny_cfg, progress=QUIET)
  with pytest.raises(finetuning_data.TaskDataError, match="field task"):
    _run("panx", xnli_records, tmp_path / "o", checkpoint_dir)
  with pytest.raises(checkpoint_layout.CheckpointError, match="does not exist"):
    _run("xnli", xnli_records, tmp_path / "o", tmp_path / "nope")


def test_random_init_run_then_rerun_with_other_settings_is_refused(
    xnli_records, checkpoint_dir, tmp_path):
  """No --init_checkpoint: the encoder of --model_config starts from random
  weights (the demo's baseline). A rerun with other settings is refused."""
  args = dict(init_checkpoint=None, records_dir=str(xnli_records),
              model_config=str(checkpoint_dir / checkpoint_layout.MODEL_CONFIG_FILE),
              learning_rates=[1e-3], train_batch_size=4, eval_batch_size=4,
              jit_compile=False, splits=("dev",))
  lines = []
  results = finetuning_testlib.finetune(
      "xnli", tmp_path / "o", num_train_steps=1, progress=lines.append, **args)
  assert any("random initialisation" in l for l in lines)
  assert set(results["scores"]["accuracy"]) == {"en", "de", "ar"}
  with pytest.raises(finetuning_experiment.FinetuningError,
                     match="num_train_steps is 1 there, 2 now"):
    finetuning_testlib.finetune(
        "xnli", tmp_path / "o", num_train_steps=2, progress=QUIET, **args)


def test_sigterm_saves_a_checkpoint_and_stops_then_resumes(
    xnli_records, checkpoint_dir, tmp_path):
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  handler = signal.getsignal(signal.SIGTERM)
  args = dict(num_train_steps=4, steps_per_loop=2, checkpoint_interval=100,
              splits=("dev",))

  def progress(line):
    if "step 2/4" in line:
      os.kill(os.getpid(), signal.SIGTERM)   # as a preemption would

  with pytest.raises(preemption.TrainingPreempted,
                     match=r"saved .*ckpt-2 at step 2"):
    _run("xnli", xnli_records, tmp_path / "o", checkpoint_dir,
         progress=progress, **args)
  assert signal.getsignal(signal.SIGTERM) == handler
  run_dir = tmp_path / "o/runs/lr-0.001_seed-0"
  assert (run_dir / "ckpt-2.index").exists()
  # What a save killed half-way leaves: removed when the run starts again.
  (run_dir / "ckpt-3_temp").mkdir()
  (run_dir / "ckpt-3_temp/part-00000-of-00001.data-00000-of-00001").write_bytes(
      b"partial")
  lines = []
  _run("xnli", xnli_records, tmp_path / "o", checkpoint_dir,
       progress=lines.append, **args)
  assert any("resuming from" in l and "at step 2/4" in l for l in lines)
  if not tf.config.list_physical_devices("GPU"):
    assert any(l.startswith("[finetune] XLA off: the default on a CPU")
               for l in lines), lines
  assert not (run_dir / "ckpt-3_temp").exists()
  assert (run_dir / "run.json").exists() and not list(run_dir.glob("ckpt-*"))


def test_sigterm_inside_a_loop_stops_after_the_device_call(
    xnli_records, checkpoint_dir, tmp_path, monkeypatch):
  """A loop of 4 steps runs as calls of about a second; a SIGTERM during the
  first call (one step) saves step 1 and stops, not at the loop's end."""
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  from rembert_tf.runtime import orbit_loop  # pylint: disable=g-import-not-at-top
  next_call = orbit_loop.LoopSteps.__call__

  def kill_during_the_first_call(self, step):
    if int(step) == 0:
      os.kill(os.getpid(), signal.SIGTERM)
    return next_call(self, step)

  monkeypatch.setattr(orbit_loop.LoopSteps, "__call__",
                      kill_during_the_first_call)
  lines = []
  with pytest.raises(preemption.TrainingPreempted,
                     match=r"saved .*ckpt-1 at step 1 and stopped"):
    _run("xnli", xnli_records, tmp_path / "o", checkpoint_dir,
         num_train_steps=4, steps_per_loop=4, checkpoint_interval=100,
         splits=("dev",), progress=lines.append)
  assert not [l for l in lines if "| loss " in l]  # the loop never ended
  assert (tmp_path / "o/runs/lr-0.001_seed-0/ckpt-1.index").exists()


def test_an_output_dir_another_sweep_writes_is_refused(xnli_records,
                                                       checkpoint_dir, tmp_path):
  """One writer per output_dir: a second sweep exits before writing anything."""
  import testlib  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import output_lock  # pylint: disable=g-import-not-at-top
  out = tmp_path / "o"
  with testlib.held_by_another_process(out) as (pid, _):
    with pytest.raises(output_lock.OutputLockedError,
                       match=rf"o is being written by another run \(pid {pid} "):
      _run("xnli", xnli_records, out, checkpoint_dir)
  assert not out.exists()

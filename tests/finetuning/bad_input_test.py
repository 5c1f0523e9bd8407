"""Bad fine-tuning input: one line naming the file or flag and the fix, nothing
written; nothing silently mislabelled; checkpoints that are not intact.

Tables: task files that record creation refuses (a PAN-X line without its
tag, an XNLI dev row without its label, an empty or unlabelled dev file, a
SQuAD answer_start that is not a number, a training set whose answers are
never in their contexts); settings that fine-tuning refuses before any work
(a batch of 0, a negative rate, 0 steps); records it refuses (no training
record, a dev split without labels). Both commands print them as one line.
"""
import json
import pathlib
import shutil

import pytest

import testlib
from rembert_tf.common import errors
from rembert_tf.data import finetuning_data
import finetuning_testlib  # tests/finetuning/

QUIET = lambda line: None  # noqa: E731


def _edit(download: pathlib.Path, name: str, edit) -> str:
  path = download / name
  path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
  return str(path)


def _drop_last_field(line: str) -> str:
  return line.rsplit("\t", 1)[0]


def panx_line_without_its_tag(download):
  path = _edit(download, "panx/train-en.tsv", lambda t: t.replace(
      "Lee\tI-PER\n", "Lee\n", 1))
  return "panx", {}, [f"{path}:2: no tag column, though other lines have one"]


def xnli_dev_row_without_its_label(download):
  path = _edit(download, "xnli/dev-de.tsv", lambda t: "\n".join(
      [_drop_last_field(l) if i == 1 else l
       for i, l in enumerate(t.split("\n"))]))
  return "xnli", {}, [f"{path}:2: no label column, though other rows have one"]


def xnli_dev_without_labels(download):
  path = _edit(download, "xnli/dev-ar.tsv", lambda t: "\n".join(
      _drop_last_field(l) for l in t.split("\n")))
  return "xnli", {}, [f"{path}: the dev file has no labels",
                      "--allow_unlabelled_dev"]


def empty_xnli_dev_file(download):
  path = _edit(download, "xnli/dev-en.tsv", lambda t: "")
  return "xnli", {}, [f"{path}: the dev file holds no example",
                      "--splits test", "--allow_unlabelled_dev"]


def _with_json(edit):
  def apply(text):
    data = json.loads(text)
    edit(data)
    return json.dumps(data)
  return apply


def squad_answer_start_not_a_number(download):
  def text_offset(data):
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0][
        "answer_start"] = "abc"
  path = _edit(download, "squad/train-v1.1.json", _with_json(text_offset))
  return "xquad", {"splits": ("test",)}, [
      f"{path}: question s1: answers[0] needs 'text' (a string) and "
      "'answer_start' (the character offset", "answer_start 'abc'"]


def squad_answers_never_in_their_contexts(download):
  def other_contexts(data):
    for article in data["data"]:
      for paragraph in article["paragraphs"]:
        paragraph["context"] = "Nothing to see here."
  path = _edit(download, "squad/train-v1.1.json", _with_json(other_contexts))
  return "xquad", {"splits": ("test",)}, [
      f"{path}: none of its 8 training questions has its answer in its "
      "context"]


def xnli_dev_not_utf8_on_line_3(download):
  path = download / "xnli/dev-de.tsv"
  rows = [l for l in path.read_bytes().split(b"\n") if l]
  third = rows[0][:5] + b"\xff" + rows[0][5:]   # a labelled row, one bad byte
  path.write_bytes(b"\n".join([rows[0], rows[0], third] + rows[1:]) + b"\n")
  offset = 2 * (len(rows[0]) + 1) + 5
  return "xnli", {}, [f"{path}:3: not UTF-8 text (invalid start byte at byte "
                      f"{offset} of the file, byte 5 of line 3); save the file "
                      "as UTF-8."]


BAD_TASK_FILES = [xnli_dev_not_utf8_on_line_3, panx_line_without_its_tag, xnli_dev_row_without_its_label,
                  xnli_dev_without_labels, empty_xnli_dev_file,
                  squad_answer_start_not_a_number,
                  squad_answers_never_in_their_contexts]


@pytest.mark.parametrize("case", BAD_TASK_FILES, ids=lambda c: c.__name__)
def test_bad_task_files_are_refused_and_nothing_is_written(
    case, download_dir, sp_model, tmp_path):
  download = tmp_path / "download"
  shutil.copytree(download_dir, download)
  task, options, parts = case(download)
  with pytest.raises(errors.RemBertError) as e:
    finetuning_data.create_finetuning_data(
        task, download, sp_model, tmp_path / "records", seq_length=32,
        progress=QUIET, **options)
  message = errors.one_line(e.value)
  for part in parts:
    assert part in message, message
  assert sorted(p.name for p in tmp_path.iterdir()) == ["download"]


@pytest.mark.parametrize("case", [xnli_dev_without_labels, empty_xnli_dev_file],
                         ids=lambda c: c.__name__)
def test_allow_unlabelled_dev_writes_them_unscored(case, download_dir,
                                                   sp_model, tmp_path):
  download = tmp_path / "download"
  shutil.copytree(download_dir, download)
  case(download)
  meta = finetuning_data.create_finetuning_data(
      "xnli", download, sp_model, tmp_path / "records", seq_length=32,
      splits=("dev",), allow_unlabelled_dev=True, progress=QUIET)
  unscored = [l for l, info in meta["splits"]["dev"].items()
              if not (info["has_labels"] and info["num_examples"])]
  assert len(unscored) == 1
  # Fine-tuning refuses the records unless told the same.
  with pytest.raises(errors.RemBertError,
                     match=f"dev-{unscored[0]} has no (labels|examples)"):
    finetuning_testlib.finetune(
        "xnli", tmp_path / "out", records_dir=tmp_path / "records/xnli",
        model_config="tiny", progress=QUIET)
  assert not (tmp_path / "out").exists()


# --- Settings and records refused before any work --------------------------------
BAD_SETTINGS = [
    ({"train_batch_size": 0}, "--train_batch_size 0: must be at least 1."),
    ({"eval_batch_size": 0}, "--eval_batch_size 0: must be at least 1."),
    ({"learning_rates": [-1.0]}, "--learning_rate(s) -1.0: a learning rate "
     "must be a positive number (e.g. 2e-5)."),
    ({"num_train_steps": 0}, "--num_train_steps 0: train at least 1 step, or "
     "leave it out to train --num_train_epochs epochs."),
    ({"num_seeds": 0}, "--num_seeds 0: give at least 1 run per rate."),
    ({"warmup_proportion": 1.5}, "--warmup_proportion 1.5: must lie in [0, 1] "
     "(a share of the training steps)."),
]


@pytest.mark.parametrize("settings, message", BAD_SETTINGS,
                         ids=[next(iter(s)) for s, _ in BAD_SETTINGS])
def test_bad_settings_are_refused_before_any_work(settings, message,
                                                  xnli_records, checkpoint_dir,
                                                  tmp_path):
  with pytest.raises(errors.UsageError) as e:
    finetuning_testlib.finetune(
        "xnli", tmp_path / "out", init_checkpoint=str(checkpoint_dir),
        records_dir=xnli_records, progress=QUIET, **settings)
  assert errors.one_line(e.value) == message
  assert list(tmp_path.iterdir()) == []


def _records_with(xnli_records, tmp_path, edit):
  records = tmp_path / "records"
  shutil.copytree(xnli_records, records)
  meta = json.loads((records / "metadata.json").read_text())
  edit(meta)
  (records / "metadata.json").write_text(json.dumps(meta))
  return records


@pytest.mark.parametrize("edit, parts", [
    (lambda m: m["splits"]["train"]["en"].update(num_features=0),
     ["the English training split", "has no record"]),
    (lambda m: m["splits"]["dev"]["en"].update(has_labels=False),
     ["dev-en has no labels", "the learning rate cannot be selected on it",
      "--allow_unlabelled_dev"]),
], ids=["no_training_record", "unlabelled_dev"])
def test_records_without_training_or_dev_labels_are_refused(
    edit, parts, xnli_records, checkpoint_dir, tmp_path):
  records = _records_with(xnli_records, tmp_path, edit)
  with pytest.raises(errors.RemBertError) as e:
    finetuning_testlib.finetune(
        "xnli", tmp_path / "out", init_checkpoint=str(checkpoint_dir),
        records_dir=records, learning_rates=[1e-3, 2e-3], progress=QUIET)
  message = errors.one_line(e.value)
  assert message.startswith(f"{records}/metadata.json: ")
  for part in parts:
    assert part in message
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["dev-en.tfrecord", "train-en.tfrecord"])
def test_records_cut_short_are_named_before_training(
    name, xnli_records, checkpoint_dir, tmp_path):
  """A records file cut short (a copy or a disk that ran out): the file is
  named before any training step, dev included (not after training, when
  the dev predictions would reach it)."""
  records = tmp_path / "records"
  shutil.copytree(xnli_records, records)
  cut = records / name
  cut.write_bytes(cut.read_bytes()[:-40])
  with pytest.raises(errors.RemBertError) as e:
    finetuning_testlib.finetune(
        "xnli", tmp_path / "out", init_checkpoint=str(checkpoint_dir),
        records_dir=records, learning_rates=[1e-3], progress=QUIET)
  message = errors.one_line(e.value)
  assert message.startswith(f"{cut}: cut short or damaged ("), message
  assert "metadata.json counts" in message and "--overwrite" in message
  assert not (tmp_path / "out" / "runs").exists()


# --- Checkpoints that are not intact -----------------------------------------------
def test_init_checkpoint_and_resume_use_the_newest_intact_checkpoint(
    xnli_records, checkpoint_dir, tiny_cfg, tmp_path, capsys):
  from rembert_tf.checkpoints import checkpoint_writing  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_encoder  # pylint: disable=g-import-not-at-top
  source = tmp_path / "pretrained"
  shutil.copytree(checkpoint_dir, source)
  checkpoint_writing.write_encoder_checkpoint(
      rembert_encoder.build_encoder(tiny_cfg), source, step=8)
  testlib.CHECKPOINT_FAULTS["truncated_data"](
      str(source / "encoder"), str(source / "encoder" / "ckpt-8"))
  args = dict(init_checkpoint=str(source), records_dir=xnli_records,
              learning_rates=[1e-3], num_train_steps=2, steps_per_loop=1,
              checkpoint_interval=1, train_batch_size=4, eval_batch_size=4,
              splits=("dev",), jit_compile=False, keep_checkpoints=True)
  lines = []
  capsys.readouterr()
  finetuning_testlib.finetune("xnli", tmp_path / "out",
                                   progress=lines.append, **args)
  assert f"[finetune] xnli: encoder from {source}/encoder/ckpt-7" in lines
  fallback = [l for l in capsys.readouterr().err.splitlines()
              if "not intact" in l]
  assert len(fallback) == 1, fallback
  assert fallback[0].startswith(f"{source}/encoder: ckpt-8 is not intact "
                                "(ckpt-8.data-00000-of-00001 has ")
  assert fallback[0].endswith("; using ckpt-7, the newest intact checkpoint.")
  # A run killed after a save that was cut short resumes from the one before.
  run_dir = tmp_path / "out/runs/lr-0.001_seed-0"
  (run_dir / "run.json").unlink()
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(run_dir),
                                              str(run_dir / "ckpt-2"))
  lines = []
  finetuning_testlib.finetune("xnli", tmp_path / "out",
                                   progress=lines.append, **args)
  assert any(l.startswith(f"{run_dir}: ckpt-2 is not intact (") and
             l.endswith("; using ckpt-1, the newest intact checkpoint.")
             for l in lines), lines
  assert any(f"resuming from {run_dir}/ckpt-1 at step 1/2" in l
             for l in lines), lines
  assert (run_dir / "run.json").exists()


# --- The commands: one line, exit 1 ----------------------------------------------
def test_the_commands_print_one_line(download_dir, sp_model, xnli_records,
                                     checkpoint_dir, tmp_path):
  download = tmp_path / "download"
  shutil.copytree(download_dir, download)
  _, _, parts = xnli_dev_without_labels(download)
  create = [f"--task=xnli", f"--data_dir={download}", f"--sentencepiece_model={sp_model}",
            f"--output_dir={tmp_path}/records", "--seq_length=32",
            "--splits=dev"]
  created = testlib.run_command_cases(
      "rembert_tf.cli.create_finetuning_data",
      [create, create + ["--allow_unlabelled_dev"],
       create + [f"--output_dir={download}", "--overwrite"]])
  testlib.assert_one_line_error("rembert-create-finetuning-data", created[0],
                                *parts)
  assert created[1]["code"] == 0, created[1]
  testlib.assert_one_line_error(
      "rembert-create-finetuning-data", created[2],
      f"the task folder {download}/xnli lies inside --data_dir {download}")
  assert (download / "xnli").is_dir()  # The input is untouched.
  base = ["--task=xnli", f"--records_dir={xnli_records}",
          f"--init_checkpoint={checkpoint_dir}", f"--output_dir={tmp_path}/ft"]
  cases = [(["--train_batch_size=0"], "--train_batch_size 0: must be at least 1"),
           (["--learning_rate=-1"], "--learning_rate -1.0: a learning rate "
            "must be a positive number"),
           (["--num_train_steps=0"], "--num_train_steps 0: train at least 1 "
            "step"),
           ([f"--output_dir={xnli_records}/ft"], f"--output_dir {xnli_records}"
            f"/ft lies inside --records_dir {xnli_records}"),
           (["--params_override=trainer.nope=1"], "'nope' does not exist in"),
           (["--config_file=xtreme_pawsx", "--params_override=sweep.num_seeds=0"],
            "--num_seeds 0: give at least 1 run per rate")]
  results = testlib.run_command_cases("rembert_tf.cli.finetune",
                                      [base + argv for argv, _ in cases])
  for (_, part), result in zip(cases, results):
    testlib.assert_one_line_error("rembert-finetune", result, part)
  assert not (tmp_path / "ft").exists()
  assert not (xnli_records / "ft").exists()


def test_a_full_disk_names_the_run_and_removes_its_unfinished_checkpoint(
    xnli_records, checkpoint_dir, tmp_path, monkeypatch):
  """The disk fills while a checkpoint is written (emulated where the run
  trains): one line naming the run, no ckpt-N_temp left."""
  import errno  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import sweep  # pylint: disable=g-import-not-at-top

  def fill_the_disk(params, run_dir, *args, **kwargs):
    del params, args, kwargs
    temp = pathlib.Path(run_dir) / "ckpt-3_temp"
    temp.mkdir(parents=True)
    (temp / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    raise OSError(errno.ENOSPC, "No space left on device", str(temp))

  monkeypatch.setattr(sweep, "train_run", fill_the_disk)
  with pytest.raises(errors.InputError) as e:
    finetuning_testlib.finetune(
        "xnli", tmp_path / "out", init_checkpoint=str(checkpoint_dir),
        records_dir=xnli_records, learning_rates=[1e-3], progress=QUIET)
  run_dir = tmp_path / "out/runs/lr-0.001_seed-0"
  assert errors.one_line(e.value) == (
      f"{run_dir}: writing it failed: no space left on the device. The "
      "unfinished checkpoint is removed, the run's earlier checkpoints are "
      "kept. Free space there, then run the same command: it resumes from the "
      "newest checkpoint.")
  assert not list(run_dir.glob("ckpt-*_temp"))

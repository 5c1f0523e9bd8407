"""Bad inputs to conversion and export: one error naming the culprit, nothing lost.

Each case runs the library call a command makes, on a bad input, and checks
that the error is a `RemBertError` (what the commands print as one line,
exit code 1), that its message names the file, and that the output (absent
or an older one) is untouched. Also: leftovers of a killed run are removed by
the next run, outputs get the user's umask, and gs://-style paths (ram://)
work for input and output. Two subprocess runs check the commands' one-line
output itself.
"""
import errno
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import testlib
import conversion_testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.conversion import converter
from rembert_tf.conversion import tensor_sources
from rembert_tf.conversion import weight_layout
from rembert_tf.export import encoder_export
from rembert_tf.export import preprocessor_export
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.checkpoints import pretrainer_restore
from rembert_tf.modeling import rembert_pretrainer

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rembert_dir(tmp_path_factory):
  cfg = conversion_testlib.small_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  conversion_testlib.randomize(model.variables, seed=4)
  path = tmp_path_factory.mktemp("errors") / "rembert_tf"
  with outputs.atomic_directory(str(path)) as tmp:
    checkpoint_writing.write_checkpoint_dir(tmp, cfg, model.encoder, model)
  return path


@pytest.fixture(scope="module")
def hf_dir(rembert_dir, tmp_path_factory):
  out = tmp_path_factory.mktemp("errors_hf") / "hf"
  converter.convert_checkpoint("rembert_tf", "hf", rembert_dir, out)
  return out


def copy_tree(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
  dst.mkdir(parents=True)
  for f in src.iterdir():
    (dst / f.name).write_bytes(f.read_bytes())
  return dst


def truncated_safetensors(hf_dir, tmp_path):
  folder = copy_tree(hf_dir, tmp_path / "truncated")
  data = (folder / "model.safetensors").read_bytes()
  (folder / "model.safetensors").write_bytes(data[:len(data) // 2])
  return ("hf", folder, {}), str(folder / "model.safetensors")


def garbage_safetensors(hf_dir, tmp_path):
  folder = copy_tree(hf_dir, tmp_path / "garbage")
  (folder / "model.safetensors").write_bytes(b"\x13\x00\x00\x00garbage" * 9)
  return ("hf", folder, {}), str(folder / "model.safetensors")


def config_json_as_input(hf_dir, tmp_path):
  del tmp_path
  return ("hf", hf_dir / "config.json", {}), str(hf_dir / "config.json")


def malformed_index(hf_dir, tmp_path):
  folder = copy_tree(hf_dir, tmp_path / "sharded")
  (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": ')
  return ("hf", folder, {}), str(folder / "model.safetensors.index.json")


def index_without_weight_map(hf_dir, tmp_path):
  folder = copy_tree(hf_dir, tmp_path / "sharded")
  (folder / "model.safetensors.index.json").write_text('{"metadata": {}}')
  return ("hf", folder, {}), "weight_map"


def not_a_sentencepiece_model(hf_dir, tmp_path):
  fake = tmp_path / "sentencepiece.model"
  fake.write_text("this is not a SentencePiece model\n")
  return ("hf", hf_dir, {"sp_model": fake}), str(fake)


def sentencepiece_model_as_directory(hf_dir, tmp_path):
  return ("hf", hf_dir, {"sp_model": tmp_path}), str(tmp_path)


def output_side_on_encoder_only_input(hf_dir, tmp_path):
  folder = tmp_path / "encoder_only"
  converter.convert_checkpoint("hf", "rembert_tf", hf_dir, folder,
                               encoder_only=True)
  return ("rembert_tf", folder, {"with_output_side": True}), "no output side"


def contradicting_flags(hf_dir, tmp_path):
  del tmp_path
  return (("hf", hf_dir, {"with_output_side": True, "encoder_only": True}),
          "--encoder_only and --with_output_side")


def missing_input(hf_dir, tmp_path):
  del hf_dir
  return ("rembert_tf", tmp_path / "nothing", {}), str(tmp_path / "nothing")


def truncated_checkpoint_prefix(hf_dir, tmp_path):
  folder = tmp_path / "rembert_tf"
  converter.convert_checkpoint("hf", "rembert_tf", hf_dir, folder)
  prefix = str(folder / "encoder" / "ckpt-0")
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(folder / "encoder"), prefix)
  return (("rembert_tf", prefix, {"encoder_only": True}),
          f"{prefix}: the checkpoint is not intact (ckpt-0.data-00000-of-00001 "
          "has ")


def no_intact_checkpoint(hf_dir, tmp_path):
  folder = tmp_path / "rembert_tf"
  converter.convert_checkpoint("hf", "rembert_tf", hf_dir, folder)
  for part in ("encoder", "pretrainer"):
    testlib.CHECKPOINT_FAULTS["deleted_index"](
        str(folder / part), str(folder / part / "ckpt-0"))
  return ("rembert_tf", folder, {}), "no intact checkpoint (ckpt-0: "


def truncated_tf1_checkpoint(hf_dir, tmp_path):
  del hf_dir
  folder = tmp_path / "released"
  folder.mkdir()
  _, prefix = conversion_testlib.write_released_checkpoint(
      folder, conversion_testlib.small_config())
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(folder), prefix)
  return ("tf1", prefix, {}), f"{prefix}: the checkpoint is not intact"


BAD_INPUTS = [truncated_safetensors, garbage_safetensors, config_json_as_input,
              malformed_index, index_without_weight_map,
              not_a_sentencepiece_model, sentencepiece_model_as_directory,
              output_side_on_encoder_only_input, contradicting_flags,
              missing_input, truncated_checkpoint_prefix, no_intact_checkpoint,
              truncated_tf1_checkpoint]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: c.__name__)
def test_bad_conversion_input_is_one_error_and_keeps_the_old_output(
    case, hf_dir, tmp_path):
  (from_format, input_path, kwargs), culprit = case(hf_dir, tmp_path)
  out = tmp_path / "out"
  out.mkdir()
  (out / "old.txt").write_text("the previous output\n")
  with pytest.raises(errors.RemBertError) as error:
    converter.convert_checkpoint(from_format, "rembert_tf", input_path, out,
                                 overwrite=True, **kwargs)
  message = errors.one_line(error.value)
  assert culprit in message, message
  assert "Traceback" not in message
  assert sorted(p.name for p in tmp_path.rglob(".*")) == []
  assert [p.name for p in out.iterdir()] == ["old.txt"]
  assert (out / "old.txt").read_text() == "the previous output\n"


def test_output_under_an_existing_file_is_one_clear_error(rembert_dir, tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  for call in (
      lambda: converter.convert_checkpoint("rembert_tf", "hf", rembert_dir,
                                           blocker / "out"),
      lambda: encoder_export.export_encoder(rembert_dir, blocker / "sub" / "out"),
      lambda: preprocessor_export.export_preprocessor(
          testlib.sentencepiece_model(), blocker / "pre")):
    with pytest.raises(errors.InputError, match="is a file, not a directory"):
      call()
  assert blocker.read_text() == "x"


def test_export_refuses_a_file_that_is_not_a_sentencepiece_model(rembert_dir,
                                                                  tmp_path):
  fake = tmp_path / "fake.model"
  fake.write_bytes(b"\x00\x01 not a model")
  with pytest.raises(errors.RemBertError, match="fake.model"):
    encoder_export.export_encoder(rembert_dir, tmp_path / "export",
                                  sp_model=fake)
  with pytest.raises(errors.RemBertError, match="fake.model"):
    preprocessor_export.export_preprocessor(fake, tmp_path / "pre")
  assert not (tmp_path / "export").exists() and not (tmp_path / "pre").exists()


def test_stale_temporaries_of_a_killed_run_are_removed(rembert_dir, tmp_path):
  for name in ("out", "export"):  # what a SIGKILL mid-write leaves behind
    stale = tmp_path / f".{name}.tmp-4242-deadbeef"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
  converter.convert_checkpoint("rembert_tf", "hf", rembert_dir, tmp_path / "out",
                               encoder_only=True)
  encoder_export.export_encoder(rembert_dir, tmp_path / "export", verify=False)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "out"]


def test_outputs_get_the_users_umask(rembert_dir, tmp_path):
  previous = os.umask(0o022)
  try:
    converter.convert_checkpoint("rembert_tf", "hf", rembert_dir,
                                 tmp_path / "hf", encoder_only=True)
    converter.convert_checkpoint("rembert_tf", "rembert_tf", rembert_dir,
                                 tmp_path / "dir")
  finally:
    os.umask(previous)
  mode = lambda p: p.stat().st_mode & 0o777
  assert mode(tmp_path / "hf") == 0o755
  assert mode(tmp_path / "hf" / "model.safetensors") == 0o644
  assert mode(tmp_path / "dir") == 0o755
  assert mode(tmp_path / "dir" / "model_config.yaml") == 0o644


def test_ram_filesystem_input_and_output(tmp_path):
  """gs://-style paths: a TF1 checkpoint and an HF directory on ram://."""
  cfg = conversion_testlib.small_config()
  local = tmp_path / "released"
  local.mkdir()
  canonical, prefix = conversion_testlib.write_released_checkpoint(local, cfg)
  remote = "ram://conversion_test/released"
  tf.io.gfile.makedirs(remote)
  for name in os.listdir(local):
    tf.io.gfile.copy(str(local / name), f"{remote}/{name}", overwrite=True)
  converter.convert_checkpoint("tf1", "rembert_tf", f"{remote}/model.ckpt",
                               "ram://conversion_test/dir", with_output_side=True,
                               sp_model=str(testlib.released_layout_sentencepiece()))
  assert tf.io.gfile.exists("ram://conversion_test/dir/pretrainer/checkpoint")
  converter.convert_checkpoint("rembert_tf", "hf", "ram://conversion_test/dir",
                               "ram://conversion_test/hf")
  converter.convert_checkpoint("hf", "rembert_tf", "ram://conversion_test/hf",
                               "ram://conversion_test/back")
  _, pretrainer = pretrainer_restore.load_pretrainer("ram://conversion_test/back")
  values = {s.name: s.read()
            for s in weight_layout.slots_for_pretrainer(pretrainer)}
  for name, value in canonical.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)
  assert checkpoint_layout.find_sentencepiece("ram://conversion_test/back").endswith(
      "sentencepiece.model")
  encoder_export.export_encoder("ram://conversion_test/back",
                                "ram://conversion_test/export")
  loaded = tf.saved_model.load("ram://conversion_test/export")
  assert len(loaded.variables) == len(pretrainer.encoder.variables)


def _tool(name, *args):
  env = dict(os.environ, PYTHONPATH=str(REPO))
  return subprocess.run([sys.executable, str(REPO / "tools" / name), *args],
                        capture_output=True, text=True, env=env, timeout=300,
                        check=False)


def test_commands_print_one_line_and_exit_1(hf_dir, rembert_dir, tmp_path):
  folder = copy_tree(hf_dir, tmp_path / "truncated")
  data = (folder / "model.safetensors").read_bytes()
  (folder / "model.safetensors").write_bytes(data[:100])
  done = _tool("convert_checkpoint.py", "--from=hf", "--to=rembert_tf",
               f"--checkpoint={folder}", f"--output_dir={tmp_path}/out")
  assert done.returncode == 1, done.stderr
  assert "Traceback" not in done.stderr
  lines = [l for l in done.stderr.splitlines() if l.startswith("rembert-")]
  assert len(lines) == 1 and "model.safetensors" in lines[0], done.stderr
  assert not (tmp_path / "out").exists()
  done = _tool("export_savedmodel.py", f"--checkpoint={tmp_path}/nothing",
               f"--output_dir={tmp_path}/export")
  assert done.returncode == 1
  assert "Traceback" not in done.stderr
  lines = [l for l in done.stderr.splitlines() if l.startswith("rembert-")]
  assert len(lines) == 1 and "nothing" in lines[0], done.stderr


# --- Checkpoints that are not intact: the newest intact one, with one line ---
@pytest.fixture(scope="module")
def two_steps_dir(tmp_path_factory):
  """A checkpoint directory with steps 0 and 1 of encoder/ and pretrainer/
  (other weights at each step); -> (directory, step-0 pretrainer)."""
  cfg = conversion_testlib.small_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  conversion_testlib.randomize(model.variables, seed=5)
  step0 = {v.name: v.numpy() for v in model.variables}
  path = tmp_path_factory.mktemp("history") / "rembert_tf"
  checkpoint_writing.write_checkpoint_dir(str(path), cfg, model.encoder, model)
  conversion_testlib.randomize(model.variables, seed=6)
  checkpoint_writing.write_encoder_checkpoint(model.encoder, str(path), step=1)
  checkpoint_writing.write_pretrainer_checkpoint(model, str(path), step=1,
                                                 max_to_keep=2)
  return path, step0


def broken_copy(two_steps_dir, tmp_path, fault):
  """A copy whose newest encoder/ and pretrainer/ checkpoints have `fault`."""
  folder = tmp_path / "broken"
  shutil.copytree(two_steps_dir[0], folder)
  for part in ("encoder", "pretrainer"):
    part_line = testlib.CHECKPOINT_FAULTS[fault](
        str(folder / part), str(folder / part / "ckpt-1"))
  return folder, part_line


@pytest.mark.parametrize("fault", sorted(testlib.CHECKPOINT_FAULTS))
def test_convert_reads_the_newest_intact_checkpoint(fault, two_steps_dir,
                                                    tmp_path, capsys):
  folder, part = broken_copy(two_steps_dir, tmp_path, fault)
  capsys.readouterr()
  converter.convert_checkpoint("rembert_tf", "rembert_tf", folder,
                               tmp_path / "out")
  fallback = [l for l in capsys.readouterr().err.splitlines()
              if "is not intact" in l]
  assert len(fallback) == 1, fallback  # the pretrainer's: what was read
  assert fallback[0].startswith(f"{folder}/pretrainer: ckpt-1 is not intact (")
  assert fallback[0].endswith("; using ckpt-0, the newest intact checkpoint.")
  assert part in fallback[0]
  _, converted = pretrainer_restore.load_pretrainer(tmp_path / "out")
  for variable in converted.variables:
    np.testing.assert_array_equal(variable.numpy(),
                                  two_steps_dir[1][variable.name],
                                  err_msg=variable.name)


def test_export_reads_the_newest_intact_checkpoint(two_steps_dir, tmp_path,
                                                   capsys):
  folder, _ = broken_copy(two_steps_dir, tmp_path, "truncated_data")
  capsys.readouterr()
  encoder_export.export_encoder(folder, tmp_path / "export", verify=False)
  fallback = [l for l in capsys.readouterr().err.splitlines()
              if "is not intact" in l]
  assert len(fallback) == 1, fallback  # the encoder's: what was read
  assert fallback[0].startswith(
      f"{folder}/encoder: ckpt-1 is not intact (ckpt-1.data-00000-of-00001 "
      "has ")
  assert fallback[0].endswith("; using ckpt-0, the newest intact checkpoint.")
  loaded = tf.saved_model.load(str(tmp_path / "export"))
  by_name = {v.name: v.numpy() for v in loaded.variables}
  some = next(n for n in two_steps_dir[1] if "word_embeddings" in n)
  exported = next(v for n, v in by_name.items() if "word_embeddings" in n)
  np.testing.assert_array_equal(exported, two_steps_dir[1][some])


# --- The disk fills up, the output is a link to nowhere ------------------------
def _disk_full(*args, **kwargs):
  del args, kwargs
  raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _tf_disk_full(*args, **kwargs):
  del args, kwargs
  raise tf.errors.ResourceExhaustedError(
      None, None, "/out/.x.tmp-1@h-ab/encoder/ckpt-0_temp/part-00000-of-00001"
      ".data-00000-of-00001.tempstate1; No space left on device")


@pytest.mark.parametrize("target, module, function, fault", [
    ("hf", tensor_sources, "write_safetensors", _disk_full),
    ("rembert_tf", checkpoint_writing, "write_checkpoint_dir", _tf_disk_full),
])
def test_a_full_disk_is_one_line_naming_the_output(
    target, module, function, fault, rembert_dir, tmp_path, monkeypatch):
  out = tmp_path / "out"
  monkeypatch.setattr(module, function, fault)
  with pytest.raises(errors.InputError) as e:
    converter.convert_checkpoint("rembert_tf", target, rembert_dir, out)
  assert errors.one_line(e.value) == (
      f"{out}: writing it failed: no space left on the device. Nothing was "
      "written (its temporary files are removed; an existing output is "
      f"kept). Free space where {out} goes, or choose an output on another "
      "disk, then run again.")
  assert list(tmp_path.iterdir()) == []


def test_an_output_link_to_nowhere_is_refused_before_any_work(rembert_dir,
                                                             tmp_path):
  (tmp_path / "loop").symlink_to("loop")
  (tmp_path / "dangling").symlink_to("nowhere")
  for out in ("loop", "dangling", "loop/inside"):
    with pytest.raises(errors.InputError) as e:
      converter.convert_checkpoint("rembert_tf", "hf", rembert_dir,
                                   tmp_path / out)
    assert "is a symbolic link that leads nowhere (a loop or a missing " \
        "target: " in errors.one_line(e.value)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "loop"]


# --- The export command: every flag checked before any work --------------------
def test_export_command_checks_its_flags_before_writing(two_steps_dir,
                                                        tmp_path):
  folder, _ = broken_copy(two_steps_dir, tmp_path, "truncated_data")
  out = str(tmp_path / "export")
  base = [f"--checkpoint={folder}", f"--output_dir={out}",
          f"--sentencepiece_model={testlib.sentencepiece_model()}"]
  cases = [
      (base + ["--export_preprocessor", "--seq_length=-5"],
       ["--seq_length -5: the preprocessor packs [CLS] text [SEP] into it; "
        "give at least 3"]),
      (base + ["--export_preprocessor", "--seq_length=0"], ["--seq_length 0"]),
      (base + ["--export_preprocessor", "--seq_length=999"],
       ["--seq_length 999 exceeds the encoder's max_position_embeddings 24"]),
      (base + ["--export_preprocessor", "--seq_length=16",
               f"--preprocessor_dir={tmp_path}/a_file/p"],
       [f"{tmp_path}/a_file is a file, not a directory"]),
      ([f"--checkpoint={folder}/encoder/ckpt-1", f"--output_dir={out}"],
       [f"{folder}/encoder/ckpt-1: the checkpoint is not intact",
        f"pass {folder}/encoder/ckpt-0"]),
      # Outputs that are, hold or lie inside an input (real paths).
      ([f"--checkpoint={folder}", f"--output_dir={folder}", "--overwrite"],
       [f"--output_dir {folder} is --checkpoint {folder}",
        "Choose --output_dir outside --checkpoint."]),
      ([f"--checkpoint={folder}", f"--output_dir={tmp_path}/link/export"],
       [f"--output_dir {tmp_path}/link/export lies inside --checkpoint"]),
      ([f"--checkpoint={folder}/encoder/ckpt-0", f"--output_dir={folder}",
        "--overwrite"], [f"--output_dir {folder} holds --checkpoint"]),
      ([f"--checkpoint={folder}", f"--output_dir={out}", "--overwrite",
        "--export_preprocessor", "--seq_length=16",
        f"--preprocessor_dir={folder}/pre"],
       [f"--preprocessor_dir {folder}/pre lies inside --checkpoint"]),
  ]
  (tmp_path / "link").symlink_to(folder)
  (tmp_path / "a_file").write_text("x")
  before = sorted(p.name for p in folder.rglob("*"))
  results = testlib.run_command_cases("rembert_tf.cli.export_savedmodel",
                                      [argv for argv, _ in cases])
  for (argv, parts), result in zip(cases, results):
    testlib.assert_one_line_error("rembert-export", result, *parts)
  assert not os.path.exists(out)
  assert not [p for p in tmp_path.iterdir()
              if p.name not in ("broken", "link", "a_file")]
  assert sorted(p.name for p in folder.rglob("*")) == before


@pytest.mark.parametrize("root", ["local", "ram://release_vocab"])
def test_the_release_without_its_vocabulary_is_told_where_it_is(tmp_path, root):
  """A --sentencepiece_model of the release that is not there: the line names the
  file beside the checkpoint and the flag, and nothing is written."""
  release = str(tmp_path / "rembert") if root == "local" else root + "/rembert"
  fileio.makedirs(release)
  prefix = fileio.join(release, "model.ckpt")
  fileio.write_text(prefix + ".index", "not read: the flags are checked first")
  fileio.write_text(fileio.join(release, "config.json"), "not read either")
  beside = fileio.join(release, "sentencepiece.model")
  output = fileio.join(os.path.dirname(release) if root == "local" else root,
                       "converted")
  with pytest.raises(errors.UsageError) as missing:
    converter.convert_checkpoint("tf1", "rembert_tf", prefix, output,
                                 sp_model=fileio.join(release, "spm.model"))
  assert (f"spm.model: no such file; the released RemBERT's SentencePiece "
          f"model (sentencepiece.model) ships beside its checkpoint ({beside} "
          "is missing): download it with the checkpoint and pass it with "
          "--sentencepiece_model." in str(missing.value))
  assert "train" not in str(missing.value)
  fileio.write_text(beside, "the release's vocabulary")
  with pytest.raises(errors.UsageError, match=(
      f"pass the release's vocabulary with --sentencepiece_model {beside}")):
    converter.convert_checkpoint("tf1", "rembert_tf", prefix, output,
                                 sp_model=fileio.join(release, "spm.model"))
  assert not fileio.exists(output)


def test_convert_refuses_an_output_overlapping_its_input(rembert_dir,
                                                         tmp_path):
  (tmp_path / "link").symlink_to(rembert_dir)
  base = ["--from=rembert_tf", "--to=hf", "--overwrite"]
  cases = [
      ([f"--checkpoint={rembert_dir}", f"--output_dir={rembert_dir}"],
       f"--output_dir {rembert_dir} is --checkpoint {rembert_dir}"),
      ([f"--checkpoint={tmp_path}/link", f"--output_dir={rembert_dir}/hf"],
       f"--output_dir {rembert_dir}/hf lies inside --checkpoint {tmp_path}/link"),
      ([f"--checkpoint={rembert_dir}/encoder", f"--output_dir={tmp_path}/link"],
       f"--output_dir {tmp_path}/link holds --checkpoint {rembert_dir}/encoder"),
  ]
  before = sorted(p.name for p in rembert_dir.rglob("*"))
  results = testlib.run_command_cases("rembert_tf.cli.convert_checkpoint",
                                      [base + argv for argv, _ in cases])
  for (_, part), result in zip(cases, results):
    testlib.assert_one_line_error("rembert-convert", result, part)
  assert sorted(p.name for p in rembert_dir.rglob("*")) == before


def test_every_missing_input_of_the_release_is_named_in_one_line(tmp_path):
  """No rembert/ folder at all: the checkpoint, the config and the vocabulary
  in one line, each with the release's file it stands for; nothing written."""
  release = tmp_path / "rembert"
  argv = ["--from=tf1", "--to=rembert_tf", f"--checkpoint={release}/model.ckpt",
          f"--config={release}/config.json",
          f"--sentencepiece_model={release}/sentencepiece.model",
          f"--output_dir={tmp_path}/converted"]
  (result,) = testlib.run_command_cases("rembert_tf.cli.convert_checkpoint",
                                        [argv])
  testlib.assert_one_line_error(
      "rembert-convert", result,
      f"--from tf1 is missing --checkpoint {release}/model.ckpt (no "
      f"{release}/model.ckpt.index: the release's model.ckpt.index and "
      f"model.ckpt.data-* files), --config {release}/config.json (no such "
      f"file: the release's config.json), --sentencepiece_model "
      f"{release}/sentencepiece.model (no such file: the release's "
      "sentencepiece.model); the released RemBERT ships these files together")
  assert "before .index" not in result["stderr"]
  # Without --config: the names looked for beside the checkpoint.
  release.mkdir()
  (release / "sentencepiece.model").write_bytes(b"not read")
  with pytest.raises(errors.InputError, match=(
      r"--from tf1 is missing --checkpoint .*model.ckpt \(no .*model.ckpt.index"
      r".*\), --config \(none of config.json, bert_config.json, "
      r"rembert_config.json beside the checkpoint: the release's config.json\);")):
    converter.convert_checkpoint("tf1", "rembert_tf", release / "model.ckpt",
                                 tmp_path / "converted")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["rembert"]

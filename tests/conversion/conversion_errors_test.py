"""Bad inputs to conversion and export: one error naming the culprit, nothing lost.

Each case runs the library call a command makes, on a bad input, and checks
that the error is a `RemBertError` (what the commands print as one line,
exit code 1), that its message names the file, and that the output (absent
or an older one) is untouched. Also: leftovers of a killed run are removed by
the next run, outputs get the user's umask, and gs://-style paths (ram://)
work for input and output. Two subprocess runs check the commands' one-line
output itself.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import testlib
import conversion_testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.conversion import converter
from rembert_tf.conversion import weight_layout
from rembert_tf.export import encoder_export
from rembert_tf.export import preprocessor_export
from rembert_tf.modeling import checkpoint_layout
from rembert_tf.modeling import checkpoint_restore
from rembert_tf.modeling import rembert_pretrainer

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rembert_dir(tmp_path_factory):
  cfg = conversion_testlib.small_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  conversion_testlib.randomize(model.variables, seed=4)
  path = tmp_path_factory.mktemp("errors") / "rembert_tf"
  with fileio.atomic_directory(str(path)) as tmp:
    checkpoint_layout.write_checkpoint_dir(tmp, cfg, model.encoder, model)
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


BAD_INPUTS = [truncated_safetensors, garbage_safetensors, config_json_as_input,
              malformed_index, index_without_weight_map,
              not_a_sentencepiece_model, sentencepiece_model_as_directory,
              output_side_on_encoder_only_input, contradicting_flags,
              missing_input]


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
  assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
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
  _, pretrainer = checkpoint_restore.load_pretrainer("ram://conversion_test/back")
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
               f"--input={folder}", f"--output={tmp_path}/out")
  assert done.returncode == 1, done.stderr
  assert "Traceback" not in done.stderr
  lines = [l for l in done.stderr.splitlines() if l.startswith("rembert-")]
  assert len(lines) == 1 and "model.safetensors" in lines[0], done.stderr
  assert not (tmp_path / "out").exists()
  done = _tool("export_savedmodel.py", f"--model_dir={tmp_path}/nothing",
               f"--output_dir={tmp_path}/export")
  assert done.returncode == 1
  assert "Traceback" not in done.stderr
  lines = [l for l in done.stderr.splitlines() if l.startswith("rembert-")]
  assert len(lines) == 1 and "nothing" in lines[0], done.stderr

"""fileio on a local directory and on TensorFlow's ram:// filesystem (a stand-in for gs://)."""
import errno
import os
import stat

import pytest

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.common import outputs


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
  if request.param == "local":
    return str(tmp_path)
  return "ram://fileio_test/" + request.node.name.replace("[", "_").replace("]", "")


def test_text_and_json_round_trip(root):
  fileio.write_text(fileio.join(root, "a", "t.txt"), "héllo\n")
  fileio.write_json(fileio.join(root, "a", "j.json"), {"b": 1, "a": [1.5]})
  assert fileio.read_text(fileio.join(root, "a", "t.txt")) == "héllo\n"
  assert fileio.read_json(fileio.join(root, "a", "j.json")) == {"a": [1.5], "b": 1}
  assert fileio.listdir(fileio.join(root, "a")) == ["j.json", "t.txt"]
  assert fileio.glob(fileio.join(root, "a", "*.json")) == [fileio.join(root, "a", "j.json")]
  assert fileio.size(fileio.join(root, "a", "t.txt")) == len("héllo\n".encode())


def test_atomic_write_keeps_old_content_on_failure(root):
  path = fileio.join(root, "f.txt")
  fileio.write_text(path, "old")
  with pytest.raises(RuntimeError):
    with fileio.atomic_write(path) as f:
      f.write("new, half written")
      raise RuntimeError("disk full")
  assert fileio.read_text(path) == "old"
  assert fileio.listdir(root) == ["f.txt"]  # no temporary left


def test_atomic_directory_swaps_in_only_when_complete(root):
  out = fileio.join(root, "out")
  with outputs.atomic_directory(out) as tmp:
    fileio.write_text(fileio.join(tmp, "x"), "1")
  with pytest.raises(errors.OutputExistsError, match="--overwrite"):
    with outputs.atomic_directory(out):
      pass
  with pytest.raises(RuntimeError):
    with outputs.atomic_directory(out, overwrite=True) as tmp:
      fileio.write_text(fileio.join(tmp, "x"), "2")
      raise RuntimeError("killed")
  assert fileio.read_text(fileio.join(out, "x")) == "1"
  with outputs.atomic_directory(out, overwrite=True) as tmp:
    fileio.write_text(fileio.join(tmp, "y"), "2")
  assert fileio.listdir(out) == ["y"]
  assert fileio.listdir(root) == ["out"]


def test_stale_temporaries_of_a_killed_run_are_removed(root):
  out = fileio.join(root, "out")
  stale = fileio.join(root, ".out.tmp-999-dead")
  fileio.write_text(fileio.join(stale, "half"), "x")
  fileio.write_text(fileio.join(root, ".other.tmp-1-a"), "not ours")
  with outputs.atomic_directory(out) as tmp:
    fileio.write_text(fileio.join(tmp, "x"), "1")
  assert fileio.listdir(root) == [".other.tmp-1-a", "out"]


def test_copy_sha256_and_local_copy(root, tmp_path):
  src = fileio.join(root, "src.bin")
  fileio.write_bytes(src, b"\x00\x01" * 1000)
  fileio.write_bytes(fileio.join(root, "dst.bin"), b"replaced")
  fileio.copy(src, fileio.join(root, "dst.bin"))
  assert fileio.sha256(src) == fileio.sha256(fileio.join(root, "dst.bin"))
  with local_files.local_copy(src) as local:
    assert not fileio.is_remote(local)
    with open(local, "rb") as f:
      assert f.read() == b"\x00\x01" * 1000


def test_output_under_a_file_is_one_clear_error(root):
  fileio.write_text(fileio.join(root, "file"), "x")
  with pytest.raises(errors.InputError, match="is a file, not a directory"):
    with outputs.atomic_directory(fileio.join(root, "file", "sub", "out")):
      pass


def test_join_and_dirname_keep_the_scheme():
  assert fileio.join("gs://b/x", "y", "z.json") == "gs://b/x/y/z.json"
  assert fileio.dirname("gs://b/x/y") == "gs://b/x"
  assert fileio.basename("gs://b/x/y/") == "y"
  assert fileio.is_remote("ram://a") and not fileio.is_remote("/tmp/a")


def test_local_outputs_get_the_users_umask(tmp_path):
  old = os.umask(0o022)
  try:
    with outputs.atomic_directory(str(tmp_path / "out")) as tmp:
      fileio.write_text(fileio.join(tmp, "f"), "x")
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o755
  assert stat.S_IMODE(os.stat(tmp_path / "out" / "f").st_mode) == 0o644


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
    RuntimeError("/x/.out.tmp-1@h-2/part-0.tempstate3; No space left on device"),
], ids=["enospc", "quota", "tensorflow"])
def test_a_full_disk_is_one_line_naming_the_output(root, error):
  out = fileio.join(root, "out")
  fileio.write_text(fileio.join(out, "x"), "old")
  with pytest.raises(errors.InputError) as e:
    with outputs.atomic_directory(out, overwrite=True) as tmp:
      fileio.write_text(fileio.join(tmp, "x"), "half")
      raise error
  message = errors.one_line(e.value)
  assert message.startswith(f"{out}: writing it failed: ")
  assert ("quota" in message) == (error.args[0] == errno.EDQUOT)
  assert ".tmp-" not in message and f"Free space where {out} goes" in message
  assert fileio.listdir(root) == ["out"]
  assert fileio.read_text(fileio.join(out, "x")) == "old"


def test_an_output_link_that_leads_nowhere_is_refused(tmp_path):
  (tmp_path / "loop").symlink_to("loop")
  (tmp_path / "dangling").symlink_to("missing")
  (tmp_path / "target").mkdir()
  (tmp_path / "good").symlink_to("target")
  for out, link in (("loop", "loop"), ("dangling", "dangling"),
                    ("loop/a/b", "loop")):
    with pytest.raises(errors.InputError) as e:
      with outputs.atomic_directory(str(tmp_path / out)):
        pass
    assert f"{tmp_path / link} is a symbolic link that leads nowhere" in (
        errors.one_line(e.value))
  with outputs.atomic_directory(str(tmp_path / "good" / "out")) as tmp:
    fileio.write_text(fileio.join(tmp, "x"), "1")
  assert sorted(os.listdir(tmp_path)) == ["dangling", "good", "loop", "target"]
  assert os.listdir(tmp_path / "target") == ["out"]


@pytest.mark.parametrize("root", ["local", "ram://fileio_glob_literal"])
def test_a_path_with_glob_characters_matches_itself(root, tmp_path):
  """`[v2]` in a folder's name is that folder, not a character class."""
  base = str(tmp_path) if root == "local" else root
  folder = fileio.join(base, "runs [v2]", "en")
  fileio.makedirs(folder)
  fileio.write_text(fileio.join(folder, "a.txt"), "x\n")
  assert fileio.glob(fileio.join(folder, "a.txt")) == [
      fileio.join(folder, "a.txt")]
  if root == "local":  # a pattern inside a literal folder
    assert fileio.glob(fileio.join(base, "runs [v2]", "*", "*.txt")) == [
        fileio.join(folder, "a.txt")]
    from rembert_tf.data import text_inputs  # pylint: disable=g-import-not-at-top
    files = text_inputs.resolve_inputs(
        [fileio.join(base, "runs [v2]", "{lang}", "*.txt")])
    assert [(f.language, f.path) for f in files] == [
        ("en", fileio.join(folder, "a.txt"))]
  assert fileio.glob(fileio.join(base, "runs [v2]", "en", "b.txt")) == []

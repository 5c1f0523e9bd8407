"""The fix every TFDS error line suggests works in the installed environment.

A dataset that is not prepared is one line ending in the `tfds build`
command to run (`tfds_reader.build_command`). The test writes a tiny local
dataset builder (three sentences, nothing downloaded), gets that line, runs
the command it names with the `tfds` console script of this environment,
then reads the prepared split. setup.py declares what the command imports
beyond tensorflow-datasets' own requirements.
"""
import ast
import importlib
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

import testlib
from rembert_tf.data import tfds_reader

NAME = "rembert_tiny_sentences"
BUILDER = '''"""Three sentences, generated locally."""
import tensorflow_datasets as tfds


class RembertTinySentences(tfds.core.GeneratorBasedBuilder):
  VERSION = tfds.core.Version("1.0.0")
  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="tiny_es")]

  def _info(self):
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {"train": self._generate_examples()}

  def _generate_examples(self):
    for i, text in enumerate(["El río fluye.", "La casa es roja.", "Hola."]):
      yield i, {"text": text}
'''


def _write_builder(root: pathlib.Path, monkeypatch) -> None:
  """root/NAME/NAME.py, where `tfds build NAME` run in root finds it; also
  imported here (as the package TFDS reads a builder's files from), so that
  this process knows the builder."""
  folder = root / NAME
  folder.mkdir()
  (folder / "__init__.py").write_text("")
  (folder / f"{NAME}.py").write_text(BUILDER, encoding="utf-8")
  monkeypatch.syspath_prepend(str(root))
  importlib.import_module(f"{NAME}.{NAME}")


def _tfds_script():
  script = pathlib.Path(sys.executable).parent / "tfds"
  if not script.exists():
    pytest.skip(f"no tfds console script beside {sys.executable}")
  return str(script)


def test_the_suggested_tfds_build_prepares_the_dataset(tmp_path, monkeypatch):
  _write_builder(tmp_path, monkeypatch)
  data_dir = tmp_path / "tfds data"
  ref = tfds_reader.SplitRef(NAME, "tiny_es", "train")
  with pytest.raises(tfds_reader.TfdsError) as not_prepared:
    tfds_reader.open_builder(ref, data_dir)
  line = str(not_prepared.value)
  suggested = re.search(r"`(tfds build [^`]*)`", line)
  assert suggested, line
  argv = shlex.split(suggested.group(1))   # as a shell would split it
  assert argv == ["tfds", "build", NAME, "--config", "tiny_es", "--data_dir",
                  str(data_dir)], argv
  done = subprocess.run([_tfds_script(), *argv[1:]], cwd=tmp_path,
                        capture_output=True, text=True, timeout=600,
                        check=False)
  assert done.returncode == 0, (suggested.group(1), done.stderr[-3000:])
  builder = tfds_reader.open_builder(ref, data_dir)
  texts = [example["text"] for example in tfds_reader.iter_examples(builder, ref)]
  assert sorted(texts) == ["El río fluye.", "Hola.", "La casa es roja."]


def _install_requires():
  tree = ast.parse((testlib.REPO / "setup.py").read_text(encoding="utf-8"))
  for node in tree.body:
    if (isinstance(node, ast.Assign) and
        getattr(node.targets[0], "id", None) == "INSTALL_REQUIRES"):
      return [ast.literal_eval(element) for element in node.value.elts]
  raise AssertionError("setup.py has no INSTALL_REQUIRES")


@pytest.mark.parametrize("module", ["mlcroissant", "importlib_resources"])
def test_setup_installs_what_tfds_build_imports(module):
  """tensorflow-datasets requires neither for `tfds build` on Python 3.9+:
  its CLI imports mlcroissant, a builder's preparation importlib_resources."""
  names = [re.split(r"[<>=~!;\[ ]", requirement)[0].replace("-", "_").lower()
           for requirement in _install_requires()]
  assert module in names, names

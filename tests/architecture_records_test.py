"""The pre-training records' one reading path, read from the source (no
module is imported): in rembert_tf/pretraining/ and rembert_tf/data/ the
input pipeline (data/pretraining_input_pipeline.py) alone opens record files
(`tf.data.TFRecordDataset`, a `tf_record_iterator`). It checks the files it
is about to read; a module opening them elsewhere is a second reading of the
same files. (The Keras 3 trainer's reader, keras_hub/, is that framework's
own path.)"""
import ast
import pathlib
from typing import List

from architecture_testlib import parse as _parse
from architecture_testlib import write_package as _write_package

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "rembert_tf"
READER = ("data", "pretraining_input_pipeline.py")
AREAS = ("pretraining", "data")
RECORD_READERS = frozenset({"TFRecordDataset", "tf_record_iterator"})


def second_record_readers(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line name` of every record reader named outside the pipeline."""
  found = []
  for area in AREAS:
    for path in sorted((package / area).rglob("*.py")):
      if path == package.joinpath(*READER):
        continue
      for node in ast.walk(_parse(path)):
        name = (node.attr if isinstance(node, ast.Attribute) else
                node.id if isinstance(node, ast.Name) else None)
        if name in RECORD_READERS:
          found.append(f"{path.relative_to(package.parent)}:{node.lineno} "
                       f"{name}")
  return found


def test_the_input_pipeline_alone_reads_the_pretraining_records():
  found = second_record_readers()
  assert not found, ("record files opened outside the input pipeline (check "
                     "them in its load()):\n" + "\n".join(found))


def test_a_second_reader_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "data/pretraining_input_pipeline.py":
          "import tensorflow as tf\nreader = tf.data.TFRecordDataset\n",
      "pretraining/checks.py": """\
          '''Mentions TFRecordDataset in a docstring only.'''
          import tensorflow as tf

          def first_record(path):
            return next(tf.compat.v1.io.tf_record_iterator(path))
          """,
  })
  assert second_record_readers(package) == [
      "pkg/pretraining/checks.py:5 tf_record_iterator"]

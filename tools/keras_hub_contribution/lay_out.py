r"""Lays out this project's keras-hub RemBERT as a keras-hub contribution.

keras-hub asks a new model for its backbone, tokenizer, preprocessors and
tasks in `keras_hub/src/models/<model>/`, their tests beside them, the preset
metadata (`<model>_presets.py`, registered by the package's `__init__.py`),
a Hugging Face converter in `keras_hub/src/utils/transformers/` and a
conversion script in `tools/checkpoint_conversion/`. This command writes
those files into `--output_dir`, in keras-hub's tree, from the port as it is in
`rembert_tf/keras_hub/` (nothing is kept twice: run it again after a change):

| written                                                      | from                                                   |
| ------------------------------------------------------------ | ------------------------------------------------------ |
| keras_hub/src/models/rembert/rembert_*.py (+ helpers)        | rembert_tf/keras_hub/, imports rewritten               |
| keras_hub/src/models/rembert/__init__.py, rembert_presets.py | generated: the classes; the released model's preset    |
| keras_hub/src/models/rembert/rembert_*_test.py, keras_hub/src/utils/transformers/convert_rembert_test.py | tools/keras_hub_contribution/upstream/ (keras-hub's tests, one file per class) |
| keras_hub/src/tests/test_data/rembert_test_vocab.spm, tools/sentencepiece_testing/create_rembert_test_proto.py | generated: the tests' vocabulary (albert's recipe) and its script |
| keras_hub/src/utils/transformers/convert_rembert.py          | rembert_tf/keras_hub/transformers_checkpoint.py, with the Hugging Face names it reads |
| tools/checkpoint_conversion/convert_rembert_checkpoints.py   | tools/keras_hub_contribution/convert_rembert_checkpoints.py |
| UPSTREAM.md                                                  | generated: the edits to keras-hub's shared files made by hand |

The rewrites (tools/keras_hub_contribution/source_rewrite.py) act on the
syntax tree: imports of the port become keras-hub's, public keras-hub names
(`keras_hub.models.Backbone`) are imported from their own modules, classes
register through `keras_hub_export`; module docstrings are left out (keras-hub's
modules have none). The Python files are then formatted as keras-hub's
pre-commit does (tools/keras_hub_contribution/keras_hub_style.py: ruff with
keras-hub's pyproject.toml, a copy in keras_hub_ci/). Needs Keras 3 and
keras-hub (the `[keras]` extra): the public names are looked up in the
installed keras-hub; and ruff unless --noformat.

Usage:
  python tools/keras_hub_contribution/lay_out.py --output_dir /tmp/keras-hub-rembert
  cp -r /tmp/keras-hub-rembert/. ~/keras-hub/       # a keras-hub checkout
"""
import ast
import os
import pathlib
import re
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from absl import flags  # noqa: E402

from rembert_tf.common import command  # noqa: E402
from rembert_tf.common import errors  # noqa: E402
from rembert_tf.common import fileio  # noqa: E402
from rembert_tf.common import outputs  # noqa: E402
import keras_hub_style  # noqa: E402  pylint: disable=g-bad-import-order
import source_rewrite  # noqa: E402  pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parents[2]
PORT = REPO / "rembert_tf" / "keras_hub"
HERE = pathlib.Path(__file__).resolve().parent
MODEL_DIR = "keras_hub/src/models/rembert"
CONVERTER_FILE = "keras_hub/src/utils/transformers/convert_rembert.py"
SCRIPT_FILE = "tools/checkpoint_conversion/convert_rembert_checkpoints.py"
# Modules that tie the port to this project (pre-training from its TFRecords,
# XTREME rows and predictions read back):
# they stay here, keras-hub reads its own data.
PROJECT_ONLY = ("pretraining_records", "masked_lm_pretraining", "windowed_tasks")
# keras-hub's tests of the model, one file per class as keras-hub's albert/
# has, written in keras-hub's form: copied as they are.
UPSTREAM_TESTS = HERE / "upstream"
TEST_VOCAB_FILE = "keras_hub/src/tests/test_data/rembert_test_vocab.spm"
TEST_VOCAB_SCRIPT = "tools/sentencepiece_testing/create_rembert_test_proto.py"
# The test vocabulary: keras-hub's WORD-model recipe (albert's), with
# RemBERT's special pieces.
TEST_VOCAB_SENTENCES = ("the quick brown fox", "the earth is round",
                        "where is the fox")
TEST_VOCAB_OPTIONS = dict(
    vocab_size=14, model_type="WORD", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
    pad_piece="<pad>", unk_piece="<unk>", bos_piece="[CLS]",
    eos_piece="[SEP]", user_defined_symbols="[MASK]")
PRESET = "rembert_multi"
PROG = "keras-hub-lay-out"

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A new folder the keras-hub tree is "
                    "written into.")
flags.DEFINE_bool("overwrite", False, "Replace --output_dir if it exists.")
flags.DEFINE_bool("format", True, "Format the Python files with ruff and "
                  "keras-hub's settings (`ruff format`, then `ruff check "
                  "--fix`), as keras-hub's pre-commit does.")

CONVERTER_DOC = '''"""Hugging Face RemBERT (`model_type: "rembert"`) in keras-hub.

`TransformersPresetLoader` calls `convert_backbone_config`, `convert_weights`
and `convert_tokenizer`; `convert_head` reads the decoupled output
side of a `RemBertForMaskedLM` folder into `RemBertMaskedLM`. Weights are
read one tensor at a time through `UnmappingSafetensorLoader`, which unmaps
the file after each: loading holds about one copy of the model.
"""
'''


def port_context(package_alias_target=None) -> source_rewrite.Context:
  """The port's modules, where each class lives, and its public names."""
  tree = ast.parse((PORT / "__init__.py").read_text(encoding="utf-8"))
  class_modules, public = {}, []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module.startswith(
        source_rewrite.PACKAGE + "."):
      for alias in node.names:
        class_modules[alias.name] = node.module.rsplit(".", 1)[1]
    elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
      public = [element.value for element in node.value.elts]
  modules = [p.stem for p in PORT.glob("*.py")
             if p.stem not in ("__init__", *PROJECT_ONLY)]
  return source_rewrite.Context(modules, class_modules, public,
                                package_alias_target)


def _replace_docstring(source: str, docstring: str) -> str:
  first = ast.parse(source).body[0]
  lines = source.splitlines(keepends=True)
  return docstring + "".join(lines[first.end_lineno:])


def converter_source(ctx) -> str:
  """transformers_checkpoint.py with keras-hub's docstring and the Hugging
  Face names it reads."""
  path = PORT / "transformers_checkpoint.py"
  source = source_rewrite.rewrite_module(path.read_text(encoding="utf-8"), ctx,
                                         str(path))
  source = _replace_docstring(source_rewrite.drop_unused_imports(source),
                              CONVERTER_DOC)
  vendored = source_rewrite.vendored_names(
      (REPO / "rembert_tf" / "conversion" / "weight_layout.py").read_text(
          encoding="utf-8"))
  # What the copied definitions use.
  source = source.replace("\nimport numpy", "\nimport re\nfrom typing import "
                          "Tuple\n\nimport numpy", 1)
  return (source.rstrip("\n") + "\n\n\n# Hugging Face names of RemBERT's "
          "weights.\n" + vendored)


def init_source(ctx) -> str:
  imports = "".join(
      f"from {source_rewrite.MODELS}.{ctx.class_modules[name]} import {name}\n"
      for name in sorted(ctx.public))
  return (f'"""RemBERT: decoupled input and output embeddings."""\n{imports}'
          f"from {source_rewrite.MODELS}.rembert_presets import backbone_presets\n"
          "from keras_hub.src.utils.preset_utils import register_presets\n\n"
          "register_presets(backbone_presets, RemBertBackbone)\n")


def presets_source() -> str:
  """The released RemBERT's preset metadata; the parameter count is the
  backbone's (encoder and pooler), counted from configs/models/rembert.yaml."""
  from rembert_tf.modeling import parameter_count  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  cfg = rembert_config.load_model_config("rembert")
  counts = parameter_count.closed_form_counts(cfg)
  description = (
      f"{cfg.num_hidden_layers}-layer multilingual RemBERT: input embedding "
      f"{cfg.input_embedding_size} wide, projected to {cfg.hidden_size}; the "
      f"decoupled output embedding ({cfg.output_embedding_size}) is "
      "RemBertMaskedLM's. The released checkpoint's encoder.")
  return (
      '"""RemBERT preset configurations."""\n\n'
      "backbone_presets = {\n"
      f'    "{PRESET}": {{\n'
      '        "metadata": {\n'
      '            "description": (\n'
      + "".join(f"                {part!r}\n" for part in textwrap.wrap(
          description, 58, drop_whitespace=False))
      + "            ),\n"
      f'            "params": {counts.ft_params + counts.pooler_params},\n'
      '            "path": "rembert",\n'
      "        },\n"
      "        # Set when keras-hub's maintainers upload the preset.\n"
      f'        "kaggle_handle": "kaggle://keras/rembert/keras/{PRESET}/1",\n'
      "    },\n}\n")


UPSTREAM = f"""# RemBERT in keras-hub: the edits made by hand

Written by tools/keras_hub_contribution/lay_out.py beside the files it lays out.

1. `keras_hub/src/utils/transformers/preset_loader.py`: import `convert_rembert` and choose it
   for `model_type == "rembert"`. To load `RemBertMaskedLM` from a `RemBertForMaskedLM` folder
   with its output side, `load_task` passes `output_embedding_size` from `config.json` as
   `output_embedding_dim` and calls `convert_rembert.convert_head(task, preset)`.
2. Export the public names: run keras-hub's API generator (`./shell/api_gen.sh`); the classes
   carry `keras_hub_export`.
3. Tests: one `*_test.py` per class beside the model and `convert_rembert_test.py`, on tiny
   configs and `{TEST_VOCAB_FILE}` (written by `{TEST_VOCAB_SCRIPT}`);
   `pytest keras_hub/src/models/rembert keras_hub/src/utils/transformers/convert_rembert_test.py`.
4. Convert and upload the preset:
   `python {SCRIPT_FILE} --preset {PRESET} --source hf --checkpoint <Hugging Face folder>`, upload
   `./{PRESET}` and set its `kaggle_handle` in `rembert_presets.py`.
"""


def test_vocab_script() -> str:
  """keras-hub's script that writes the test vocabulary (as albert's)."""
  options = "".join(f"        {k}={v!r},\n" for k, v in TEST_VOCAB_OPTIONS.items())
  return ("from tools.sentencepiece_testing.utils import train_sentencepiece\n"
          "\n\ndef main():\n    train_sentencepiece(\n"
          f"        {list(TEST_VOCAB_SENTENCES)!r},\n"
          f'        "{pathlib.PurePosixPath(TEST_VOCAB_FILE).name}",\n'
          f"{options}    )\n\n\nif __name__ == \"__main__\":\n    main()\n")


def test_vocab_bytes() -> bytes:
  """The test vocabulary, trained as the script above trains it (SentencePiece
  training is deterministic: the same bytes every run)."""
  import io  # pylint: disable=g-import-not-at-top
  import sentencepiece  # pylint: disable=g-import-not-at-top
  model = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(TEST_VOCAB_SENTENCES), model_writer=model,
      minloglevel=2, **TEST_VOCAB_OPTIONS)
  return model.getvalue()


def drop_module_docstring(source: str) -> str:
  """keras-hub's modules have none: the classes' docstrings are the API's,
  and this project's module docstrings speak of the project."""
  tree = ast.parse(source)
  first = tree.body[0] if tree.body else None
  if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
          and isinstance(first.value.value, str)):
    return source
  lines = source.splitlines(keepends=True)
  return "".join(lines[first.end_lineno:]).lstrip("\n").replace(
      " (see the module docstring)", "")


def drop_snippet_markers(source: str) -> str:
  """The markers this project's docs tests read (`<!-- snippet: ... -->`
  above a docstring example) have no meaning in keras-hub."""
  return re.sub(r"(?m)^[ \t]*<!-- snippet:.*-->[ \t]*\n", "", source)


def laid_out_files():
  """keras-hub path -> text of every file laid out."""
  ctx = port_context()
  files = {}
  for path in sorted(PORT.glob("*.py")):
    if path.stem in ("__init__", "transformers_checkpoint", *PROJECT_ONLY):
      continue
    files[f"{MODEL_DIR}/{path.name}"] = drop_snippet_markers(
        drop_module_docstring(source_rewrite.rewrite_module(
            path.read_text(encoding="utf-8"), ctx, str(path))))
  for path in sorted(UPSTREAM_TESTS.rglob("*.py")):
    files[str(path.relative_to(UPSTREAM_TESTS))] = path.read_text(
        encoding="utf-8")
  files[TEST_VOCAB_SCRIPT] = test_vocab_script()
  files[CONVERTER_FILE] = converter_source(ctx)
  files[f"{MODEL_DIR}/__init__.py"] = init_source(ctx)
  files[f"{MODEL_DIR}/rembert_presets.py"] = presets_source()
  script = HERE / "convert_rembert_checkpoints.py"
  files[SCRIPT_FILE] = source_rewrite.rewrite_module(
      script.read_text(encoding="utf-8"), port_context("keras_hub.models"),
      str(script))
  files["UPSTREAM.md"] = UPSTREAM
  return files


@errors.command(PROG)
def main(argv):
  del argv
  try:
    files = laid_out_files()
    if FLAGS.format:
      files.update(keras_hub_style.keras_hub_style(
          {name: text for name, text in files.items() if name.endswith(".py")}))
  except (source_rewrite.LayoutError, keras_hub_style.StyleError) as e:
    raise errors.InputError(str(e)) from None
  files[TEST_VOCAB_FILE] = test_vocab_bytes()
  with outputs.atomic_directory(FLAGS.output_dir, overwrite=FLAGS.overwrite) as tmp:
    for name, content in files.items():
      path = fileio.join(tmp, name)
      fileio.makedirs(fileio.dirname(path))
      if isinstance(content, bytes):
        fileio.write_bytes(path, content)
      else:
        fileio.write_text(path, content)
  print(f"Wrote {len(files)} files under {FLAGS.output_dir}; the edits made by "
        f"hand are in {fileio.join(FLAGS.output_dir, 'UPSTREAM.md')}")


if __name__ == "__main__":
  command.run(main, __doc__, program=PROG, output_dir_flag="output_dir",
              artefact=True, required=["output_dir"])

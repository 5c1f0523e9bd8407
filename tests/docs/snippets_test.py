"""Every bash and python block of README.md and docs/*.md runs as printed, or
says why not (the marker vocabulary is in snippets_testlib.py and
docs/design.md, "Snippets in the docs").

- Every block carries a marker; a block without one fails the suite.
- The `run` blocks of each page (README.md's run in readme_quickstart_test)
  run in page order in one fresh directory that holds the page's setups;
  each must exit 0.
- Every Python block compiles, whether it runs or not.
"""
import functools
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import snippets_testlib as snippets
import testlib

BIN = pathlib.Path(sys.executable).parent
README = snippets.REPO / "README.md"


# --- Setups a page names: built once per session, copied into its directory ---
def _corpus(root: pathlib.Path):
  """corpus/: the tests' 0.3 MB demo corpus (7 languages, 2 files each)."""
  shutil.copytree(testlib.demo_corpus_dir(), root / "corpus")


@functools.lru_cache(maxsize=None)
def _built_pretrain_run() -> pathlib.Path:
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import outputs  # pylint: disable=g-import-not-at-top
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_writing  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_pretrainer  # pylint: disable=g-import-not-at-top
  cfg = testlib.tiny_config(vocab_size=testlib.SENTENCEPIECE_VOCAB_SIZE,
                            max_position_embeddings=128)
  model = rembert_pretrainer.build_pretrainer(cfg)
  path = testlib.shared_dir() / "snippets_pretrain_run"
  with outputs.atomic_directory(path) as tmp:
    checkpoint_writing.write_checkpoint_dir(tmp, cfg, model.encoder, model)
    tokenizer.copy_sentencepiece(
        testlib.sentencepiece_model(),
        fileio.join(tmp, checkpoint_layout.SENTENCEPIECE_FILE))
  return path


def _pretrain_run(root: pathlib.Path):
  """runs/pretrain/: a tiny model's checkpoint directory, as `rembert-train`
  leaves it (model_config.yaml, encoder/, pretrainer/, sentencepiece.model)."""
  shutil.copytree(_built_pretrain_run(), root / "runs" / "pretrain")


SETUPS = {"corpus": _corpus, "pretrain_run": _pretrain_run}


# --- Running ------------------------------------------------------------------
def run_block(snippet, cwd: pathlib.Path, scripts: pathlib.Path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
             PYTHONPATH=os.pathsep.join([str(snippets.REPO),
                                         os.environ.get("PYTHONPATH", "")]))
  if snippet.language == "python":
    script = scripts / f"snippet_{snippet.where.rsplit(':', 1)[1]}.py"
    script.write_text(snippet.body + "\n", encoding="utf-8")
    argv = [sys.executable, str(script)]
  else:
    argv = ["bash", "-e", "-o", "pipefail", "-c", snippet.body]
  done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=600, check=False)
  assert done.returncode == 0, (
      f"{snippet.where} exited {done.returncode}:\n{snippet.body}\n"
      f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
  return done.stdout


def run_page(page: pathlib.Path, root: pathlib.Path):
  """The page's `run` blocks in order, in root/page (with its setups)."""
  cwd, scripts = root / "page", root / "scripts"
  cwd.mkdir()
  scripts.mkdir()
  for name in snippets.page_setups(page):
    assert name in SETUPS, f"{page.name}: no snippet setup {name!r} ({sorted(SETUPS)})"
    SETUPS[name](cwd)
  return [run_block(s, cwd, scripts)
          for s in snippets.page_snippets(page) if s.marker == "run"]


def _pages_that_run():
  return [p for p in snippets.PAGES if p != README and any(
      s.marker == "run" for s in snippets.page_snippets(p))]


# --- Tests --------------------------------------------------------------------
def test_every_block_runs_or_says_why_not():
  unmarked, no_reason = [], []
  for page in snippets.PAGES:
    for snippet in snippets.page_snippets(page):
      if snippet.marker is None:
        unmarked.append(snippet.where)
      elif snippet.marker == "not run" and len(snippet.reason) < 8:
        no_reason.append(snippet.where)
  assert not unmarked, (
      "blocks without `<!-- snippet: run -->` or `<!-- snippet: not run: WHY -->` "
      f"on the line above the fence: {unmarked}")
  assert not no_reason, f"`not run` without a reason: {no_reason}"


def test_every_python_block_compiles():
  for page in snippets.PAGES:
    for snippet in snippets.page_snippets(page):
      if snippet.language == "python":
        compile(snippet.body, snippet.where, "exec")


def test_an_unmarked_block_is_found(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("<!-- snippet: run -->\n```bash\necho a\n```\n\n```python\nx = 1\n```\n"
                  "<!-- snippet: not run: needs a Cloud TPU -->\n```bash\nrembert-train\n```\n")
  got = [(s.where.rsplit(":", 1)[1], s.marker, s.reason)
         for s in snippets.blocks(page.read_text().splitlines(), "page")]
  assert got == [("2", "run", ""), ("6", None, ""),
                 ("10", "not run", "needs a Cloud TPU")]


def test_a_failing_block_fails_the_page(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("<!-- snippet: run -->\n```bash\ntouch made\n```\n"
                  "<!-- snippet: run -->\n```python\nimport os\n"
                  "assert os.path.exists('made')\nraise SystemExit(3)\n```\n")
  with pytest.raises(AssertionError, match="page.md:6 exited 3"):
    run_page(page, tmp_path)


@pytest.mark.parametrize("page", _pages_that_run(), ids=lambda p: p.name)
def test_the_page_runs_as_printed(page, tmp_path):
  run_page(page, tmp_path)

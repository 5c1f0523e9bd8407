"""Every docstring `Example:` in rembert_tf/ runs, or says why not.

The examples are found with `ast` (module, class and function docstrings;
snippets_testlib.docstring_examples). One marked `<!-- snippet: not run:
REASON -->` (the vocabulary of snippets_testlib) must compile; every other one
runs as a script: all of them in one interpreter (one TensorFlow start-up),
one after another, each in a fresh temporary directory with a fresh
`__main__` namespace, and must not raise. Command modules (rembert_tf/cli/)
are not searched: their docstring is their --help, whose commands
docs_consistency_test checks for flags.
"""
import ast
import json
import os
import re
import subprocess
import sys

import docs_consistency_test as docs
import snippets_testlib as snippets

# Runs each example given on stdin ([[where, code], ...]) in a fresh directory;
# prints one JSON line per example. Guarded: an example may start workers,
# which re-import this script.
_RUNNER = r"""
import contextlib, io, json, os, sys, tempfile, traceback
if __name__ == "__main__":
  for where, code in json.load(sys.stdin):
    with tempfile.TemporaryDirectory() as folder:
      os.chdir(folder)
      try:
        with contextlib.redirect_stdout(io.StringIO()):
          exec(compile(code, where, "exec"), {"__name__": "__main__"})
        error = None
      except BaseException:  # pylint: disable=broad-except
        error = traceback.format_exc(limit=-3)
      os.chdir("/")
    print(json.dumps({"where": where, "error": error}), flush=True)
"""


def test_examples_are_found():
  found = list(snippets.docstring_examples())
  assert len(found) > 50, len(found)
  wheres = {s.where for s in found}
  assert "rembert_tf/modeling/rembert_config.py:<module>" in wheres
  assert not any("/cli/" in w for w in wheres)


def test_every_unrun_example_says_why_and_compiles():
  vague = []
  for snippet in snippets.docstring_examples():
    compile(snippet.body, snippet.where, "exec")
    if snippet.marker == "not run" and len(snippet.reason) < 8:
      vague.append(snippet.where)
  assert not vague, f"`not run` without a reason: {vague}"


def run_examples(examples):
  """`where:\ntraceback` of each [where, code] that raised (one interpreter)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=os.pathsep.join([str(snippets.REPO),
                                         os.environ.get("PYTHONPATH", "")]))
  done = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(examples),
                        capture_output=True, text=True, env=env, timeout=600,
                        check=False)
  results = [json.loads(line) for line in done.stdout.splitlines()
             if line.startswith("{")]
  assert len(results) == len(examples), done.stderr[-3000:]
  return [f"{r['where']}:\n{r['error']}" for r in results if r["error"]]


def test_every_other_example_runs():
  runnable = [[s.where, s.body] for s in snippets.docstring_examples()
              if s.marker != "not run"]
  assert len(runnable) > 20, len(runnable)
  failed = run_examples(runnable)
  assert not failed, (
      "examples that fail (fix them, or mark them "
      "`<!-- snippet: not run: WHY -->` above the fence):\n" + "\n".join(failed))


def _help_commands(doc: str):
  """The command lines of a --help text (a line starting with a command,
  with its `\\` continuations), fenced or not."""
  text = re.sub(r"\\\n\s*", " ", doc)
  for line in text.splitlines():
    line = line.strip().lstrip("$ ").strip()
    if line.startswith(("rembert-", "python ", "python3 ")):
      yield from docs.shell_commands(line)


def test_the_examples_in_every_commands_help_use_flags_it_has():
  unknown, checked = [], 0
  for path in sorted((snippets.REPO / "rembert_tf" / "cli").glob("*.py")):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    for argv in _help_commands(doc):
      command = docs.command_file(argv)
      if command is None:
        continue
      names, bools = docs.defined_flags(command)
      checked += 1
      for flag in docs.used_flags(docs.command_arguments(argv)):
        base = flag[2:] if flag.startswith("no") and flag[2:] in bools else flag
        if base not in names:
          unknown.append(f"{path.name}: `{' '.join(argv[:2])} ...` has no --{flag}")
  assert checked >= 5, checked
  assert not unknown, "\n".join(unknown)


def test_a_failing_example_is_reported():
  failed = run_examples([["m.py:<module>", "import os\nassert os.listdir('.') == []\n"],
                         ["n.py:f", "open('x', 'w').close()\nraise ValueError('boom')\n"],
                         ["o.py:<module>", "assert not __import__('os').path.exists('x')\n"]])
  assert [f.split(":\n")[0] for f in failed] == ["n.py:f"], failed
  assert "ValueError: boom" in failed[0]

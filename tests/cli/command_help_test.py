"""Every command answers `--help` at once, on absl flags, under its console script's name.

For each console script of setup.py (the table `rembert_tf.common.command_names`
it reads) and each `python -m` form, in a fresh process (a `tools/NAME.py`
file only calls its command's `run()`): `--help` exits 0, prints the command's docstring as written (no
Markdown fence; a `\\` ending an example line kept) under the console
script's name, and imports none of TensorFlow, Model Garden, Keras,
TensorFlow Text, TFDS, Apache Beam or JAX; an unknown flag exits 2 with one
line `NAME: error: ...`. Refused runs (one per command family, each refused
before any file is read) show that the error lines of `main` start with the
console script's name too. No test here builds a model: each process takes
about a second.
"""
import ast
import json
import pathlib
import re
import subprocess
import sys
import time

import pytest

from rembert_tf.common import command_names

REPO = pathlib.Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "official", "keras", "tensorflow_text",
         "tensorflow_datasets", "apache_beam", "tf_keras", "jax")
MARK = "heavy modules loaded: "
# Runs one command the way a user starts it (`script`: the console script's
# `run()` under a launcher path that names nothing; `tools`: a tools/ file;
# `module`: python -m) and prints, at exit, the heavy modules it loaded.
_LAUNCHER = f"""
import atexit, json, runpy, sys
how, target, args = sys.argv[1], sys.argv[2], sys.argv[3:]
atexit.register(lambda: print({MARK!r} + json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in {HEAVY!r})), flush=True))
if how == "script":
  import importlib
  sys.argv = ["/some/bin/launcher"] + args
  importlib.import_module(target).run()
elif how == "tools":
  sys.argv = [target] + args
  runpy.run_path(target, run_name="__main__")
else:
  sys.argv = [target] + args
  runpy.run_module(target, run_name="__main__", alter_sys=True)
"""
SHIMS = {"rembert_tf.train": "rembert-train",
         "rembert_tf.finetune": "rembert-finetune",
         "rembert_tf.demo": "rembert-demo"}


def launch(how: str, target: str, *args: str, cwd=REPO):
  """(exit code, stdout, stderr, heavy modules loaded, seconds)."""
  start = time.monotonic()
  done = subprocess.run([sys.executable, "-c", _LAUNCHER, how, target, *args],
                        cwd=cwd, capture_output=True, text=True, timeout=300,
                        check=False, env={"PYTHONPATH": str(REPO),
                                          "PATH": "/usr/bin:/bin"})
  seconds = time.monotonic() - start
  marked = [l for l in done.stdout.splitlines() if l.startswith(MARK)]
  assert marked, done.stderr[-3000:]
  # Model Garden's flag definitions (the trainers' flags) import absl alone.
  heavy = [m for m in json.loads(marked[-1][len(MARK):])
           if m not in ("official", "official.common", "official.common.flags")]
  return done.returncode, done.stdout, done.stderr, heavy, seconds


def _docstring_source(module: str):
  """The lines of a module's docstring as its source file spells them."""
  path = REPO.joinpath(*module.split("."))
  path = path / "__main__.py" if path.is_dir() else path.with_suffix(".py")
  text = path.read_text(encoding="utf-8")
  return re.match(r'r?"""(.*?)"""', text, re.S).group(1).splitlines()


def _ways_to_run():
  """(how, target, console script) of every way a command is started."""
  ways = [("script", module, name)
          for name, module in command_names.CONSOLE_SCRIPTS.items()]
  ways += [("module", module, name) for module, name in SHIMS.items()]
  return ways


def test_every_console_script_has_a_command_module_and_a_tools_file():
  """A tools/ file only runs its command module's `run()` (so its `--help`
  is the console script's; two of them run below, refused)."""
  assert set(SHIMS.values()) <= set(command_names.CONSOLE_SCRIPTS)
  for name, module in command_names.CLI_COMMANDS.items():
    tree = ast.parse((REPO / "tools" / f"{module}.py").read_text())
    imports = [(node.module, [a.name for a in node.names]) for node in tree.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports == [(f"rembert_tf.cli.{module}", ["run"])], name
    assert command_names.console_script(f"rembert_tf.cli.{module}") == name
  assert command_names.console_script("rembert_tf.demo.__main__") == "rembert-demo"
  assert command_names.console_script("rembert_tf.cli.train") == "rembert-train"
  assert command_names.console_script("tests.some_module") is None


@pytest.mark.parametrize("how,target,name", _ways_to_run(),
                         ids=lambda v: str(v))
def test_help_is_fast_light_and_names_the_console_script(how, target, name):
  code, out, err, heavy, seconds = launch(how, target, "--help")
  assert code == 0, err[-2000:]
  assert heavy == [], f"{target} --help imported {heavy} ({seconds:.1f} s)"
  assert "```" not in out
  # absl lists the command's flags under the program's name.
  assert f"\n{name}:\n" in out, out[-1500:]
  assert "Traceback" not in err, err
  if how == "script":
    # The docstring as written: every `\\` ending a line of its source is
    # printed; the examples use console scripts.
    usage = [l.strip() for l in out.split("\nflags:\n")[0].splitlines()]
    continued = [l for l in _docstring_source(target) if l.endswith("\\")]
    assert len([l for l in usage if l.endswith("\\")]) == len(continued)
    assert not [l for l in usage if l.startswith("python ")], out[:1500]
    print(f"{name} --help: {seconds:.2f} s")


@pytest.mark.parametrize("name", sorted(command_names.CONSOLE_SCRIPTS))
def test_usage_errors_exit_2_with_one_line_naming_the_console_script(name):
  module = command_names.CONSOLE_SCRIPTS[name]
  code, _, err, heavy, _ = launch("script", module, "--no_such_flag=1")
  assert code == 2, err[-2000:]
  assert heavy == [], heavy
  assert err.strip().splitlines() == [
      f"{name}: error: Unknown command line flag 'no_such_flag' "
      f"(see {name} --help)"], err


def test_a_missing_required_flag_is_named_and_exits_2():
  code, _, err, _, _ = launch("script", "rembert_tf.cli.convert_checkpoint",
                              "--from", "tf1")
  assert code == 2
  assert err.strip() == ("rembert-convert: error: --to, --checkpoint, --output_dir "
                         "are required (see rembert-convert --help)")
  code, out, _, _, _ = launch("script", "rembert_tf.cli.run_ablation",
                              "--help")
  assert code == 0 and "(default: None)" not in out
  code, _, err, _, _ = launch("script", "rembert_tf.cli.run_ablation",
                              "--output_dir", "x", "--learning_rates", "1e-5,a")
  assert code == 2 and err.startswith(
      "rembert-run-ablation: error: --learning_rates 1e-5,a: expected "
      "comma-separated numbers"), err


@pytest.mark.parametrize("how,target,args,name,says", [
    ("script", "rembert_tf.demo.__main__", ["extra"], "rembert-demo",
     "unexpected arguments ['extra']"),
    ("module", "rembert_tf.demo", ["extra"], "rembert-demo",
     "unexpected arguments ['extra']"),
    ("tools", "tools/run_ablation.py", ["--output_dir", "{tmp}/a", "extra"],
     "rembert-run-ablation", "unexpected arguments ['extra']"),
    ("script", "rembert_tf.cli.layer_similarity",
     ["--checkpoint", "{tmp}/ckpt", "--sentences", "{tmp}/s.txt",
      "--output_dir", "{tmp}/cka", "extra"], "rembert-layer-similarity",
     "unexpected arguments ['extra']"),
    ("script", "rembert_tf.cli.retrieve",
     ["--checkpoint", "c", "--output_dir", "{tmp}/r", "extra"],
     "rembert-retrieve", "unexpected arguments ['extra']"),
    ("tools", "tools/create_pretraining_data.py",
     ["--input", "{tmp}/c/{{lang}}/*.txt", "--output_dir", "{tmp}/rec",
      "--sentencepiece_model", "{tmp}/sp.model", "--", "--project=p"],
     "rembert-create-pretraining-data", "need --runner"),
    ("script", "rembert_tf.cli.evaluate_xtreme",
     ["--label_folder", "{tmp}/labels"], "rembert-evaluate-xtreme",
     "--prediction_folder is required."),
], ids=lambda v: v if isinstance(v, str) and v.startswith("rembert-") else "")
def test_refused_runs_name_the_console_script(tmp_path, how, target, args,
                                              name, says):
  args = [a.format(tmp=tmp_path) for a in args]
  code, _, err, _, _ = launch(how, target, *args)
  lines = err.strip().splitlines()
  assert code == 1, err[-2000:]
  assert len(lines) == 1 and lines[0].startswith(f"{name}: error: "), err
  assert says.format(tmp=tmp_path) in lines[0], lines[0]


def test_the_docs_show_only_console_scripts_in_command_output():
  """`NAME: error: ...` (and note, done, ...) lines of README.md and docs/
  name commands a user can type."""
  said = re.compile(r"(?<![\w./-])([\w.-]+): (?:error|note|preempted|"
                    r"interrupted|done|full log)\b")
  found = {}
  for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
    for program in said.findall(path.read_text(encoding="utf-8")):
      found.setdefault(program, path.name)
  assert "rembert-convert" in found  # docs/errors.md shows one error line
  unknown = {p: f for p, f in found.items()
             if p not in command_names.CONSOLE_SCRIPTS}
  assert not unknown, unknown

#!/usr/bin/env bash
# The project's two entry points (see README.md):
#   bash run.sh demo   install what is needed, then run the main job on the embedded demo
#   bash run.sh test   install what is needed, then run the whole test suite
# Everything is installed into ./.venv; a re-run reinstalls only when setup.py changed.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.install-stamp"
want="$(sha256sum setup.py | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[run.sh] installing rembert_tf and its dependencies into .venv (first run takes a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test,beam,keras]"
  echo "$want" > "$stamp"
fi
# TensorFlow's start-up lines are hidden by the commands themselves (shown
# with --verbose) and by tests/conftest.py.
cmd=${1:-}
shift || true
# The tests' own packages (CPU PyTorch, keras-hub's harness): test runs only.
test_stamp=".venv/.test-install-stamp"
test_want="$(sha256sum tests/requirements-keras3.txt | cut -d' ' -f1)"
if [ "$cmd" = test ] && { [ ! -f "$test_stamp" ] || [ "$(cat "$test_stamp")" != "$test_want" ]; }; then
  echo "[run.sh] installing the test packages (tests/requirements-keras3.txt) into .venv"
  .venv/bin/python -m pip install --quiet -r tests/requirements-keras3.txt
  echo "$test_want" > "$test_stamp"
fi
case "$cmd" in
  demo) exec .venv/bin/python -m rembert_tf.demo "$@" ;;
  # Three test processes (pytest-xdist), a file's tests in one of them: on
  # two cores a third keeps both busy while a test waits on its
  # subprocesses, files and peers.
  test) exec .venv/bin/python -m pytest -q -n 3 --dist loadfile tests "$@" ;;
  *) echo "usage: bash run.sh demo|test [args...]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Creates .venv/bench-peers: the project's .venv packages (TF 2.20, tf_keras) are
# visible through a .pth file, and the peers of bench/*.py (Hugging Face
# transformers with its TF models, PyTorch) are installed on top, so
# rembert_tf's own environment never gets transformers or torch.
#   bash bench/setup_peers.sh && .venv/bench-peers/bin/python bench/pretrain_step.py
# PROJECT_PYTHON (default .venv/bin/python) and PEERS (default .venv/bench-peers)
# override the two locations, e.g. for a git worktree that shares another
# checkout's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PROJECT_PYTHON="${PROJECT_PYTHON:-.venv/bin/python}"
PEERS="${PEERS:-.venv/bench-peers}"  # inside .venv: git-ignored, removed with it
if [ ! -x "$PROJECT_PYTHON" ]; then
  echo "no $PROJECT_PYTHON: run 'bash run.sh test' (or install .venv) first" >&2
  exit 1
fi
if [ ! -x "$PEERS/bin/python" ]; then
  "$PROJECT_PYTHON" -m venv "$PEERS"
fi
main_site="$("$PROJECT_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
peer_site="$("$PEERS/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# addsitedir (not a bare path) so the main venv's own .pth files (the editable
# rembert_tf install) are processed too.
echo "import site; site.addsitedir('$main_site')" > "$peer_site/_rembert_main_venv.pth"
"$PEERS/bin/python" -m pip install --quiet -r bench/requirements-peers.txt
echo "peers ready: $PEERS/bin/python"

#!/usr/bin/env bash
# Creates .venv/bench-peers: the project's .venv packages (TF 2.20, tf_keras) are
# visible through a .pth file, and Hugging Face transformers is installed on top,
# so rembert_tf's own environment never gets transformers or torch.
#   bash bench/setup_peers.sh && .venv/bench-peers/bin/python bench/pretrain_step.py
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "run 'bash run.sh test' (or install .venv) first" >&2; exit 1
fi
PEERS=.venv/bench-peers  # inside .venv: git-ignored, removed with it
if [ ! -x "$PEERS/bin/python" ]; then
  .venv/bin/python -m venv "$PEERS"
fi
main_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
peer_site="$("$PEERS/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# addsitedir (not a bare path) so the main venv's own .pth files (the editable
# rembert_tf install) are processed too.
echo "import site; site.addsitedir('$main_site')" > "$peer_site/_rembert_main_venv.pth"
"$PEERS/bin/python" -m pip install --quiet -r bench/requirements-peers.txt
echo "peers ready: $PEERS/bin/python"

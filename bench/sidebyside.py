"""Side-by-side timing with one process per contender, run in alternation.

Used by the speed benches. Each contender (a row: implementation x precision
x XLA) is built, compiled and warmed up in a worker process of its own, so
no framework's thread pools, allocator or spinning OpenMP threads slow
another's steps. The coordinator then runs interleaved rounds: in each round
every worker in turn times `steps` steps while the others sleep on their
stdin, and the starting worker rotates from round to round. The reported
step time is the median over all rounds, so load from other processes on the
machine hits every row alike.

Protocol (stdout lines starting with "@@", anything else goes to the log):
the worker prints `@@READY {json}` once built and warmed up; then for each
`RUN n` line on its stdin it prints `@@TIMES [seconds, ...]`; `QUIT` ends it.

Example (worker side, inside a bench script run with `--worker=SPEC`):
```python
sidebyside.serve(step_fn, info=dict(parameters=123))   # step_fn() blocks
```
"""
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The benches measure the checkout they live in (not an installed rembert_tf).
if REPO not in sys.path:
  sys.path.insert(1, REPO)

# The reference config of every bench (model config field names).
REFERENCE_MODEL = dict(
    vocab_size=32000, hidden_size=256, num_hidden_layers=4,
    num_attention_heads=4, intermediate_size=1024, input_embedding_size=128,
    output_embedding_size=512, hidden_act="gelu", hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, max_position_embeddings=512,
    type_vocab_size=2, layer_norm_eps=1e-12)
PEER_LABELS = dict(hf_tf="HF TF", torch="PyTorch")
# Environment of each implementation's worker. PyTorch's OpenMP threads
# spin-wait between parallel regions by default, which slows its steps on a
# shared, loaded machine; passive waiting is its best setting here.
# TensorFlow's thread pool needs no such setting.
IMPL_ENV = dict(torch=dict(OMP_WAIT_POLICY="PASSIVE"))


def peers_python(flag_value: str = "") -> Optional[str]:
  """The side venv's python (bench/setup_peers.sh), or None when absent."""
  python = flag_value or os.path.join(REPO, ".venv", "bench-peers", "bin",
                                      "python")
  return python if os.path.exists(python) else None


def python_has(python: str, module: str) -> bool:
  """Whether `python` can import `module` (checked in a subprocess);
  `module:attribute` also asks for that attribute of the module."""
  module, _, attribute = module.partition(":")
  check = (f"import importlib.util, sys; sys.exit("
           f"importlib.util.find_spec({module!r}) is None)")
  if attribute:  # transformers 5 is installed but has no TF models
    check = f"import {module}; {module}.{attribute}"
  return subprocess.run([python, "-c", check], capture_output=True,
                        check=False).returncode == 0


def find_pythons(peers: Sequence[str], peer_python_flag: str = "") -> Dict:
  """Python to run each implementation with; prints why a peer is skipped.

  rembert_tf rows run with this interpreter; a peer with the first of this
  interpreter and the peers venv that can import what it needs.
  """
  pythons = dict(rembert_tf=sys.executable)
  candidates = [p for p in (sys.executable, peers_python(peer_python_flag)) if p]
  needs = dict(hf_tf=("transformers:TFRemBertModel",),
               torch=("transformers", "torch"))
  for name in peers:
    found = next((p for p in candidates
                  if all(python_has(p, m) for m in needs[name])), None)
    if found:
      pythons[name] = found
    else:
      wanted = " and ".join(m.replace(":", ".") for m in needs[name])
      print(f"skipping peer {name}: {wanted} not found here nor in the "
            "peers venv; run `bash bench/setup_peers.sh`")
  return pythons


def serve(step: Callable[[], None], info: Optional[Dict] = None,
          warmup_steps: int = 3):
  """Worker side: warms up `step`, reports ready, times steps on request."""
  start = time.perf_counter()
  for _ in range(warmup_steps):
    step()
  info = dict(info or {}, warmup_seconds=time.perf_counter() - start)
  protocol = sys.stdout
  sys.stdout = sys.stderr  # keep library prints out of the protocol stream
  print("@@READY " + json.dumps(info), file=protocol, flush=True)
  for line in sys.stdin:
    command = line.split()
    if not command or command[0] == "QUIT":
      break
    times = []
    for _ in range(int(command[1])):
      begin = time.perf_counter()
      step()
      times.append(time.perf_counter() - begin)
    print("@@TIMES " + json.dumps(times), file=protocol, flush=True)


class Worker:
  """Coordinator side: one contender's process."""

  def __init__(self, name: str, argv: Sequence[str], log_path: str,
               spec: Optional[Dict] = None, env: Optional[Dict] = None):
    self.name = name
    self.spec = spec or {}
    self.info: Dict = {}
    self.times: List[float] = []
    self.error: Optional[str] = None
    self._log_path = log_path
    self._log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    env = dict(os.environ, **(env or {}), PYTHONPATH=os.pathsep.join(
        p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p))
    self._process = subprocess.Popen(  # pylint: disable=consider-using-with
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=self._log, text=True, env=env, cwd=REPO)

  @classmethod
  def for_script(cls, script: str, spec: Dict, pythons: Dict,
                 log_dir: str) -> "Worker":
    """A worker running `script --worker=<spec as JSON>` with the python of
    the spec's implementation; its log in log_dir."""
    name = (f"{spec['task']} {spec['impl']} {spec['precision']} "
            f"xla={spec['xla']}")
    return cls(name, [pythons[spec["impl"]], os.path.abspath(script),
                      "--worker=" + json.dumps(spec)],
               os.path.join(log_dir, name.replace(" ", "_") + ".log"), spec,
               env=dict(IMPL_ENV.get(spec["impl"], {}), **spec.get("env", {})))

  def _read(self, tag: str) -> Optional[str]:
    for line in self._process.stdout:
      if line.startswith(tag + " "):
        return line[len(tag) + 1:]
      self._log.write(line)
    self._fail()
    return None

  def _fail(self):
    self._process.wait()
    self._log.flush()
    with open(self._log_path, encoding="utf-8") as f:
      tail = [l.strip() for l in f.read().splitlines() if l.strip()][-1:]
    self.error = (f"exited with {self._process.returncode}: "
                  f"{tail[0] if tail else 'no output'} (log: {self._log_path})")

  def wait_ready(self) -> bool:
    payload = self._read("@@READY")
    if payload is not None:
      self.info = json.loads(payload)
    return payload is not None

  def run(self, steps: int):
    if self.error:
      return
    try:
      self._process.stdin.write(f"RUN {steps}\n")
      self._process.stdin.flush()
    except BrokenPipeError:
      self._fail()
      return
    payload = self._read("@@TIMES")
    if payload is not None:
      self.times += json.loads(payload)

  def close(self):
    if self._process.poll() is None:
      try:
        self._process.stdin.write("QUIT\n")
        self._process.stdin.close()
      except BrokenPipeError:
        pass
      self._process.wait()
    self._log.close()

  @property
  def median(self) -> Optional[float]:
    return statistics.median(self.times) if self.times else None


def run_side_by_side(specs, make_worker: Callable[..., Worker], rounds: int,
                     steps: int, progress=print) -> List[Worker]:
  """Starts the workers one at a time (a build or compilation never overlaps
  another's), then times interleaved rounds; returns the closed workers."""
  workers = []
  for spec in specs:
    worker = make_worker(spec)
    workers.append(worker)
    start = time.perf_counter()
    if worker.wait_ready():
      progress(f"  ready: {worker.name} ({time.perf_counter() - start:.0f}s "
               "to build, compile and warm up)")
    else:
      progress(f"  FAILED: {worker.name}: {worker.error}")
  ready = [w for w in workers if not w.error]
  for r in range(rounds):
    for i in range(len(ready)):
      ready[(r + i) % len(ready)].run(steps)
    progress(f"  round {r + 1}/{rounds} done")
  for worker in workers:
    worker.close()
  return workers


def rows_from_workers(workers: Sequence[Worker]) -> List[Dict]:
  """One result row per worker: its spec's identity, median step, examples/s."""
  rows = []
  for worker in workers:
    spec = worker.spec
    batch = spec.get("batch_size")
    seconds = worker.median
    rows.append(dict(
        task=spec["task"], impl=spec["impl"], precision=spec["precision"],
        xla=spec["xla"], batch_size=batch, seq_length=spec.get("seq_length"),
        step_seconds=seconds,
        examples_per_second=batch / seconds if seconds and batch else None,
        steps_timed=len(worker.times), error=worker.error, **worker.info))
  return rows


def add_ratios(rows: List[Dict], peers: Sequence[str]) -> None:
  """Adds `vs_<peer>` (same precision) and `vs_<peer>_float32` to each row:
  its examples/s over the peer's (> 1 = faster), within the same task."""
  def speed(task, impl, precision):
    return next((r["examples_per_second"] for r in rows
                 if r["task"] == task and r["impl"] == impl
                 and r["precision"] == precision and r["xla"] == "off"
                 and r["examples_per_second"]), None)
  for row in rows:
    for peer in peers:
      for key, precision in ((f"vs_{peer}", row["precision"]),
                             (f"vs_{peer}_float32", "float32")):
        base = speed(row["task"], peer, precision)
        row[key] = (row["examples_per_second"] / base
                    if base and row["examples_per_second"] else None)


def markdown_table(rows: List[Dict], peers: Sequence[str]) -> str:
  """The rows as a Markdown table (ratios > 1: rembert_tf is faster)."""
  header = ["task", "implementation", "precision", "XLA", "step ms",
            "examples/s"]
  for peer in peers:
    header += [f"vs {PEER_LABELS[peer]}", f"vs {PEER_LABELS[peer]} fp32"]
  lines = ["| " + " | ".join(header) + " |",
           "|" + " --- |" * len(header)]
  for r in rows:
    if r.get("error") or not r["examples_per_second"]:
      cells = [r["task"], r["impl"], r["precision"], r["xla"], "failed",
               str(r.get("error"))] + ["" for _ in peers for _ in range(2)]
    else:
      cells = [r["task"], r["impl"], r["precision"], r["xla"],
               f"{1000 * r['step_seconds']:.1f}",
               f"{r['examples_per_second']:.1f}"]
      for peer in peers:
        for key in (f"vs_{peer}", f"vs_{peer}_float32"):
          cells.append(f"{r[key]:.2f}x" if r.get(key) else "")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def check_choices(flag: str, given: Sequence[str], known) -> None:
  """absl's UsageError naming the values of list flag `flag` not in `known`."""
  unknown = sorted(set(given) - set(known))
  if unknown:
    from absl import app  # pylint: disable=g-import-not-at-top
    raise app.UsageError(f"--{flag}: unknown {', '.join(unknown)}; choose "
                         f"from {', '.join(known)}.")


def masked_lm_batch(vocab: int, batch: int, seq: int, preds: int,
                    padding_predictions: int = 0, seed: int = 0) -> Dict:
  """A pre-training batch: random ids with [MASK] (4) at `preds` distinct
  positions per row, the last `padding_predictions` weighted 0 (as padding
  predictions are in the records)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab, size=(batch, seq)).astype(np.int32)
  positions = np.stack([rng.choice(np.arange(1, seq - 1), preds, replace=False)
                        for _ in range(batch)]).astype(np.int32)
  targets = np.take_along_axis(ids, positions, axis=1)
  np.put_along_axis(ids, positions, 4, axis=1)
  weights = np.ones([batch, preds], np.float32)
  if padding_predictions:
    weights[:, -padding_predictions:] = 0.0
  return dict(input_word_ids=ids, input_mask=np.ones_like(ids),
              input_type_ids=np.zeros_like(ids), masked_lm_positions=positions,
              masked_lm_ids=targets.astype(np.int32), masked_lm_weights=weights)


def padded_inputs(spec: Dict):
  """(ids, mask, types, lengths, rng): int32 [batch, seq] padded sentence
  pairs, lengths uniform in [seq/2, seq] (25% padding), the same for every
  contender; `rng` continues the draws (labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  batch, seq = spec["batch_size"], spec["seq_length"]
  rng = np.random.default_rng(0)
  lengths = rng.integers(seq // 2, seq + 1, batch)
  positions = np.arange(seq)[None, :]
  mask = (positions < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, spec["model"]["vocab_size"], (batch, seq)) * mask
  types = ((positions >= lengths[:, None] // 2) * mask).astype(np.int32)
  return ids.astype(np.int32), mask, types, lengths, rng


def report(rows: List[Dict], peers: Sequence[str], json_out: str = "",
           settings: Optional[Dict] = None) -> None:
  """Adds the ratios, prints the end load and the table, writes the JSON
  ({"rows", "flags": settings}) when `json_out` is set."""
  add_ratios(rows, peers=peers)
  print(f"load average at end {os.getloadavg()[0]:.1f}\n")
  print(markdown_table(rows, peers=peers))
  if json_out:
    with open(json_out, "w", encoding="utf-8") as f:
      json.dump(dict(rows=rows, flags=settings or {}), f, indent=1)


def contender_specs(precisions: Sequence[str], xla_settings: Sequence[str],
                    peers: Sequence[str], pythons: Dict,
                    xla_rows: Callable[[str], bool] = lambda precision: True
                    ) -> List[Dict]:
  """The rows to time, per precision: rembert_tf once per XLA setting (with
  XLA only where `xla_rows(precision)`), then every peer with a Python."""
  specs = []
  for precision in precisions:
    for xla in xla_settings:
      if xla == "off" or xla_rows(precision):
        specs.append(dict(impl="rembert_tf", precision=precision, xla=xla))
    for peer in peers:
      if peer in pythons:
        specs.append(dict(impl=peer, precision=precision, xla="off"))
  return specs


if __name__ == "__main__":
  print(__doc__)

r"""Record creation on Apache Beam's local runner vs the local multiprocess tool.

1. Generates (or reuses) a demo corpus and a SentencePiece model of the tiny
   config's vocabulary size.
2. Runs `tools/create_pretraining_data.py` as a command (wall clock, start-up
   included) on the same corpus and settings, alternating the contenders in
   every round (this machine's speed swings with load):
   the local engine with 1 and 2 worker processes, and `--runner
   DirectRunner` with 1 worker (in-process) and 2 worker processes
   (`multi_processing`).
   Each contender runs on the corpus and on the corpus three times over
   (`--copies`, symbolic links: the same text, three times the work).
3. Prints, per contender, the wall clock and the CPU seconds of the command
   and all its processes (Beam's workers and runner, the local workers), and
   from them tokens/s and tokens per CPU-second (throughput per core: it
   holds when other jobs share the cores, where wall-clock per worker does
   not). The steady-state throughput per core is taken from the difference
   between the two corpus sizes (start-up, Beam's import, its worker
   processes and pipeline set-up cancel out). Then Beam / local per core
   (target: Beam within 2x), the 1 -> 2 worker scaling of each engine (wall
   clock, larger corpus), and a check that Beam's shards and metadata.json
   are byte-identical to the local tool's.

Example:
```bash
.venv/bin/python bench/beam_pretraining_data.py                  # 21 MB, 2 rounds
.venv/bin/python bench/beam_pretraining_data.py --megabytes 5 --rounds 1 --json_out /tmp/b.json
```
"""
import argparse
import glob
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
CONTENDERS = (("local", 1), ("beam", 1), ("local", 2), ("beam", 2))


def _args():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--work_dir", default="/tmp/rembert_bench_beam_data")
  parser.add_argument("--megabytes", type=float, default=21.0)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--copies", type=int, default=3,
                      help="The larger corpus is this many copies of the corpus.")
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--max_predictions_per_seq", type=int, default=20)
  parser.add_argument("--num_output_shards", type=int, default=8)
  parser.add_argument("--json_out", default="")
  return parser.parse_args()


def prepare(work: pathlib.Path, megabytes: float):
  """The corpus (28 files, 7 languages) and a vocab-2000 model, reused when present."""
  sys.path.insert(0, str(REPO))
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  from rembert_tf.demo import corpus as demo_corpus  # pylint: disable=g-import-not-at-top
  corpus = work / "corpus"
  done = corpus / "done"
  if not done.exists() or json.loads(done.read_text()).get("megabytes") != megabytes:
    shutil.rmtree(corpus, ignore_errors=True)
    demo_corpus.generate_corpus(corpus, target_megabytes=megabytes,
                                files_per_language=4, seed=0)
    done.write_text(json.dumps({"megabytes": megabytes}))
  model = work / "spm" / "sentencepiece.model"
  if not model.exists():
    sentencepiece_training.train_sentencepiece(
        [str(corpus / "{lang}" / "*.txt")], work / "spm", 2000,
        sample_size=300_000, verbose=False)
  files = glob.glob(str(corpus / "*" / "*.txt"))
  size = sum(os.path.getsize(p) for p in files)
  print(f"corpus: {corpus} ({size / 1e6:.1f} MB, {len(files)} files)", flush=True)
  return corpus, model


def copies_of(corpus: pathlib.Path, work: pathlib.Path, copies: int):
  """A corpus of `copies` symbolic links to each file of `corpus`."""
  target = work / f"corpus_x{copies}"
  shutil.rmtree(target, ignore_errors=True)
  for path in sorted(corpus.glob("*/*.txt")):
    (target / path.parent.name).mkdir(parents=True, exist_ok=True)
    for k in range(copies):
      (target / path.parent.name / f"copy{k}_{path.name}").symlink_to(path)
  return target


def run_tool(work, corpus, model, engine, workers, args, tag):
  out = work / f"records_{tag}_{engine}_{workers}"
  cmd = [sys.executable, "tools/create_pretraining_data.py",
         f"--input={corpus}/{{lang}}/*.txt", f"--output_dir={out}",
         f"--sentencepiece_model={model}", f"--seq_length={args.seq_length}",
         f"--max_predictions_per_seq={args.max_predictions_per_seq}",
         f"--num_output_shards={args.num_output_shards}",
         f"--num_workers={workers}", "--overwrite"]
  if engine == "beam":
    cmd.append("--runner=DirectRunner")
  log = work / f"{tag}_{engine}_{workers}.log"
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.time()
  with open(log, "w") as f:
    proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO),
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                          check=False)
  elapsed = time.time() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  if proc.returncode != 0:
    raise RuntimeError(f"{engine} x{workers} failed; see {log}")
  meta = json.loads((out / "metadata.json").read_text())
  tokens = sum(l["tokens"] for l in meta["languages"].values())
  return out, elapsed, cpu, tokens


def _same_bytes(a: pathlib.Path, b: pathlib.Path) -> bool:
  """Shards and metadata.json equal (the commands' logs/ differ by design)."""
  def names_in(d):
    return sorted(p.name for p in d.iterdir()
                  if p.suffix == ".tfrecord" or p.name == "metadata.json")
  names = names_in(a)
  return names == names_in(b) and all(
      (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main():
  args = _args()
  work = pathlib.Path(args.work_dir)
  work.mkdir(parents=True, exist_ok=True)
  corpus, model = prepare(work, args.megabytes)
  corpora = {"x1": corpus, f"x{args.copies}": copies_of(corpus, work, args.copies)}
  large = f"x{args.copies}"
  best, best_cpu, outputs, tokens = {}, {}, {}, {}
  for round_index in range(args.rounds):
    for tag, path in corpora.items():
      for engine, workers in CONTENDERS:
        out, elapsed, cpu, tokens[tag] = run_tool(work, path, model, engine,
                                                  workers, args, tag)
        outputs[(tag, engine, workers)] = out
        key = f"{tag}_{engine}_{workers}"
        best[key] = min(best.get(key, float("inf")), elapsed)
        best_cpu[key] = min(best_cpu.get(key, float("inf")), cpu)
        print(f"round {round_index + 1}, corpus {tag}: {engine:5s} x{workers}: "
              f"{elapsed:6.1f}s wall ({tokens[tag] / elapsed:,.0f} tokens/s), "
              f"{cpu:6.1f} CPU-s ({tokens[tag] / cpu:,.0f} tokens per CPU-s)",
              flush=True)
  figures = {"megabytes": args.megabytes, "copies": args.copies,
             "tokens": tokens, "rounds": args.rounds,
             "cpu_count": os.cpu_count(),
             "load_average_1min_at_end": round(os.getloadavg()[0], 1)}
  for key, seconds in best.items():
    tag = key.split("_")[0]
    figures[f"{key}_seconds"] = round(seconds, 2)
    figures[f"{key}_cpu_seconds"] = round(best_cpu[key], 2)
    figures[f"{key}_tokens_per_second"] = round(tokens[tag] / seconds)
  for engine, workers in CONTENDERS:
    key = f"{engine}_{workers}"
    extra_cpu = best_cpu[f"{large}_{key}"] - best_cpu[f"x1_{key}"]
    # A corpus too small for the difference to rise above the noise gives
    # no steady-state figure (use --megabytes 20 or more).
    figures[f"{key}_steady_tokens_per_cpu_second"] = (
        round((tokens[large] - tokens["x1"]) / extra_cpu)
        if extra_cpu > 0.1 * best_cpu[f"{large}_{key}"] else None)
  for workers in (1, 2):
    beam_rate = figures[f"beam_{workers}_steady_tokens_per_cpu_second"]
    local_rate = figures[f"local_{workers}_steady_tokens_per_cpu_second"]
    figures[f"beam_over_local_per_core_{workers}"] = (
        round(beam_rate / local_rate, 3) if beam_rate and local_rate else None)
  for engine in ("local", "beam"):
    figures[f"{engine}_scaling_1_to_2"] = round(
        best[f"{large}_{engine}_1"] / best[f"{large}_{engine}_2"], 3)
  figures["beam_bytes_identical_to_local"] = all(
      _same_bytes(outputs[(tag, "local", 1)], outputs[(tag, engine, w)])
      for tag in corpora for engine, w in CONTENDERS)
  for engine, workers in CONTENDERS:
    print(f"steady state, {engine:5s} x{workers}: "
          f"{figures[f'{engine}_{workers}_steady_tokens_per_cpu_second']} "
          "tokens per CPU-s")
  print(f"per core, Beam / local: 1 worker "
        f"{figures['beam_over_local_per_core_1']}x, 2 workers "
        f"{figures['beam_over_local_per_core_2']}x (target >= 0.5x)")
  print(f"scaling 1 -> 2 workers (wall, corpus {large}): local "
        f"{figures['local_scaling_1_to_2']:.2f}x, Beam "
        f"{figures['beam_scaling_1_to_2']:.2f}x (load average "
        f"{figures['load_average_1min_at_end']} on {os.cpu_count()} cores)")
  print(f"Beam output byte-identical to the local tool's: "
        f"{figures['beam_bytes_identical_to_local']}")
  print(json.dumps(figures))
  if args.json_out:
    pathlib.Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
  main()

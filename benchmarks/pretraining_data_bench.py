"""Throughput and peak memory of create_pretraining_data, as ratios measured in one run.

  python benchmarks/pretraining_data_bench.py [--original_script=/path/to/create_pretraining_data.py]

Corpus: the bundled sample_text.txt repeated: x400 (1.8 MB) for throughput, x400 and x800 for
memory. Each configuration runs as its own process; start-up (imports, vocab)
is measured on a one-document input and reported separately, and instances/s excludes it.
Peak RSS is the largest single process of the run (workers included).

Baselines, in the same run: bert_tf's exact mode (always), and the original script when
--original_script points at a copy of google-research/bert's create_pretraining_data.py (run
with its directory on PYTHONPATH; its `import tensorflow` must be patched to tf.compat.v1).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tools", "demo_data")
FLAGS = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
         "--masked_lm_prob=0.15", "--random_seed=12345", "--dupe_factor=5"]

_MEASURE = """
import resource, subprocess, sys, time
start = time.monotonic()
result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.monotonic() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{result.returncode} {wall} {rss}")
sys.stdout.write(result.stdout + result.stderr)
"""


def measure(command, env=None):
    """(wall seconds, peak RSS in MiB, output) of a command run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True,
                         text=True, env=env, check=True).stdout
    header, _, text = out.partition("\n")
    code, wall, rss = header.split()
    if code != "0":
        raise RuntimeError(f"{' '.join(command)} failed:\n{text[-3000:]}")
    return float(wall), int(rss) / 1024, text


def corpus(directory, copies):
    path = os.path.join(directory, f"sample_x{copies}.txt")
    text = open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8").read().rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text * copies)
    return path


def ours(input_file, output, workers=0):
    return [sys.executable, os.path.join(REPO, "tools", "create_pretraining_data.py"),
            f"--input_file={input_file}", f"--output_file={output}",
            f"--vocab_file={DATA}/vocab.txt", f"--num_workers={workers}", "--shard_size_mb=0.25", *FLAGS]


def original(script, input_file, output):
    return [sys.executable, script, f"--input_file={input_file}", f"--output_file={output}",
            f"--vocab_file={DATA}/vocab.txt", *FLAGS]


def instances(text):
    match = re.search(r"Wrote ([\d,]+) (total )?instances", text)
    return int(match.group(1).replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--original_script", help="google-research/bert create_pretraining_data.py (patched import)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.original_script:
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(args.original_script))

    with tempfile.TemporaryDirectory() as tmp:
        tiny, big = corpus(tmp, 1), corpus(tmp, 400)
        rows = []

        def run(name, command_for):
            startup, _, _ = measure(command_for(tiny, os.path.join(tmp, "s.tfrecord")), env)
            wall, rss, text = measure(command_for(big, os.path.join(tmp, "o.tfrecord")), env)
            n = instances(text)
            rate = n / max(wall - startup, 1e-9)
            rows.append((name, n, startup, wall, rate, rss))
            print(f"{name:<32} {n:>7,} inst  start-up {startup:5.1f} s  total {wall:6.1f} s  "
                  f"{rate:>9,.0f} inst/s  peak RSS {rss:7.1f} MiB", flush=True)
            return rate

        print(f"sample_text.txt x400 ({os.path.getsize(big) / 1e6:.2f} MB), dupe_factor 5, max_seq_length 128")
        exact = run("bert_tf exact (1 process)", lambda i, o: ours(i, o))
        scale = run("bert_tf --num_workers=2", lambda i, o: ours(i, o, workers=2))
        if args.original_script:
            orig = run("original create_pretraining_data", lambda i, o: original(args.original_script, i, o))
            print(f"\nexact / original: {exact / orig:.1f}x   scale(2) / original: {scale / orig:.1f}x")
        print(f"scale(2) / exact: {scale / exact:.1f}x")

        print("\nPeak memory when the corpus doubles (scale mode, 2 workers):")
        peaks = []
        for copies in (400, 800):
            path = corpus(tmp, copies)
            wall, rss, text = measure(ours(path, os.path.join(tmp, f"m{copies}"), workers=2), env)
            peaks.append(rss)
            print(f"  x{copies} ({os.path.getsize(path) / 1e6:.1f} MB): {instances(text):,} instances, "
                  f"{wall:.1f} s, peak RSS {rss:.1f} MiB")
        print(f"  peak RSS ratio x800 / x400: {peaks[1] / peaks[0]:.2f}")


if __name__ == "__main__":
    main()

"""Throughput and peak memory of create_pretraining_data, as ratios measured in one run.

  python benchmarks/pretraining_data_bench.py [--original_script=/path/to/create_pretraining_data.py]

Corpus: the bundled sample_text.txt repeated. Each configuration runs as its own process on a
small and a large corpus, and instances/s is the marginal rate between the two (extra instances
/ extra seconds), which leaves start-up out; start-up is what remains of the small run's time.
bert_tf runs on x800 (3.5 MB) and x3200 (14 MB): scale mode overlaps its parent's TensorFlow
import with the workers' first shards, so a small pair would flatter it. The original, whose
rate is flat, runs on x200 and x800 to keep the benchmark short. Peak RSS is the largest single
process of a run (workers included); scale mode's should stay flat when the corpus doubles.

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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tools", "demo_data")
FLAGS = [
    "--do_lower_case=True",
    "--max_seq_length=128",
    "--max_predictions_per_seq=20",
    "--masked_lm_prob=0.15",
    "--random_seed=12345",
    "--dupe_factor=5",
]

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
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, env=env, check=True
    ).stdout
    header, _, text = out.partition("\n")
    code, wall, rss = header.split()
    if code != "0":
        raise RuntimeError(f"{' '.join(command)} failed:\n{text[-3000:]}")
    return float(wall), int(rss) / 1024, text


def corpus(directory, copies):
    path = os.path.join(directory, f"sample_x{copies}.txt")
    with open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8") as f:
        text = f.read().rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text * copies)
    return path


def ours(input_file, output, workers=0):
    return [
        sys.executable,
        os.path.join(REPO, "tools", "create_pretraining_data.py"),
        f"--input_file={input_file}",
        f"--output_file={output}",
        f"--vocab_file={DATA}/vocab.txt",
        f"--num_workers={workers}",
        "--shard_size_mb=0.25",
        *FLAGS,
    ]


def original(script, input_file, output):
    return [
        sys.executable,
        script,
        f"--input_file={input_file}",
        f"--output_file={output}",
        f"--vocab_file={DATA}/vocab.txt",
        *FLAGS,
    ]


def instances(text):
    match = re.search(r"Wrote ([\d,]+) (total )?instances", text)
    return int(match.group(1).replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--original_script", help="google-research/bert create_pretraining_data.py (patched import)"
    )
    args = parser.parse_args()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.original_script:
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(args.original_script))

    with tempfile.TemporaryDirectory() as tmp:
        sizes = {copies: corpus(tmp, copies) for copies in (200, 800, 3200)}
        print("sample_text.txt repeated, dupe_factor 5, max_seq_length 128")
        rates = {}

        def run(name, command_for, small=800, large=3200):
            (wall_s, rss_s, text_s), (wall_l, rss_l, text_l) = [
                measure(command_for(sizes[c], os.path.join(tmp, "out")), env) for c in (small, large)
            ]
            n_s, n_l = instances(text_s), instances(text_l)
            rate = (n_l - n_s) / max(wall_l - wall_s, 1e-9)
            startup = wall_s - n_s / rate
            rates[name] = rate
            print(
                f"{name:<34} {rate:>8,.0f} inst/s  start-up {startup:4.1f} s  "
                f"x{large}: {n_l:,} inst in {wall_l:5.1f} s  peak RSS x{small} {rss_s:5.0f} MiB, "
                f"x{large} {rss_l:5.0f} MiB ({rss_l / rss_s:.2f}x)",
                flush=True,
            )

        run("bert_tf exact (1 process)", lambda i, o: ours(i, o))
        run("bert_tf --num_workers=2", lambda i, o: ours(i, o, workers=2))
        if args.original_script:
            run(
                "original create_pretraining_data",
                lambda i, o: original(args.original_script, i, o),
                small=200,
                large=800,
            )
            base = rates["original create_pretraining_data"]
            print(
                f"\nexact / original: {rates['bert_tf exact (1 process)'] / base:.1f}x   "
                f"num_workers=2 / original: {rates['bert_tf --num_workers=2'] / base:.1f}x"
            )
        scale_over_exact = rates["bert_tf --num_workers=2"] / rates["bert_tf exact (1 process)"]
        print(f"num_workers=2 / exact: {scale_over_exact:.1f}x")


if __name__ == "__main__":
    main()

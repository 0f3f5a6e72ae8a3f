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

Beam (when the `beam` extra is installed): the same scale-mode job on the DirectRunner with 2
local worker processes; `DirectRunner / num_workers=2` is Beam's local overhead on the same
shards, and the per-shard cost (seconds of one worker per --shard_size_mb of text) is what
BUILD_NOTES.md's estimate of where a Beam cluster pays off starts from.
"""

import argparse
import importlib.util
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
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{result.returncode} {wall} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.stdout.write(result.stdout + result.stderr)
"""


def measure(command, env=None):
    """(wall seconds, peak RSS in MiB, CPU seconds of all its processes, output) of a command run
    in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, env=env, check=True
    ).stdout
    header, _, text = out.partition("\n")
    code, wall, rss, cpu = header.split()
    if code != "0":
        raise RuntimeError(f"{' '.join(command)} failed:\n{text[-3000:]}")
    return float(wall), int(rss) / 1024, float(cpu), text


def corpus(directory, copies):
    path = os.path.join(directory, f"sample_x{copies}.txt")
    with open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8") as f:
        text = f.read().rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text * copies)
    return path


SHARD_SIZE_MB = 0.25


def ours(input_file, output, workers=0, runner=None):
    return [
        sys.executable,
        os.path.join(REPO, "tools", "create_pretraining_data.py"),
        f"--input_file={input_file}",
        f"--output_file={output}",
        f"--vocab_file={DATA}/vocab.txt",
        f"--num_workers={workers}",
        f"--shard_size_mb={SHARD_SIZE_MB}",
        *FLAGS,
        *([f"--runner={runner}"] if runner else []),
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
        rates, text_rates, walls, cpus = {}, {}, {}, {}

        def run(name, command_for, small=800, large=3200):
            (wall_s, rss_s, cpu_s, text_s), (wall_l, rss_l, cpu_l, text_l) = [
                measure(command_for(sizes[c], os.path.join(tmp, f"out_{c}")), env) for c in (small, large)
            ]
            n_s, n_l = instances(text_s), instances(text_l)
            rate = (n_l - n_s) / max(wall_l - wall_s, 1e-9)
            startup = wall_s - n_s / rate
            rates[name], walls[name], cpus[name] = rate, wall_l, cpu_l
            # CPU seconds of all processes: less disturbed than wall time by other load.
            cpu_per_instance = (cpu_l - cpu_s) / (n_l - n_s)
            cpu_fixed = cpu_s - n_s * cpu_per_instance
            extra_mb = (os.path.getsize(sizes[large]) - os.path.getsize(sizes[small])) / (1 << 20)
            text_rates[name] = extra_mb / max(wall_l - wall_s, 1e-9)
            print(
                f"{name:<34} {rate:>8,.0f} inst/s  {text_rates[name]:5.3f} MB/s  start-up {startup:4.1f} s  "
                f"x{large}: {n_l:,} inst in {wall_l:5.1f} s  "
                f"CPU {cpu_per_instance * 1e6:4.0f} us/inst + {cpu_fixed:4.1f} s  "
                f"peak RSS x{small} {rss_s:5.0f} MiB, "
                f"x{large} {rss_l:5.0f} MiB ({rss_l / rss_s:.2f}x)",
                flush=True,
            )

        run("bert_tf exact (1 process)", lambda i, o: ours(i, o))
        run("bert_tf --num_workers=2", lambda i, o: ours(i, o, workers=2))
        beam = importlib.util.find_spec("apache_beam") is not None
        if beam:
            run("bert_tf --runner=DirectRunner (2)", lambda i, o: ours(i, o, 2, "DirectRunner"))
        else:
            print("bert_tf --runner=DirectRunner: skipped, Apache Beam is not installed (the beam extra)")
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
        # One worker's time for one shard: 2 workers share the text.
        shard_s = SHARD_SIZE_MB / (text_rates["bert_tf --num_workers=2"] / 2)
        print(f"scale mode: {shard_s:.2f} s of one worker per {SHARD_SIZE_MB} MB shard")
        if beam:
            beam_name, scale_name = "bert_tf --runner=DirectRunner (2)", "bert_tf --num_workers=2"
            print(
                f"DirectRunner / num_workers=2 (Beam's local overhead): marginal rate "
                f"{rates[beam_name] / rates[scale_name]:.2f}x, x3200 wall time "
                f"{walls[beam_name] / walls[scale_name]:.2f}x, "
                f"x3200 CPU time {cpus[beam_name] / cpus[scale_name]:.2f}x"
            )


if __name__ == "__main__":
    main()

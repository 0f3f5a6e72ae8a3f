"""Seconds and peak memory of `extend_vocab.py --corpus` on a generated corpus: choosing the tokens
(the corpus streamed and counted) and rewriting the checkpoint.

  python benchmarks/extend_vocab_bench.py [--megabytes=100] [--max_new_tokens=1000]

The corpus is generated in a temporary directory: lines of 8-16 words drawn by Zipf's law (s=1.1)
from the google_tiny fixture's vocabulary's whole words and 100,000 invented ones it splits into
several pieces. A fresh process extends the fixture's training checkpoint
(with its Adam slots; `../shared/fixtures`) in `--mode=unused`, so its peak resident memory is the
run's alone; it reports the seconds, the corpus's rate and that peak, with the memory the process
holds before any work (TensorFlow's libraries, after the imports) beside it. Linux only (/proc).
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, memory_bytes, run_in_fresh_process  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(REPO), "shared", "fixtures")
CHECKPOINT = os.path.join(FIXTURES, "google_tiny_train", "model.ckpt-3")
CONFIG = os.path.join(FIXTURES, "google_tiny_train", "bert_config.json")
VOCAB = os.path.join(FIXTURES, "google_tiny", "vocab.txt")
SYLLABLES = ("pha", "rmo", "ki", "net", "ic", "lyo", "zy", "xa", "ther", "mo", "cy", "cler", "gen", "ase")


def write_corpus(path, megabytes, seed=0):
    """A corpus of about `megabytes` MB (module doc); returns its bytes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with open(VOCAB, encoding="utf-8") as f:
        real = [token for token in f.read().split() if token.isalpha() and token.isascii()]
    syllables = rng.integers(0, len(SYLLABLES), size=(100_000, 5))
    lengths = rng.integers(3, 6, size=100_000)
    invented = ["".join(SYLLABLES[k] for k in row[:n]) for row, n in zip(syllables, lengths, strict=True)]
    words = real + invented
    order = rng.permutation(len(words))
    words = [words[k] for k in order]
    target, written = megabytes * 2**20, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            draws = ((rng.zipf(1.1, size=120_000) - 1) % len(words)).tolist()
            lengths = rng.integers(8, 17, size=10_000).tolist()
            lines, start = [], 0
            for length in lengths:
                lines.append(" ".join([words[k] for k in draws[start : start + length]]))
                start += length
            block = "\n".join(lines) + "\n"
            f.write(block)
            written += len(block.encode("utf-8"))
    return written


def worker(corpus, output_dir, max_new_tokens):
    """Extends in this process and prints `RESULT {seconds, peak, before, tokens}`."""
    sys.path.insert(0, REPO)
    from bert_tf.checkpoints.vocab_extension import extend_vocab

    before = memory_bytes("VmRSS")
    start = time.perf_counter()
    extension = extend_vocab(
        CONFIG, CHECKPOINT, VOCAB, True, output_dir, corpus=corpus, max_new_tokens=max_new_tokens
    )
    seconds = time.perf_counter() - start
    result = {
        "seconds": seconds,
        "peak": memory_bytes("VmHWM"),
        "before": before,
        "tokens": len(extension.tokens),
    }
    print("RESULT " + json.dumps(result))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=float, default=100)
    parser.add_argument("--max_new_tokens", type=int, default=900)
    parser.add_argument("--worker", nargs=3, metavar=("CORPUS", "OUTPUT_DIR", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus, output_dir = os.path.join(tmp, "corpus.txt"), os.path.join(tmp, "out")
        start = time.perf_counter()
        size = write_corpus(corpus, args.megabytes)
        print(f"wrote a {size / 2**20:.1f} MB corpus in {time.perf_counter() - start:.1f} s")
        result = run_in_fresh_process(os.path.abspath(__file__), corpus, output_dir, str(args.max_new_tokens))
    peak, before = result["peak"], result["before"]
    print(
        f"extend_vocab --corpus ({size / 2**20:.0f} MB, {result['tokens']} tokens added): "
        f"{result['seconds']:.1f} s, {size / 2**20 / result['seconds']:.2f} MB/s"
    )
    print(
        f"peak RSS {peak / 2**20:.0f} MiB ({before / 2**20:.0f} MiB of it held after the imports, "
        f"before any work: {(peak - before) / 2**20:.0f} MiB beyond that)"
    )
    print("RESULT " + json.dumps({**result, "corpus_bytes": size}))


if __name__ == "__main__":
    main()

"""Tokens per second of the Python FullTokenizer and of the in-graph GraphTokenizer, same corpus.

  python benchmarks/tokenizer_bench.py [--lines=20000] [--batch_size=1024] \
      [--original_tokenization=/path/to/google-research/bert/tokenization.py]

Two corpora (fixed seeds), because both tokenizers memoise words and so depend on how often
words repeat: "sample", the words of the bundled sample_text.txt shuffled into new lines (about
450 distinct words: very repetitive), and "zipf", lines drawn from all 21,000 whole words of
vocab.txt with Zipf frequencies (1/rank), a third of them capitalised and some with punctuation
attached (closer to real text: thousands of distinct words per batch).
Python tokenizers are timed in their steady state: each timed pass uses a fresh tokenizer that
has first tokenized another corpus of the same kind (another seed), so its word memos hold the
frequent words but not the timed lines themselves. The in-graph tokenizer keeps nothing between
calls; it is traced once before timing. The in-graph passes are timed up to the ragged id
tensors a model or a tf.data pipeline consumes; turning them into Python lists (for the check
that every tokenizer gives the same ids) happens outside the timing. Each is timed three times
and the best pass is kept.

Measured: bert_tf's Python FullTokenizer (it memoises words), the in-graph tokenizer called
batch by batch, the in-graph tokenizer in a tf.data pipeline (batches tokenized in parallel,
as a training input pipeline would), and, given --original_tokenization, the original's
FullTokenizer (its module is imported from that path; its TensorFlow import must be patched to
tf.compat.v1).
"""

import argparse
import importlib.util
import itertools
import os
import random
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tools", "demo_data")


def make_corpus(kind, num_lines, seed=0):
    rng = random.Random(seed)
    if kind == "sample":
        with open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8") as f:
            words = f.read().split()
        return [" ".join(rng.choices(words, k=rng.randint(5, 40))) for _ in range(num_lines)]
    with open(os.path.join(DATA, "vocab.txt"), encoding="utf-8") as f:
        words = [w for w in f.read().split("\n") if w.isalpha()]
    rng.shuffle(words)
    cum_weights = list(itertools.accumulate(1 / rank for rank in range(1, len(words) + 1)))

    def word():
        w = rng.choices(words, cum_weights=cum_weights)[0]
        w = w.capitalize() if rng.random() < 0.3 else w
        return w + rng.choice(",.;:!?") if rng.random() < 0.1 else w

    return [" ".join(word() for _ in range(rng.randint(5, 40))) for _ in range(num_lines)]


def best_of(runs, prepare):
    """Best wall time of `runs` calls of `prepare()()`; `prepare()` itself is not timed."""
    times = []
    for _ in range(runs):
        function = prepare()
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--corpus", choices=["sample", "zipf", "both"], default="both")
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument(
        "--original_tokenization", help="google-research/bert tokenization.py (patched import)"
    )
    args = parser.parse_args()
    for kind in ("sample", "zipf") if args.corpus == "both" else (args.corpus,):
        compare(kind, make_corpus(kind, args.lines), args)


def compare(kind, lines, args):
    """Times every tokenizer on `lines` and prints tokens/s and the ratios."""
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.text.graph_tokenizer import GraphTokenizer

    vocab = os.path.join(DATA, "vocab.txt")
    warm_lines = make_corpus(kind, len(lines), seed=1)

    def python_tokenizer(module):
        """Prepares a timed pass of a fresh `module.FullTokenizer` that has seen `warm_lines`."""

        def prepare():
            tokenizer = module.FullTokenizer(vocab, do_lower_case=True)
            for line in warm_lines:
                tokenizer.tokenize(line)
            return lambda: [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]

        return prepare

    graph = GraphTokenizer(vocab, do_lower_case=True)
    batches = [tf.constant(lines[i : i + args.batch_size]) for i in range(0, len(lines), args.batch_size)]
    dataset = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(args.batch_size)
        .map(graph.tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    graph.tokenize(batches[0])  # traces the tf.function

    candidates = [
        ("bert_tf Python FullTokenizer", python_tokenizer(tokenization)),
        ("in-graph, batch by batch", lambda: lambda: [graph.tokenize(batch) for batch in batches]),
        ("in-graph, tf.data parallel map", lambda: lambda: list(dataset)),
    ]
    if args.original_tokenization:
        spec = importlib.util.spec_from_file_location("original_tokenization", args.original_tokenization)
        original = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(original)
        candidates.append(("original FullTokenizer", python_tokenizer(original)))

    times, reference_ids = {}, None
    for name, prepare in candidates:
        times[name], result = best_of(3, prepare)
        if isinstance(result[0], tf.RaggedTensor):  # in-graph: one ragged tensor per batch
            result = [ids for ragged in result for ids in ragged.to_list()]
        if reference_ids is None:
            reference_ids = result
        elif result != reference_ids:
            raise SystemExit(f"{name} disagrees with the Python FullTokenizer on this corpus")
    tokens = sum(len(ids) for ids in reference_ids)
    distinct = len({word for line in lines for word in line.split()})
    print(
        f"\ncorpus {kind}: {len(lines):,} lines, {tokens:,} tokens, {distinct:,} distinct words, "
        f"batch size {args.batch_size}"
    )
    for name, seconds in times.items():
        print(f"{name:<32} {tokens / seconds:>12,.0f} tokens/s")
    python_time = times["bert_tf Python FullTokenizer"]
    for name in ("in-graph, batch by batch", "in-graph, tf.data parallel map"):
        print(f"ratio {name} / bert_tf Python: {python_time / times[name]:.2f}x")
    if args.original_tokenization:
        for name in (
            "bert_tf Python FullTokenizer",
            "in-graph, batch by batch",
            "in-graph, tf.data parallel map",
        ):
            print(f"ratio {name} / original: {times['original FullTokenizer'] / times[name]:.1f}x")


if __name__ == "__main__":
    main()

"""Instances a second of create_pretraining_data's exact mode on Chinese text, with and without a word
segmenter for whole-word masking.

  python benchmarks/chinese_wwm_bench.py [--rounds=3] [--configs=plain,wwm,jieba]
  PYTHONPATH=OTHER_TREE python benchmarks/chinese_wwm_bench.py --bert_tf=OTHER_TREE --configs=plain,wwm

Corpus: tests/data/zh_sample.txt (83 lines of Chinese in 13 documents) repeated; the vocabulary is
its characters, ASCII words in single-character pieces (as tests/test_word_segmentation.py
builds it). Configurations, each run in this process on a small and a large copy of the corpus:

- plain: no whole-word masking;
- wwm: `--do_whole_word_mask`, no segmenter ("##" pieces only, the original's);
- jieba: `--do_whole_word_mask --word_segmenter=jieba`.

The rate is the marginal one between the two sizes (extra instances / extra seconds), which
leaves out what a run pays once (loading the vocabulary), in CPU seconds of this process (exact
mode is one thread of work, and CPU time is less disturbed than wall time by other jobs on a
shared machine; the wall-clock rate is printed beside it). A warm-up run of each configuration
first pays the imports and loads jieba's dictionary, once a process; its time is printed. The rounds
alternate the configurations; the median is printed. `--bert_tf=DIR` runs the bert_tf of another
tree (an earlier revision, for the no-segmenter configurations, which it has).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO  # noqa: E402

ZH_SAMPLE = os.path.join(REPO, "tests", "data", "zh_sample.txt")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CONFIGS = {
    "plain": {},
    "wwm": {"do_whole_word_mask": True},
    "jieba": {"do_whole_word_mask": True, "word_segmenter": "jieba"},
}
FLAGS = dict(
    do_lower_case=True,
    max_seq_length=128,
    max_predictions_per_seq=20,
    masked_lm_prob=0.15,
    random_seed=12345,
    dupe_factor=5,
    short_seq_prob=0.1,
)


def write_inputs(directory, copies):
    """The vocabulary, and the corpus repeated `copies[i]` times for each size; their paths."""
    from bert_tf.text.tokenization import BasicTokenizer

    with open(ZH_SAMPLE, encoding="utf-8") as f:
        text = f.read().rstrip("\n") + "\n\n"
    basic = BasicTokenizer(do_lower_case=True)
    tokens = {token for line in text.splitlines() for token in basic.tokenize(line)}
    pieces = {token for token in tokens if not (token.isascii() and token.isalnum())}
    for token in tokens - pieces:
        pieces.update(token)
        pieces.update("##" + char for char in token[1:])
    vocab = os.path.join(directory, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(SPECIAL + sorted(pieces)) + "\n")
    corpora = []
    for count in copies:
        path = os.path.join(directory, f"zh_x{count}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text * count)
        corpora.append(path)
    return vocab, corpora


def run(corpus, vocab, config, output):
    """(instances, CPU seconds, wall seconds) of one exact-mode run (one thread of work: its CPU
    time is less disturbed than its wall time by other jobs on the machine)."""
    from bert_tf.data import PretrainingDataOptions, create_pretraining_data

    options = PretrainingDataOptions(vocab_file=vocab, **FLAGS, **CONFIGS[config])
    cpu, wall = time.process_time(), time.perf_counter()
    summary = create_pretraining_data(corpus, output, options)
    return summary.instances, time.process_time() - cpu, time.perf_counter() - wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="plain,wwm,jieba")
    parser.add_argument("--small", type=int, default=20, help="copies of the sample in the small corpus")
    parser.add_argument("--large", type=int, default=100, help="copies of the sample in the large corpus")
    parser.add_argument("--bert_tf", default=REPO, help="the tree whose bert_tf runs")
    args = parser.parse_args()
    sys.path.insert(0, args.bert_tf)
    import logging

    logging.disable(logging.WARNING)  # the single-document and progress notes
    import bert_tf

    configs = args.configs.split(",")
    print(f"bert_tf from {os.path.dirname(bert_tf.__file__)}")
    rates = {config: [] for config in configs}
    with tempfile.TemporaryDirectory() as directory:
        vocab, (small, large) = write_inputs(directory, (args.small, args.large))
        output = os.path.join(directory, "out.tfrecord")
        print(f"corpus: {os.path.getsize(small) / 1e6:.2f} MB and {os.path.getsize(large) / 1e6:.2f} MB")
        for config in configs:  # imports, and jieba's dictionary, loaded once per process
            _, cpu, wall = run(small, vocab, config, output)
            print(f"warm-up {config:6s}: {cpu:.2f} CPU s, {wall:.2f} s on the small corpus")
        for round_index in range(args.rounds):
            for config in configs:
                small_instances, small_cpu, small_wall = run(small, vocab, config, output)
                large_instances, large_cpu, large_wall = run(large, vocab, config, output)
                extra = large_instances - small_instances
                rate, wall_rate = extra / (large_cpu - small_cpu), extra / (large_wall - small_wall)
                rates[config].append(rate)
                print(
                    f"round {round_index + 1} {config:6s}: {rate:8,.0f} instances per CPU second, "
                    f"{wall_rate:8,.0f} instances/s ({large_instances:,} instances in {large_wall:.2f} s)",
                    flush=True,
                )
    medians = {config: statistics.median(values) for config, values in rates.items()}
    for config, median in medians.items():
        print(f"{config:6s}: median {median:,.0f} instances per CPU second")
    if "jieba" in medians and "wwm" in medians:
        print(f"jieba / wwm: {medians['jieba'] / medians['wwm']:.2f}x")


if __name__ == "__main__":
    main()

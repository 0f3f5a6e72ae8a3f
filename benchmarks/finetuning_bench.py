"""Examples per second of the fine-tuning feature conversion: the classifier's (pairs) and the
tagger's (sentences), each with and without writing the TFRecords.

  python benchmarks/finetuning_bench.py [--num_examples=10000] [--max_seq_length=128]

The text is the tokenizer benchmark's "zipf" corpus (lines of 5-40 words drawn from vocab.txt's
whole words with Zipf frequencies): the classifier pairs consecutive lines, the tagger tags each
word of a line O or B-X at random. Each conversion starts with a fresh FullTokenizer (empty word
memo), as a tool run does.
"""

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_bench import DATA, make_corpus  # noqa: E402

from bert_tf.tasks.classifier import data as classifier_data  # noqa: E402
from bert_tf.tasks.tagging import data as tagging_data  # noqa: E402
from bert_tf.text.tokenization import FullTokenizer  # noqa: E402


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num_examples", type=int, default=10000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args()
    n, length = args.num_examples, args.max_seq_length
    vocab = os.path.join(DATA, "vocab.txt")
    lines = make_corpus("zipf", n + 1, seed=1)
    rng = random.Random(2)
    pairs = [classifier_data.InputExample(f"b-{i}", lines[i], lines[i + 1], str(i % 2)) for i in range(n)]
    sentences = []
    for i, line in enumerate(lines[:n]):
        words = line.split()
        tags = [rng.choice(("O", "O", "B-X")) for _ in words]
        sentences.append(tagging_data.TaggingExample(f"b-{i}", words, tags, "bench", 1))

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records")

        def classifier_features():
            tokenizer = FullTokenizer(vocab, do_lower_case=True)
            for i, example in enumerate(pairs):
                classifier_data.convert_single_example(i + 5, example, ["0", "1"], length, tokenizer)

        def classifier_records():
            tokenizer = FullTokenizer(vocab, do_lower_case=True)
            classifier_data.file_based_convert_examples_to_features(
                pairs, ["0", "1"], length, tokenizer, path
            )

        def tagging_features():
            tokenizer = FullTokenizer(vocab, do_lower_case=True)
            return tagging_data.convert_examples_to_features(sentences, ["B-X", "O"], length, tokenizer)

        def tagging_records():
            tagging_data.write_features(tagging_features(), path)

        for name, function in (
            ("classifier: features", classifier_features),
            ("classifier: features + train.tf_record", classifier_records),
            ("tagging: features", tagging_features),
            ("tagging: features + train.tf_record", tagging_records),
        ):
            print(f"{name:40s} {n / timed(function):10,.0f} examples/s")


if __name__ == "__main__":
    main()

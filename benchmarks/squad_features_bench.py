"""Seconds to read, convert and post-process 10,000 synthetic SQuAD questions: the host-side
work of a run_squad.py predict run besides the model.

  python benchmarks/squad_features_bench.py [--questions=10000] [--max_seq_length=384]

The questions are shaped like SQuAD 1.1 dev (10,570 questions on 2,067 paragraphs): five per
paragraph, paragraphs of about 140 words and questions of 10, drawn from the "zipf" corpus of
`tokenizer_bench.py` (all whole words of vocab.txt, Zipf frequencies, some capitalised or with
punctuation attached), each answer a 1-3 word span of its paragraph. Timed with a fresh
tokenizer (empty word memos), best of three: reading the JSON (`read_squad_examples`),
converting the predict examples and the training examples (`convert_examples_to_features`,
doc_stride 128, max_query_length 64), writing the training features as the original's records
(`bert_tf.data.records.write_records`: `tf.train.Example`s in a TFRecord file), and the prediction writer's
work (`compute_predictions`, n_best_size 20, max_answer_length 30) on logits shaped like a
trained model's: normal with standard deviation 3 in the document window, -20 elsewhere.
"""

import argparse
import json
import os
import random
import tempfile
import time

import numpy as np
from tokenizer_bench import DATA, make_corpus

from bert_tf.data.records import write_records
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.text.tokenization import FullTokenizer


def make_squad_json(num_questions, seed=0):
    rng = random.Random(seed)
    lines = iter(make_corpus("zipf", num_questions * 8, seed=seed))
    paragraphs = []
    while len(paragraphs) * 5 < num_questions:
        words = []
        while len(words) < 140:
            words.extend(next(lines).split())
        context = " ".join(words)
        qas = []
        for i in range(5):
            first = rng.randrange(len(words) - 3)
            answer = " ".join(words[first : first + rng.randint(1, 3)])
            qas.append(
                {
                    "id": f"p{len(paragraphs)}q{i}",
                    "question": " ".join(rng.choices(words, k=10)) + "?",
                    "answers": [{"text": answer, "answer_start": len(" ".join(words[:first])) + (first > 0)}],
                }
            )
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": "synthetic", "paragraphs": paragraphs}]}


def best_of(runs, function):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def trained_logits(feature, max_seq_length, rng):
    """Start and end logits shaped like a trained model's: high only in the document window."""
    outside = np.ones(max_seq_length, bool)
    outside[list(feature.token_to_orig_map)] = False
    start, end = 3 * rng.standard_normal((2, max_seq_length)) - 20 * outside
    return squad_predictions.RawResult(feature.unique_id, start.astype(np.float32), end.astype(np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10000)
    parser.add_argument("--max_seq_length", type=int, default=384)
    args = parser.parse_args()
    vocab = os.path.join(DATA, "vocab.txt")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "synthetic.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(make_squad_json(args.questions), f)
        seconds, examples = best_of(3, lambda: squad_data.read_squad_examples(path, is_training=True))
        print(f"read {len(examples):,} questions: {seconds:.2f} s")

        def convert(is_training):
            tokenizer = FullTokenizer(vocab, do_lower_case=True)
            features = squad_data.convert_examples_to_features(
                examples, tokenizer, args.max_seq_length, 128, 64, is_training
            )
            return list(features)

        def report(mode, seconds, features):
            print(
                f"convert ({mode}): {seconds:.2f} s, {len(features):,} features, "
                f"{len(examples) / seconds:,.0f} questions/s"
            )

        seconds, features = best_of(3, lambda: convert(True))
        report("training", seconds, features)
        records = os.path.join(tmp, "train.tf_record")
        seconds, _ = best_of(
            3, lambda: write_records(records, (squad_data.feature_values(f, True) for f in features))
        )
        print(f"write {len(features):,} records (train.tf_record): {seconds:.2f} s")
        seconds, features = best_of(3, lambda: convert(False))
        report("predict", seconds, features)

    rng = np.random.RandomState(0)
    results = [trained_logits(feature, args.max_seq_length, rng) for feature in features]
    for version_2 in (False, True):
        seconds, _ = best_of(
            3,
            lambda v=version_2: squad_predictions.compute_predictions(
                examples, features, results, 20, 30, True, v
            ),
        )
        print(
            f"predictions (SQuAD {'2.0' if version_2 else '1.1'}): {seconds:.2f} s, "
            f"{len(examples) / seconds:,.0f} questions/s"
        )


if __name__ == "__main__":
    main()

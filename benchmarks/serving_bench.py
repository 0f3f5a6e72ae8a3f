"""Serving raw text: the exported `text` and `text_windowed` signatures against Hugging Face
transformers on CPU torch, and against `serving_default` fed ids padded to `--max_seq_length`.

  python benchmarks/serving_bench.py [--rounds=3] [--hf_python=PYTHON] [--doc_stride=96]
                                     [--long_texts=8] [--offsets] [--breakdown]

One BERT-base model (random weights, BERT's uncased vocabulary) is written once as a Google
checkpoint, exported by `export_bert` with `--doc_stride` and converted for transformers by
`google_to_hf`: both systems run the same weights. Each system then runs in its own fresh
process, the two alternated, `--rounds` times; the median of the rounds is reported.

- bert_tf: the export loaded as TF Serving loads it (`tf.saved_model.load` with tensorflow-text's
  ops, no bert_tf import), its signatures called on strings: `text` for short texts (tokenized in
  the graph, padded to the request), `text_windowed` for long ones (windows of
  `max_seq_length - 2` WordPieces, `--doc_stride` apart, each token's `sequence_output` from its
  window of most context).
- fixed: `serving_default` on the same short texts' ids packed to `--max_seq_length` (tokenized
  beforehand, not timed), of the same model exported with `pack_tokens=False`, which runs every
  position: what every request cost before the text signatures padded to the request and the
  export ran its dense layers on the real tokens only. (The default export's `serving_default`
  on those ids, `fixed, packed` in the rounds' lines, skips the padding's dense work.)
- transformers: `BertTokenizerFast` + `BertModel` (SDPA attention) under `torch.inference_mode`, in
  the Python of `--hf_python` (one with transformers and torch: the `bench` extra, or another
  environment),
  padding to the longest text; long texts cut into the same windows (`stride`, HF's overlap, =
  `max_seq_length - 2 - doc_stride`, `return_overflowing_tokens`), their outputs per window.

Texts: short ones are runs of 5-20 consecutive words of tools/demo_data/sample_text.txt, long ones
500-2,000 words of its sentences drawn at random (fixed seeds). Each case is timed per call, the
median of the calls after two untimed ones (at least `MIN_CALLS` calls and `MIN_SECONDS` seconds);
long texts, whose calls take seconds, after one untimed call, the median of `LONG_CALLS`.

`--breakdown` also times, for the short texts, where each system's time goes: its model alone on the
ids the `text` signature packs (padded to the request, rounded up to a multiple of 8; the same
arrays in both systems; bert_tf's also on the longest row's length, as transformers pads), the rest
of a bert_tf call (tokenizing, packing, the signature's own ops) as the difference, transformers'
tokenizer alone, and the float32 matmuls of one layer at those shapes (`tf.matmul` against
`torch.matmul`), the model's work that padding to the request cannot shrink further.
`--long_texts=0` leaves the long texts out.

`--offsets` also times, in a fresh process, `GraphTokenizer.tokenize` against
`tokenize_with_offsets` (the path of the `--text_tokens` exports and of `text_windowed`) on the
same texts.

TensorFlow picks other kernels and graph forms with its oneDNN on than off, and turns it on by
default only on some CPUs: the rounds (and `--offsets`) run once with `TF_ENABLE_ONEDNN_OPTS=1` in
every worker's environment, then once with `=0`, and each line they print, the ratios among them,
starts with `oneDNN on: ` or `oneDNN off: `. The export is made once, for both.
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
BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
SHORT_BATCHES = (1, 32)
MIN_CALLS, MIN_SECONDS, LONG_CALLS = 3, 3.0, 2
ID_NAMES = ("input_ids", "input_mask", "segment_ids")
# TF_ENABLE_ONEDNN_OPTS of the workers' processes, and how the lines of each setting begin.
ONEDNN_SETTINGS = (("1", "on"), ("0", "off"))


def make_texts(num_long, seed=0):
    """{"short_b1": [1 text], "short_b32": [32], "long_b<num_long>": [num_long]} of the sample corpus."""
    with open(os.path.join(DATA, "sample_text.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    words = " ".join(lines).split()
    rng = random.Random(seed)

    def short():
        length = rng.randint(5, 20)
        start = rng.randrange(len(words) - length)
        return " ".join(words[start : start + length])

    def long():
        wanted, text = rng.randint(500, 2000), []
        while len(text) < wanted:
            text += rng.choice(lines).split()
        return " ".join(text[:wanted])

    texts = {f"short_b{batch}": [short() for _ in range(batch)] for batch in SHORT_BATCHES}
    if num_long:
        texts[f"long_b{num_long}"] = [long() for _ in range(num_long)]
    return texts


def per_call(function, warmup=2, calls=MIN_CALLS):
    """Median seconds of a call of `function`, after `warmup` untimed calls: at least `calls`
    calls and `MIN_SECONDS` seconds."""
    for _ in range(warmup):
        function()
    times, start = [], time.perf_counter()
    while len(times) < calls or time.perf_counter() - start < MIN_SECONDS:
        begin = time.perf_counter()
        function()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def layer_matmuls(rows, hidden=768, intermediate=3072):
    """(m, k, n) of one encoder layer's dense matmuls on `rows` token rows: query, key, value and
    the attention output (m x hidden x hidden, 4 of them), intermediate, output."""
    return [(rows, hidden, hidden)] * 4 + [(rows, hidden, intermediate), (rows, intermediate, hidden)]


def matmul_seconds(matmul, shapes, make):
    """Median seconds of the matmuls of `shapes` run one after the other; `make(shape)` gives a
    random float32 operand of that shape."""
    operands = [(make((m, k)), make((k, n))) for m, k, n in shapes]
    return per_call(lambda: [matmul(a, b) for a, b in operands], calls=20)


def setup_worker(work_dir, max_seq_length, doc_stride):
    """Writes the model, its export and its HF copy, the texts and the fixed-length ids."""
    import numpy as np
    from common import bert_config

    from bert_tf import BertModel
    from bert_tf.checkpoints.converter import google_to_hf
    from bert_tf.checkpoints.google import save_google_checkpoint
    from bert_tf.export import export_bert
    from bert_tf.text.packing import pack_inputs
    from bert_tf.text.windows import doc_spans
    from bert_tf.tokenization import FullTokenizer

    config = bert_config(BASE)
    config_file = os.path.join(work_dir, "bert_config.json")
    config.to_json_file(config_file)
    model = BertModel(config)
    model({k: np.zeros([1, 2], np.int32) for k in ID_NAMES})
    checkpoint = os.path.join(work_dir, "ckpt", "bert_model.ckpt")
    save_google_checkpoint(model, checkpoint)
    vocab = os.path.join(DATA, "vocab.txt")
    export_dir, _ = export_bert(
        checkpoint,
        config_file,
        vocab,
        True,
        max_seq_length,
        os.path.join(work_dir, "export"),
        doc_stride=doc_stride,
    )
    unpacked_dir, _ = export_bert(
        checkpoint,
        config_file,
        vocab,
        True,
        max_seq_length,
        os.path.join(work_dir, "export_unpacked"),
        text_signatures=False,
        pack_tokens=False,
    )
    google_to_hf(config_file, checkpoint, vocab, True, os.path.join(work_dir, "hf"))
    with open(os.path.join(work_dir, "texts.json")) as f:
        texts = json.load(f)
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    fixed = {}
    for case in texts:
        if case.startswith("short"):
            tokens = [tokenizer.tokenize(t) for t in texts[case]]
            # The `text` signature's length: the longest packed row, rounded up to a multiple of 8.
            longest = min(max_seq_length, max(map(len, tokens)) + 2)
            request = min(max_seq_length, -(-longest // 8) * 8)
            lengths = {case: max_seq_length, f"{case}/request": request, f"{case}/longest": longest}
            for name, length in lengths.items():
                rows = [pack_inputs(t, None, length, tokenizer) for t in tokens]
                fixed[name] = {k: [row[k] for row in rows] for k in ID_NAMES}
    with open(os.path.join(work_dir, "fixed.json"), "w") as f:
        json.dump(fixed, f)
    tokens = {case: [len(tokenizer.tokenize(t)) for t in batch] for case, batch in texts.items()}
    return {
        "export": export_dir,
        "export_unpacked": unpacked_dir,
        "tokens": {case: sum(counts) for case, counts in tokens.items()},
        "windows": {
            case: sum(len(doc_spans(n, max_seq_length - 2, doc_stride)) for n in counts)
            for case, counts in tokens.items()
        },
    }


def bert_tf_worker(work_dir, export_dir, unpacked_dir, breakdown):
    """Seconds per call of `text`, `text_windowed` and the fixed-length `serving_default`,
    in a process that imports no bert_tf, as TF Serving loads the export; with `breakdown`, also
    of `serving_default` on the ids `text` packs and of one layer's matmuls at those shapes."""
    sys.modules["bert_tf"] = None
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    loaded = tf.saved_model.load(export_dir)
    unpacked = tf.saved_model.load(unpacked_dir).signatures["serving_default"]
    with open(os.path.join(work_dir, "texts.json")) as f:
        texts = json.load(f)
    with open(os.path.join(work_dir, "fixed.json")) as f:
        fixed = json.load(f)
    seconds = {}
    for case, batch in texts.items():
        strings = tf.constant(batch)
        if case.startswith("short"):
            text = loaded.signatures["text"]
            seconds[f"{case}/bert_tf"] = per_call(lambda text=text, s=strings: text(text=s))
            default = loaded.signatures["serving_default"]

            def model(name, default=default):
                """Seconds per call of `default` (a `serving_default`) on the ids `fixed[name]`."""
                ids = {k: tf.constant(v, tf.int32) for k, v in fixed[name].items()}
                return per_call(lambda: default(**ids))

            seconds[f"{case}/fixed"] = model(case, unpacked)
            seconds[f"{case}/fixed, packed"] = model(case)
            if breakdown:
                seconds[f"{case}/bert_tf model"] = model(f"{case}/request")
                seconds[f"{case}/bert_tf model, longest"] = model(f"{case}/longest")
                request = fixed[f"{case}/request"]["input_ids"]
                shapes = layer_matmuls(len(request) * len(request[0]))
                seconds[f"{case}/bert_tf matmuls"] = matmul_seconds(
                    lambda a, b: tf.matmul(a, b).numpy(), shapes, lambda s: tf.random.normal(s)
                )
        else:
            windowed = loaded.signatures["text_windowed"]
            seconds[f"{case}/bert_tf"] = per_call(
                lambda windowed=windowed, s=strings: windowed(text=s), warmup=1, calls=LONG_CALLS
            )
    return {"seconds": seconds}


def hf_worker(work_dir, max_seq_length, doc_stride, breakdown):
    """Seconds per call of transformers' fast tokenizer and `BertModel` on the same texts; with
    `breakdown`, also of `BertModel` alone on the ids bert_tf's `text` packs and of one layer's
    matmuls at those shapes."""
    import torch
    import transformers

    hf_dir = os.path.join(work_dir, "hf")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(hf_dir)
    model = transformers.BertModel.from_pretrained(hf_dir, attn_implementation="sdpa").eval()
    with open(os.path.join(work_dir, "texts.json")) as f:
        texts = json.load(f)
    with open(os.path.join(work_dir, "fixed.json")) as f:
        fixed = json.load(f)
    overlap = max_seq_length - 2 - doc_stride
    seconds, windows = {}, {}
    for case, batch in texts.items():
        if case.startswith("short"):
            options = {"padding": "longest", "truncation": True, "max_length": max_seq_length}
        else:
            options = {
                "padding": "longest",
                "truncation": True,
                "max_length": max_seq_length,
                "stride": overlap,
                "return_overflowing_tokens": True,
            }

        def call(batch=batch, options=options):
            inputs = tokenizer(batch, return_tensors="pt", **options)
            inputs.pop("overflow_to_sample_mapping", None)
            with torch.inference_mode():
                return model(**inputs).last_hidden_state

        long = not case.startswith("short")
        seconds[f"{case}/transformers"] = per_call(
            call, warmup=1 if long else 2, calls=LONG_CALLS if long else MIN_CALLS
        )
        windows[case] = int(call().shape[0])
        if breakdown and not long:
            request = fixed[f"{case}/request"]
            inputs = {
                "input_ids": torch.tensor(request["input_ids"]),
                "attention_mask": torch.tensor(request["input_mask"]),
                "token_type_ids": torch.tensor(request["segment_ids"]),
            }

            def model_alone(inputs=inputs):
                with torch.inference_mode():
                    return model(**inputs).last_hidden_state

            seconds[f"{case}/transformers model"] = per_call(model_alone)
            seconds[f"{case}/transformers tokenizer"] = per_call(
                lambda batch=batch, options=options: tokenizer(batch, return_tensors="pt", **options)
            )
            shapes = layer_matmuls(inputs["input_ids"].numel())
            with torch.inference_mode():
                seconds[f"{case}/transformers matmuls"] = matmul_seconds(torch.matmul, shapes, torch.randn)
    return {"seconds": seconds, "windows": windows}


def offsets_worker(work_dir):
    """Seconds per call of `GraphTokenizer.tokenize` and `tokenize_with_offsets`, and tokens."""
    import tensorflow as tf

    from bert_tf.text.graph_tokenizer import GraphTokenizer

    tokenizer = GraphTokenizer(os.path.join(DATA, "vocab.txt"), do_lower_case=True)
    with open(os.path.join(work_dir, "texts.json")) as f:
        texts = json.load(f)
    results = {}
    for case, batch in texts.items():
        strings = tf.constant(batch)
        results[case] = {
            "tokens": int(tokenizer.tokenize(strings).flat_values.shape[0]),
            "tokenize": per_call(lambda s=strings: tokenizer.tokenize(s).flat_values.numpy()),
            "tokenize_with_offsets": per_call(
                lambda s=strings: tokenizer.tokenize_with_offsets(s)[2].flat_values.numpy()
            ),
        }
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--doc_stride", type=int, default=96)
    parser.add_argument("--long_texts", type=int, default=8)
    parser.add_argument("--offsets", action="store_true", help="Also time the graph tokenizer's offsets.")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="Also time, for short texts, each system's model alone and one layer's matmuls.",
    )
    parser.add_argument(
        "--hf_python",
        default=sys.executable,
        help="A Python with transformers and torch for its workers (the `bench` extra, or another "
        "environment; default this one).",
    )
    parser.add_argument(
        "--work_dir", default=None, help="Where to write the model (default: a temporary one)."
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("worker_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work_dir = args.worker_args[0]
        result = {
            "setup": lambda: setup_worker(work_dir, args.max_seq_length, args.doc_stride),
            "bert_tf": lambda: bert_tf_worker(work_dir, *args.worker_args[1:3], args.breakdown),
            "transformers": lambda: hf_worker(work_dir, args.max_seq_length, args.doc_stride, args.breakdown),
            "offsets": lambda: offsets_worker(work_dir),
        }[args.worker]()
        print("RESULT " + json.dumps(result))
        return

    script = os.path.abspath(__file__)
    lengths = [f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}"]
    lengths += ["--breakdown"] if args.breakdown else []
    with tempfile.TemporaryDirectory(dir=args.work_dir) as work_dir:
        texts = make_texts(args.long_texts)
        with open(os.path.join(work_dir, "texts.json"), "w") as f:
            json.dump(texts, f)
        start = time.perf_counter()
        setup = run_in_fresh_process(script, "setup", work_dir, *lengths)
        words = {case: sum(len(t.split()) for t in batch) for case, batch in texts.items()}
        print(f"setup {time.perf_counter() - start:.0f} s; words {words}; WordPieces {setup['tokens']}")
        for setting, label in ONEDNN_SETTINGS:
            env = {"TF_ENABLE_ONEDNN_OPTS": setting}
            run_rounds(script, work_dir, texts, setup, lengths, args, env, f"oneDNN {label}: ")


def run_rounds(script, work_dir, texts, setup, lengths, args, env, prefix):
    """`args.rounds` rounds of the systems, each in fresh processes with the environment
    variables `env`, and their medians and ratios, every line printed starting with `prefix`."""

    def say(line):
        print(prefix + line, flush=True)

    rounds = []
    for index in range(args.rounds):
        systems = ["bert_tf", "transformers"][:: 1 if index % 2 == 0 else -1]
        seconds, windows = {}, {}
        for system in systems:
            extra = [setup["export"], setup["export_unpacked"]] if system == "bert_tf" else []
            python = args.hf_python if system == "transformers" else None
            result = run_in_fresh_process(script, system, work_dir, *extra, *lengths, env=env, python=python)
            if result is None:
                raise SystemExit(
                    f"the {system} worker lacks a module: pass --hf_python=PYTHON_WITH_TRANSFORMERS"
                )
            seconds.update(result["seconds"])
            windows.update(result.get("windows", {}))
        say(f"round {index + 1}: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in sorted(seconds.items())))
        rounds.append(seconds)
    say(f"windows: doc_spans {setup['windows']}, transformers {windows}")
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    for case in texts:
        label = case.replace("_", " ")
        say(
            f"{case} median: "
            + ", ".join(
                f"{k.split('/')[1]} {v * 1000:.1f} ms" for k, v in median.items() if k.startswith(case + "/")
            )
        )
        if case.startswith("short"):
            say(f"{label} vs fixed: {median[case + '/fixed'] / median[case + '/bert_tf']:.2f}x")
        say(f"{label} vs transformers: {median[case + '/transformers'] / median[case + '/bert_tf']:.2f}x")
        if args.breakdown and case.startswith("short"):
            part = {k.split("/")[1]: v for k, v in median.items() if k.startswith(case + "/")}
            # bert_tf's model alone runs on the very ids its `text` call packs, so the rest of
            # the call is the difference; transformers' call pads to the longest row, not to
            # those ids, so its tokenizer is timed alone.
            rest = {
                "bert_tf": f"the rest {(part['bert_tf'] - part['bert_tf model']) * 1000:.1f} ms",
                "transformers": f"tokenizer {part['transformers tokenizer'] * 1000:.1f} ms",
            }
            for system in ("bert_tf", "transformers"):
                say(
                    f"{label} {system}: model {part[system + ' model'] * 1000:.1f} ms, {rest[system]}; "
                    f"one layer's matmuls {part[system + ' matmuls'] * 1000:.2f} ms"
                )
            say(
                f"{label} bert_tf model on the longest row's length (no rounding to 8): "
                f"{part['bert_tf model, longest'] * 1000:.1f} ms"
            )
            say(
                f"{label} model alone vs transformers: "
                f"{part['transformers model'] / part['bert_tf model']:.2f}x; matmuls: "
                f"{part['transformers matmuls'] / part['bert_tf matmuls']:.2f}x"
            )
    if args.offsets:
        result = run_in_fresh_process(script, "offsets", work_dir, env=env)
        for case, times in result.items():
            say(
                f"graph tokenizer {case} ({times['tokens']} WordPieces): tokenize "
                f"{times['tokenize'] * 1000:.2f} ms, tokenize_with_offsets "
                f"{times['tokenize_with_offsets'] * 1000:.2f} ms "
                f"({times['tokenize_with_offsets'] / times['tokenize']:.2f}x)"
            )


if __name__ == "__main__":
    main()

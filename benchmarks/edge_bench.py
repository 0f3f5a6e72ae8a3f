"""Edge export at BERT-base size, or of a real model: every format and quantisation of
`tools/export_edge.py`, its file size and batch-1 latency at seq 128 in its runtime beside the
SavedModel's on TensorFlow (CPU), and its check against the Keras model.

  python benchmarks/edge_bench.py [--formats=tflite,onnx] [--quantize=none,float16,...]
      [--model_dir=DIR [--check_texts=FILE]]

By default the weights are random (BERT-base's shape and initializer), written as a Google
checkpoint; the vocabulary is the google_tiny fixture's (Google's bert-base-uncased `vocab.txt`),
and the int8 files are calibrated on `CALIBRATION` texts. With `--model_dir`, the model is a
Google-layout directory (`bert_config.json`, `bert_model.ckpt`, `vocab.txt`, uncased: e.g.
all-MiniLM-L6-v2 converted by `tools/convert_checkpoint.py --hf_model`), calibrated on
`tests/data/calibration_document.txt`. Each file is made in a process of its own. Prints a
Markdown table for RESULTS.md.
"""

import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.common import SEQ, bert_config  # noqa: E402
from bert_tf import cli  # noqa: E402, F401  (TensorFlow's start-up lines hidden)

BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
VOCAB = os.path.join(REPO, "..", "shared", "fixtures", "google_tiny", "vocab.txt")
CALIBRATION_DOCUMENT = os.path.join(REPO, "tests", "data", "calibration_document.txt")
CALIBRATION = [
    "The museum opens at ten and closes at six on weekdays.",
    "A small model on a phone answers in a few milliseconds.",
    "Rain is expected over the weekend in the north of the country.",
    "He read the letter twice before he answered it. ||| The answer was short and polite.",
    "Prices rose for the third month in a row, the bank said on Tuesday.",
    "The children played football in the park after school until dark.",
    "Which river flows through the capital? ||| The city was built on both of its banks.",
    "Researchers trained the network on books and encyclopedia articles.",
] * 4


def export_row(fmt, quantize, model_dir=None, check_texts=None):
    """Exports a random BERT-base (seeded), or the model of `model_dir`, once and returns its
    table row."""
    with tempfile.TemporaryDirectory(prefix="edge_bench_") as tmp:
        if model_dir is None:
            files = _random_base(tmp)
        else:
            files = tuple(
                os.path.join(model_dir, n) for n in ("bert_config.json", "bert_model.ckpt", "vocab.txt")
            )
            files += (CALIBRATION_DOCUMENT,)
        return _row(fmt, quantize, *files, check_texts, os.path.join(tmp, f"model_{quantize}.{fmt}"))


def _random_base(tmp):
    """A random BERT-base (seed 0) written in `tmp` as a Google checkpoint, with a calibration
    file: (config file, checkpoint prefix, vocab file, calibration file)."""
    import keras
    import numpy as np

    from bert_tf import BertModel, save_google_checkpoint

    keras.utils.set_random_seed(0)
    config = bert_config(BASE)
    config_file = os.path.join(tmp, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(config.to_json_string())
    model = BertModel(config)
    ids = np.array([[101, 102]], np.int32)
    model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
    prefix = os.path.join(tmp, "bert_model.ckpt")
    save_google_checkpoint(model, prefix)
    calibration = os.path.join(tmp, "calibration.txt")
    with open(calibration, "w", encoding="utf-8") as f:
        f.write("\n".join(CALIBRATION) + "\n")
    return config_file, prefix, VOCAB, calibration


def _row(fmt, quantize, config_file, prefix, vocab, calibration, check_texts, output):
    """Exports the model with `--benchmark` to `output`; its table row."""
    from bert_tf.export.edge import RUNTIMES, EdgeOptions, export_edge

    options = EdgeOptions(
        format=fmt,
        quantize=quantize,
        bert_config_file=config_file,
        init_checkpoint=prefix,
        vocab_file=vocab,
        max_seq_length=SEQ,
        output=output,
        calibration_texts=calibration if quantize == "int8" else None,
        check_texts=check_texts,
        benchmark=True,
    )
    result = export_edge(options)
    edge_s, tf_s = result.latency
    check = "; ".join(f"{r.output} {r.measure} {r.value:.3g}" for r in result.rows)
    verdict = "pass" if result.ok else "FAIL"
    return (
        f"| {fmt} ({RUNTIMES[fmt]}) | {quantize} | {result.size / 1e6:.0f} MB "
        f"({result.size / result.float32_bytes:.2f}x) | {edge_s * 1e3:.1f} ms | "
        f"{tf_s * 1e3:.1f} ms | {tf_s / edge_s:.2f}x | {verdict}: {check} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", default="tflite,onnx")
    parser.add_argument("--quantize", default="none,float16,dynamic_int8,int8")
    parser.add_argument(
        "--model_dir", default=None, help="A Google-layout model (default: random BERT-base)."
    )
    parser.add_argument("--check_texts", default=None, help="The tool's --check_texts (default: built-in).")
    args = parser.parse_args()
    pairs = [(fmt, q) for fmt in args.formats.split(",") for q in args.quantize.split(",")]
    model_flags = [
        f"--{name}={value}"
        for name, value in vars(args).items()
        if name in ("model_dir", "check_texts") and value
    ]
    if len(pairs) == 1:
        print(export_row(*pairs[0], args.model_dir, args.check_texts), flush=True)
        return
    # One process per file: a converter's memory is not all given back (BERT-base's eight
    # exports in one process grew past 18 GB).
    rows = []
    for fmt, quantize in pairs:
        child = subprocess.run(
            [sys.executable, __file__, f"--formats={fmt}", f"--quantize={quantize}", *model_flags],
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        lines = [line for line in child.stdout.splitlines() if line.startswith("| ")]
        failed = f"| {fmt} | {quantize} | failed (exit status {child.returncode}) |"
        rows.append(lines[-1] if lines else failed)
        print(rows[-1], flush=True)
    columns = ("format", "quantize", "size (x float32)", "batch-1 latency", "SavedModel on TF", "speed-up")
    print("\n| " + " | ".join(columns) + " | check |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

"""A long text through `text_windowed`: how much a request raises a serving process's peak memory.

  python benchmarks/windowed_memory_bench.py [--sizes_kb=250,5000] [--window_batch_size=32]
                                             [--max_windowed_tokens=100000]

google_tiny (`../shared/fixtures/google_tiny`) is exported by `export_bert` with `--doc_stride=64`,
`--max_seq_length=128` and the given `text_windowed` flags (by default the export's defaults). Each
text size is then sent, as one request of one text, to that export loaded in a fresh process as TF
Serving loads it (`tf.saved_model.load` with tensorflow-text's ops, no bert_tf import). The
process's peak resident memory is reset (`/proc/self/clear_refs`) after loading and the rise of
`VmHWM` over the `VmRSS` before the request is reported, with the request's seconds, or the
refusal's message; after it the same loaded model answers a short request.

Texts: the words of tools/demo_data/sample_text.txt repeated up to the size, one text per size.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, memory_bytes, run_in_fresh_process  # noqa: E402

GOOGLE_TINY = os.path.join(os.path.dirname(REPO), "shared", "fixtures", "google_tiny")
SAMPLE = os.path.join(REPO, "tools", "demo_data", "sample_text.txt")
MAX_SEQ_LENGTH, DOC_STRIDE = 128, 64
MB = 1024 * 1024


def make_text(size_kb):
    """The sample corpus' words repeated up to `size_kb` KB (1,000 bytes each) of UTF-8."""
    with open(SAMPLE, encoding="utf-8") as f:
        words = f.read().split()
    text, total = [], -1  # bytes, less the first word's space
    while total + len(words[len(text) % len(words)].encode()) + 1 <= size_kb * 1000:
        text.append(words[len(text) % len(words)])
        total += len(text[-1].encode()) + 1
    return " ".join(text)


def export_worker(work_dir, window_batch_size, max_windowed_tokens):
    """Exports google_tiny with `text_windowed`; returns the version directory."""
    sys.path.insert(0, REPO)
    from bert_tf.export import export_bert

    options = {}
    if window_batch_size:
        options["window_batch_size"] = window_batch_size
    if max_windowed_tokens:
        options["max_windowed_tokens"] = max_windowed_tokens
    path, _ = export_bert(
        os.path.join(GOOGLE_TINY, "bert_model.ckpt"),
        os.path.join(GOOGLE_TINY, "bert_config.json"),
        os.path.join(GOOGLE_TINY, "vocab.txt"),
        True,
        MAX_SEQ_LENGTH,
        os.path.join(work_dir, "export"),
        doc_stride=DOC_STRIDE,
        **options,
    )
    return {"export": path}


def request_worker(export_dir, text_file):
    """One request of the text in `text_file` to the loaded export, then a short one."""
    sys.modules["bert_tf"] = None
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    windowed = tf.saved_model.load(export_dir).signatures["text_windowed"]
    with open(text_file, encoding="utf-8") as f:
        text = tf.constant([f.read()])
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = memory_bytes("VmRSS")
    start = time.perf_counter()
    try:
        outputs = windowed(text=text)
        result = {"tokens": int(outputs["tokens"].shape[1]), "refused": None}
    except tf.errors.InvalidArgumentError as error:
        lines = error.message.splitlines()
        result = {
            "refused": next((line.strip() for line in lines if "max_windowed_tokens" in line), lines[0])
        }
    result["seconds"] = time.perf_counter() - start
    result["rise"] = memory_bytes("VmHWM") - before
    short = windowed(text=tf.constant(["Hello, world!"]))
    result["short"] = [t.decode() for t in short["tokens"][0].numpy() if t]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes_kb", default="250,5000", help="Text sizes, in KB of UTF-8.")
    parser.add_argument("--window_batch_size", type=int, default=None, help="Default: the export's.")
    parser.add_argument("--max_windowed_tokens", type=int, default=None, help="Default: the export's.")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("worker_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "export":
        work_dir = args.worker_args[0]
        result = export_worker(work_dir, args.window_batch_size, args.max_windowed_tokens)
    elif args.worker == "request":
        result = request_worker(*args.worker_args)
    if args.worker:
        import json

        print("RESULT " + json.dumps(result))
        return

    script = os.path.abspath(__file__)
    flags = [f"--{name}={value}" for name, value in vars(args).items() if "window" in name and value]
    with tempfile.TemporaryDirectory() as work_dir:
        export = run_in_fresh_process(script, "export", work_dir, *flags)["export"]
        print(
            f"google_tiny exported, doc_stride={DOC_STRIDE}, {' '.join(flags) or 'the defaults'}", flush=True
        )
        for size_kb in map(int, args.sizes_kb.split(",")):
            text = make_text(size_kb)
            text_file = os.path.join(work_dir, f"text_{size_kb}.txt")
            with open(text_file, "w", encoding="utf-8") as f:
                f.write(text)
            result = run_in_fresh_process(script, "request", export, text_file)
            answer = (
                f"answered, {result['tokens']} tokens wide"
                if result["refused"] is None
                else f"refused: {result['refused']}"
            )
            print(
                f"{size_kb} KB ({len(text.split())} words): {answer}; {result['seconds']:.1f} s; "
                f"peak RSS rise {result['rise'] / MB:.0f} MB; then a short request: {result['short']}",
                flush=True,
            )


if __name__ == "__main__":
    main()

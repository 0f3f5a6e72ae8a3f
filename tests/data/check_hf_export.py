"""Checks by hand, with transformers itself, what `tests/test_hf.py` can only check against files
transformers wrote: that transformers loads what `convert_checkpoint.py --hf_output_dir` writes.

For each model of `tests/data/hf_tiny/` (and the original's google_tiny checkpoint), it converts
HF -> Google -> HF with bert_tf's tool, then in this process (which has transformers):
`from_pretrained` of the class in `config.json` must report no missing, unexpected or mismatched
key; the tensors must equal the fixture's bit for bit; the outputs on the fixture's token ids
must equal those transformers recorded; `AutoTokenizer.from_pretrained` must give the recorded
ids. For google_tiny, transformers' outputs must equal bert_tf's on the same ids (2e-5).

Run from the repository root, in the environment `make_hf_tiny.py` names, with bert_tf's own:

    /tmp/hfenv/bin/python tests/data/check_hf_export.py [--bert_tf_python=.venv/bin/python]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import safetensors.numpy
import torch
import transformers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HF_TINY = os.path.join(REPO, "tests", "data", "hf_tiny")
GOOGLE_TINY = os.path.join(os.path.dirname(REPO), "shared", "fixtures", "google_tiny")
# Pairs for the google_tiny check.
TEXTS = [("Hello, BERT! The café's résumé.", "A second text."), ("short", "x")]


def convert(python, *flags):
    result = subprocess.run(
        [python, os.path.join(REPO, "tools", "convert_checkpoint.py"), "--noprint_parameters", *flags],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if result.returncode:
        sys.exit(f"convert_checkpoint.py {' '.join(flags)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def load(directory):
    """transformers' model of `directory` and what `from_pretrained` reports of its keys."""
    with open(os.path.join(directory, "config.json")) as f:
        architecture = json.load(f)["architectures"][0]
    model, info = getattr(transformers, architecture).from_pretrained(directory, output_loading_info=True)
    return model.eval(), {key: value for key, value in info.items() if value}


def tensors(directory):
    found = {}
    for path in glob.glob(os.path.join(directory, "*.safetensors")):
        found.update(safetensors.numpy.load_file(path))
    return found


def outputs(model, arrays):
    encoded = {key: torch.tensor(arrays[key]) for key in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        result = model(**encoded, output_hidden_states=True)
    found = {"hidden_states": np.stack([h.numpy() for h in result.hidden_states])}
    for key in ("pooler_output", "prediction_logits", "seq_relationship_logits", "logits", "start_logits"):
        if getattr(result, key, None) is not None:
            found[key] = getattr(result, key).numpy()
    return found


def check_fixture(python, name, tmp):
    google, back = os.path.join(tmp, name), os.path.join(tmp, f"{name}_hf")
    printed = convert(python, f"--hf_model={os.path.join(HF_TINY, name)}", f"--output_dir={google}")
    do_lower_case = printed.strip().splitlines()[-1]
    labels = os.path.join(google, "labels.txt")
    convert(
        python,
        f"--bert_config_file={google}/bert_config.json",
        f"--init_checkpoint={google}",
        f"--vocab_file={google}/vocab.txt",
        do_lower_case,
        f"--hf_output_dir={back}",
        *([f"--labels_file={labels}"] if os.path.exists(labels) else []),
    )
    model, problems = load(back)
    mine, theirs = tensors(back), tensors(os.path.join(HF_TINY, name))
    same = sorted(mine) == sorted(theirs) and all(mine[k].tobytes() == theirs[k].tobytes() for k in mine)
    recorded = np.load(os.path.join(HF_TINY, f"{name}.npz"))
    got = outputs(model, recorded)
    diff = max(float(np.abs(got[key] - recorded[key]).max()) for key in got)
    tokenizer = transformers.AutoTokenizer.from_pretrained(back)
    with open(os.path.join(HF_TINY, "texts.json"), encoding="utf-8") as f:
        texts = json.load(f)
    ids_equal = all(
        tokenizer(*text)["input_ids"] == [int(i) for i, m in zip(ids, mask, strict=True) if m]
        for text, ids, mask in zip(texts, recorded["input_ids"], recorded["attention_mask"], strict=True)
    )
    ok = not problems and same and diff <= 2e-5 and ids_equal
    print(
        f"{name}: {type(model).__name__}, keys reported {problems or 'none'}, tensors bit for bit {same}, "
        f"largest output difference {diff:.1e}, tokenizer ids equal {ids_equal} -> {'OK' if ok else 'FAIL'}"
    )
    return ok


def check_google_tiny(python, tmp):
    """The original's checkpoint to HF: transformers' outputs against bert_tf's, on the same ids."""
    back = os.path.join(tmp, "google_tiny_hf")
    convert(
        python,
        f"--bert_config_file={GOOGLE_TINY}/bert_config.json",
        f"--init_checkpoint={GOOGLE_TINY}/bert_model.ckpt",
        f"--vocab_file={GOOGLE_TINY}/vocab.txt",
        "--do_lower_case=true",
        f"--hf_output_dir={back}",
    )
    model, problems = load(back)
    tokenizer = transformers.AutoTokenizer.from_pretrained(back)
    encoded = tokenizer(*zip(*TEXTS, strict=True), padding=True)
    arrays = {key: np.asarray(value) for key, value in encoded.items()}
    np.savez(os.path.join(tmp, "ids.npz"), **arrays)
    hf = outputs(model, arrays)
    with torch.no_grad():
        hf["pooler_output"] = model.bert(
            **{k: torch.tensor(v) for k, v in arrays.items()}
        ).pooler_output.numpy()
    # bert_tf's side, in its own environment: its outputs and FullTokenizer's ids.
    script = f"""
import json, numpy as np
from bert_tf.checkpoints.pretrained import open_pretrained
from bert_tf.text.tokenization import FullTokenizer
p = open_pretrained("{GOOGLE_TINY}/bert_config.json", init_checkpoint="{GOOGLE_TINY}/bert_model.ckpt")
a = np.load("{tmp}/ids.npz")
model, _ = p.model()
inputs = {{"input_ids": a["input_ids"], "input_mask": a["attention_mask"]}}
o = model({{**inputs, "segment_ids": a["token_type_ids"]}})
layers = np.stack([np.asarray(x) for x in [o["embedding_output"], *o["all_encoder_layers"]]])
np.savez("{tmp}/bert_tf.npz", hidden_states=layers, pooler_output=np.asarray(o["pooled_output"]))
t = FullTokenizer("{GOOGLE_TINY}/vocab.txt", True)
pieces = [["[CLS]", *t.tokenize(x), "[SEP]", *t.tokenize(y), "[SEP]"] for x, y in {TEXTS!r}]
print(json.dumps([t.convert_tokens_to_ids(p) for p in pieces]))
"""
    result = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd=REPO)
    if result.returncode:
        sys.exit(result.stderr[-2000:])
    full_tokenizer_ids = json.loads(result.stdout.strip().splitlines()[-1])
    ids_equal = full_tokenizer_ids == [
        [int(i) for i, m in zip(ids, mask, strict=True) if m]
        for ids, mask in zip(arrays["input_ids"], arrays["attention_mask"], strict=True)
    ]
    mine = np.load(os.path.join(tmp, "bert_tf.npz"))
    mask = arrays["attention_mask"].astype(bool)
    diff = max(
        float(np.abs(mine["hidden_states"][:, mask] - hf["hidden_states"][:, mask]).max()),
        float(np.abs(mine["pooler_output"] - hf["pooler_output"]).max()),
    )
    ok = not problems and diff <= 2e-5 and ids_equal
    print(
        f"google_tiny: {type(model).__name__}, keys reported {problems or 'none'}, transformers against "
        f"bert_tf {diff:.1e}, AutoTokenizer = FullTokenizer {ids_equal} -> {'OK' if ok else 'FAIL'}"
    )
    return ok


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bert_tf_python", default=os.path.join(REPO, ".venv", "bin", "python"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names = sorted(d for d in os.listdir(HF_TINY) if os.path.isdir(os.path.join(HF_TINY, d)))
        results = [check_fixture(args.bert_tf_python, name, tmp) for name in names]
        results.append(check_google_tiny(args.bert_tf_python, tmp))
    print(f"transformers {transformers.__version__}: {'all OK' if all(results) else 'FAILED'}")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()

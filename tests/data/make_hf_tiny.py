"""Writes `tests/data/hf_tiny/`: tiny Hugging Face BERTs of every head type, saved by transformers
itself, with transformers' own outputs, for `tests/test_hf.py` (which needs neither torch nor
transformers).

Run once, by hand, from the repository root, in a separate environment that has them (not
bert_tf's):

    python3 -m venv /tmp/hfenv
    /tmp/hfenv/bin/pip install torch==2.13.0 transformers==5.24.0 safetensors numpy
    /tmp/hfenv/bin/python tests/data/make_hf_tiny.py

What it writes, in `tests/data/hf_tiny/`:
- one model directory per head type, as `save_pretrained` writes it, with its tokenizer's files:
  `pretraining` (BertForPreTraining, hidden_act "gelu", vocab.txt), `mlm` (BertForMaskedLM,
  "gelu_new"), `model` (BertModel, "gelu_pytorch_tanh", cased, shards with an index, a
  tokenizer.json and nothing else of the tokenizer, and a sentence-transformers `1_Pooling/`,
  `modules.json` and README beside it), `classifier` (BertForSequenceClassification, three
  named labels), `tagger` (BertForTokenClassification, five tags) and `squad`
  (BertForQuestionAnswering; HF builds the last two without a pooler);
- `<name>.npz` beside each: the texts' `input_ids`, `attention_mask` and `token_type_ids` as
  transformers' tokenizer gives them (padded), and the model's outputs in evaluation mode:
  `hidden_states` [layers + 1, batch, seq, hidden], `pooler_output` where the model has a
  pooler, and the head's logits under transformers' names;
- `texts.json`: the texts (single ones and pairs).

The weights are drawn wider than BERT's initializer (standard deviation 0.3, layer-norm scales
around 1), so that the two gelu forms differ by far more than the tests' tolerance.
"""

import json
import os
import shutil
import tempfile

import numpy as np
import torch
import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tiny")

VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + list(".,'?!")
    + [
        "the",
        "cafe",
        "naive",
        "resume",
        "is",
        "was",
        "good",
        "bad",
        "very",
        "hello",
        "world",
        "john",
        "lives",
        "in",
        "paris",
        "berlin",
        "who",
        "where",
        "what",
        "did",
        "go",
        "to",
        "and",
        "of",
        "play",
        "##ing",
        "##ed",
        "un",
        "##able",
    ]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    + list("JPBHW")
    + ["Hello", "John", "Paris", "Berlin", "The", "é", "ï"]
)

assert len(set(VOCAB)) == len(VOCAB)

TEXTS = [
    ["Hello world, John lives in Paris."],
    ["The café's naïve résumé was very good!"],
    ["Who lives in Berlin?", "John lives in Berlin and plays in Paris."],
    ["unable to go"],
]

HEADS = {
    # name: (class, hidden_act, do_lower_case, extra config)
    "pretraining": ("BertForPreTraining", "gelu", True, {}),
    "mlm": ("BertForMaskedLM", "gelu_new", True, {}),
    "model": ("BertModel", "gelu_pytorch_tanh", False, {}),
    "classifier": (
        "BertForSequenceClassification",
        "gelu",
        True,
        {"id2label": {0: "negative", 1: "neutral", 2: "positive"}},
    ),
    "tagger": (
        "BertForTokenClassification",
        "gelu",
        True,
        {"id2label": {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}},
    ),
    "squad": ("BertForQuestionAnswering", "gelu_new", True, {}),
}


def make_config(hidden_act, extra):
    id2label = extra.get("id2label")
    return transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=40,
        hidden_act=hidden_act,
        max_position_embeddings=32,
        type_vocab_size=2,
        **({"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}} if id2label else {}),
    )


def widen(model, seed):
    """Redraws every parameter wide (module docstring); tied parameters stay tied."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator) * 0.3
            parameter.copy_(noise + 1.0 if "LayerNorm.weight" in name else noise)


def make_tokenizer(do_lower_case, directory):
    with tempfile.TemporaryDirectory() as tmp:
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w", encoding="utf-8") as f:
            f.write("\n".join(VOCAB) + "\n")
        tokenizer = transformers.BertTokenizer(vocab, do_lower_case=do_lower_case)
        tokenizer.save_pretrained(directory)
        # transformers 5 saves a tokenizer.json; BERTs saved by earlier versions carry a vocab.txt.
        shutil.copy(vocab, directory)
    return transformers.AutoTokenizer.from_pretrained(directory)


def outputs_of(model, encoded):
    model.eval()
    with torch.no_grad():
        result = model(**encoded, output_hidden_states=True)
    arrays = {"hidden_states": np.stack([h.numpy() for h in result.hidden_states])}
    for key in (
        "pooler_output",
        "prediction_logits",
        "seq_relationship_logits",
        "logits",
        "start_logits",
        "end_logits",
    ):
        value = getattr(result, key, None)
        if value is not None:
            arrays[key] = value.numpy()
    return arrays


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    with open(os.path.join(OUT, "texts.json"), "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False, indent=1)
    for seed, (name, (class_name, hidden_act, do_lower_case, extra)) in enumerate(HEADS.items()):
        torch.manual_seed(seed)
        directory = os.path.join(OUT, name)
        model = getattr(transformers, class_name)(make_config(hidden_act, extra))
        widen(model, seed)
        if name == "model":
            model.save_pretrained(directory, max_shard_size="24KB")
        else:
            model.save_pretrained(directory)
        tokenizer = make_tokenizer(do_lower_case, directory)
        if name == "pretraining":  # the layout of earlier versions: no tokenizer.json
            os.remove(os.path.join(directory, "tokenizer.json"))
        if name == "model":
            # A tokenizer.json alone; and what a sentence-transformers model keeps beside it.
            for extra_file in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
                if os.path.exists(os.path.join(directory, extra_file)):
                    os.remove(os.path.join(directory, extra_file))
            os.makedirs(os.path.join(directory, "1_Pooling"))
            with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
                json.dump({"word_embedding_dimension": 24, "pooling_mode_mean_tokens": True}, f)
            with open(os.path.join(directory, "modules.json"), "w") as f:
                json.dump([{"idx": 0, "name": "0", "path": "", "type": "Transformer"}], f)
            with open(os.path.join(directory, "README.md"), "w") as f:
                f.write("A tiny test model.\n")
        firsts = [t[0] for t in TEXTS]
        seconds = [t[1] if len(t) > 1 else None for t in TEXTS]
        encoded = {"input_ids": [], "attention_mask": [], "token_type_ids": []}
        for first, second in zip(firsts, seconds, strict=True):
            one = tokenizer(first, second) if second else tokenizer(first)
            for key in encoded:
                encoded[key].append(one[key])
        length = max(len(ids) for ids in encoded["input_ids"])
        for key in encoded:
            encoded[key] = torch.tensor([row + [0] * (length - len(row)) for row in encoded[key]])
        arrays = outputs_of(model, encoded)
        arrays.update({key: value.numpy() for key, value in encoded.items()})
        np.savez(os.path.join(OUT, f"{name}.npz"), **arrays)
        # The gelu forms must differ here by far more than the tests' tolerances.
        if hidden_act != "relu":
            other = {"gelu": "gelu_new"}.get(hidden_act, "gelu")
            model.config.hidden_act = other
            swapped = getattr(transformers, class_name)(model.config)
            swapped.load_state_dict(model.state_dict())
            moved = np.abs(outputs_of(swapped, encoded)["hidden_states"] - arrays["hidden_states"]).max()
            assert moved > 2e-4, (name, moved)
            print(f"{name}: the other gelu moves the hidden states by {moved:.2e}")
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT}: {total:,} bytes; transformers {transformers.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()

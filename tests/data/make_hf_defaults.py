"""Writes `tests/data/hf_defaults/`: `config.json` files that leave out values transformers
defaults, each with transformers' own reading of it, for `tests/test_hf.py`'s check that
`bert_tf.checkpoints.hf.read_hf_config` reads them as transformers does.

Run once, by hand, from the repository root, in a separate environment with transformers 5
(not bert_tf's):

    /work/hfvenv/bin/python tests/data/make_hf_defaults.py

What it writes, in `tests/data/hf_defaults/`:
- `two_labels/config.json`: a BertForSequenceClassification with transformers' default two
  labels, as `save_pretrained` writes it (transformers 5 leaves `id2label` and `label2id` out);
- `sparse/config.json`: a hand-written config naming only `model_type`, `architectures` and
  `num_labels` 3, every other key left to transformers' defaults;
- `<name>/read.json`: what `AutoConfig.from_pretrained` reads from each: the keys bert_tf maps
  to the original's config, `hidden_act`, `layer_norm_eps` and `id2label`.
"""

import json
import os

import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_defaults")
READ_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
)


def record_reading(directory):
    config = transformers.AutoConfig.from_pretrained(directory)
    read = {key: getattr(config, key) for key in READ_KEYS}
    read["id2label"] = {str(i): label for i, label in sorted(config.id2label.items())}
    read["transformers_version"] = transformers.__version__
    with open(os.path.join(directory, "read.json"), "w", encoding="utf-8") as f:
        json.dump(read, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    two_labels = os.path.join(OUT, "two_labels")
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    config.architectures = ["BertForSequenceClassification"]
    config.save_pretrained(two_labels)  # the config.json a model's save_pretrained writes
    record_reading(two_labels)

    sparse = os.path.join(OUT, "sparse")
    os.makedirs(sparse, exist_ok=True)
    with open(os.path.join(sparse, "config.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"model_type": "bert", "architectures": ["BertForSequenceClassification"], "num_labels": 3}, f
        )
    record_reading(sparse)


if __name__ == "__main__":
    main()

"""SQuAD examples, features and prediction files against the original run_squad.py's own.

tests/data/squad_original.json.gz holds what the original's `read_squad_examples`,
`convert_examples_to_features` and `write_predictions` produced on the bundled
tools/demo_data/squad files (tests/data/README.md says how it was made). The logits fed to the
prediction writer are pseudo-random, drawn here as they were there, so its spans are arbitrary
(answers that cut words, cross punctuation or start inside CJK text) and stress the alignment.
"""

import gzip
import json
import os

import numpy as np
import pytest

from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.text.tokenization import FullTokenizer
from tests.test_squad import REPO, VOCAB

FIXTURE = os.path.join(REPO, "tests", "data", "squad_original.json.gz")
FILES = (("squad-v1.1.json", False, 1), ("squad-v2.0.json", True, 2))


@pytest.fixture(scope="module")
def original():
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(VOCAB, do_lower_case=True)


def read(name, is_training, version_2):
    return squad_data.read_squad_examples(
        os.path.join(REPO, "tools", "demo_data", "squad", name), is_training, version_2
    )


def convert(examples, tokenizer, settings, is_training):
    return list(
        squad_data.convert_examples_to_features(
            examples,
            tokenizer,
            settings["max_seq_length"],
            settings["doc_stride"],
            settings["max_query_length"],
            is_training,
        )
    )


@pytest.mark.parametrize("name, version_2, seed", FILES)
@pytest.mark.parametrize("mode", ["train", "predict"])
def test_examples_and_features_match_the_original(original, tokenizer, name, version_2, seed, mode):
    settings, want = original["settings"], original[name][mode]
    examples = read(name, mode == "train", version_2)
    assert [vars(e) for e in examples] == want["examples"]
    features = convert(examples, tokenizer, settings, mode == "train")
    assert len(features) == len(want["features"])
    for feature, expected in zip(features, want["features"], strict=True):
        got = vars(feature).copy()
        got["token_to_orig_map"] = [list(item) for item in sorted(got["token_to_orig_map"].items())]
        got["token_is_max_context"] = [list(item) for item in sorted(got["token_is_max_context"].items())]
        assert got == expected, f"feature {feature.unique_id}"


@pytest.mark.parametrize("name, version_2, seed", FILES)
def test_prediction_files_match_the_original(original, tokenizer, tmp_path, name, version_2, seed):
    settings = original["settings"]
    examples = read(name, False, version_2)
    features = convert(examples, tokenizer, settings, False)
    rng = np.random.RandomState(seed)
    logits = (3 * rng.standard_normal((len(features), 2, settings["max_seq_length"]))).astype(np.float32)
    results = [
        squad_predictions.RawResult(f.unique_id, row[0], row[1])
        for f, row in zip(features, logits, strict=True)
    ]
    names = ["predictions.json", "nbest_predictions.json", "null_odds.json"]
    squad_predictions.write_predictions(
        examples,
        features,
        results,
        settings["n_best_size"],
        settings["max_answer_length"],
        settings["do_lower_case"],
        *[str(tmp_path / n) for n in names],
        version_2_with_negative=version_2,
    )
    outputs = original[name]["outputs"]
    assert sorted(os.listdir(tmp_path)) == sorted(outputs)
    for file_name, text in outputs.items():
        assert (tmp_path / file_name).read_text(encoding="utf-8") == text, file_name

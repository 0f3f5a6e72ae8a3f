"""Sentence vectors (`bert_tf.modeling.pooling`, `extract_features.py --pooling`, the converter's
sentence-transformers modules) on tiny models: the pooling against NumPy and the float64
reference (`bert_tf.checkpoints.reference`), padding changing nothing, the JSON lines, and the
modules read from and written back to a sentence-transformers layout, held against the files
sentence-transformers 6.2 itself wrote (`tests/data/st_modules/`, `make_sentence_embeddings.py`).
The real all-MiniLM-L6-v2 against sentence-transformers' `encode()` is
`test_sentence_embeddings_real_model.py`."""

import json
import logging
import os
import re
import shutil

import numpy as np
import pytest

from bert_tf import BertConfig, BertSentenceEncoder, load_google_checkpoint
from bert_tf.checkpoints import converter, hf, reference
from bert_tf.model_settings import (
    POOLINGS,
    SETTINGS_FILE,
    ModelSettings,
    copy_settings,
    read_settings,
    write_settings,
)
from bert_tf.modeling.pooling import SentencePooling, pool_tokens
from bert_tf.tasks.features import task as features_task
from bert_tf.tasks.features.run import FeaturesOptions, run_extract_features
from bert_tf.text import text_lines
from bert_tf.text.tokenization import FullTokenizer
from tests import model_fixtures as mf
from tests.pooling_reference import numpy_pooling

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
HF_TINY_MODEL = os.path.join(DATA, "hf_tiny", "model")
ST_MODULES = os.path.join(DATA, "st_modules")
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
TEXTS = ["Hello world.", "Who was Jim Henson? He was a puppeteer from Mississippi.", "Hi"]
# all-MiniLM-L6-v2's sentence_bert_config.json as published (sentence-transformers 2 wrote it), with
# a length within hf_tiny's 32 positions.
SENTENCE_CONFIG = '{\n  "max_seq_length": 24,\n  "do_lower_case": false\n}'


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", POOLINGS)
def test_pooling_is_sentence_transformers_math_over_the_real_tokens(pooling, normalize):
    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(3, 6, 5)).astype(np.float32)
    mask = np.array([[1] * 6, [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]], np.int32)
    want = numpy_pooling(tokens, mask, pooling, normalize)
    got = np.asarray(SentencePooling(pooling, normalize)(tokens, mask))
    np.testing.assert_allclose(got, want, atol=1e-6)
    # The padding's values change nothing (large ones would win a max, shift a mean).
    padded = np.where(mask[..., None] == 1, tokens, 1e3).astype(np.float32)
    np.testing.assert_allclose(np.asarray(pool_tokens(padded, mask, pooling, normalize)), got, atol=1e-6)


def test_an_unknown_pooling_is_refused():
    with pytest.raises(
        ValueError, match=r"pooling must be one of cls, mean, max, mean_sqrt_len_tokens, got 'sum'"
    ):
        SentencePooling("sum")


@pytest.fixture(scope="module")
def tiny():
    """google_tiny's config, tokenizer, float64 weights, and each text's ids padded to 24."""
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    ids = [tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(t), "[SEP]"]) for t in TEXTS]
    input_ids = np.array([row + [0] * (24 - len(row)) for row in ids], np.int32)
    mask = (np.arange(24)[None] < np.array([len(row) for row in ids])[:, None]).astype(np.int32)
    return config, tokenizer, reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT), input_ids, mask


def reference_embeddings(tiny, pooling, normalize):
    """The float64 reference's last layer of each text, pooled by `numpy_pooling`."""
    config, _, weights, input_ids, mask = tiny
    last = reference.reference_forward(weights, config, input_ids, mask, np.zeros_like(mask))[
        "sequence_output"
    ]
    return numpy_pooling(last, mask, pooling, normalize)


def test_the_keras_model_pools_the_reference_last_layer_whatever_the_padding(tiny):
    config, _, _, input_ids, mask = tiny
    pooling, normalize = "mean", True
    model = BertSentenceEncoder(config, pooling=pooling, normalize=normalize)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    inputs = {"input_ids": input_ids, "input_mask": mask, "segment_ids": np.zeros_like(mask)}
    got = np.asarray(model(inputs)["sentence_embedding"])
    np.testing.assert_allclose(got, reference_embeddings(tiny, pooling, normalize), atol=2e-6)
    # Each text alone, unpadded.
    for row, length in enumerate(mask.sum(1)):
        alone = {key: value[row : row + 1, :length] for key, value in inputs.items()}
        np.testing.assert_allclose(np.asarray(model(alone)["sentence_embedding"])[0], got[row], atol=2e-6)
    again = BertSentenceEncoder.from_config(model.get_config())
    assert (again.pooling, again.normalize, len(again.weights)) == (pooling, normalize, len(model.weights))


def features_options(tmp_path, **changes):
    source = tmp_path / "in.txt"
    source.write_text("".join(text + "\n" for text in TEXTS))
    flags = dict(
        input_file=str(source),
        output_file=str(tmp_path / "out.jsonl"),
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        max_seq_length=24,
        layers="0",
    )
    return FeaturesOptions(**dict(flags, **changes))


def test_extract_features_writes_one_sentence_embedding_a_line(tiny, tmp_path):
    # --layers=0 is ignored: the last layer is pooled.
    assert run_extract_features(features_options(tmp_path, pooling="max")) == 3
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [list(record) for record in records] == [["linex_index", "sentence_embedding"]] * 3
    assert [record["linex_index"] for record in records] == [0, 1, 2]
    got = np.array([record["sentence_embedding"] for record in records])
    np.testing.assert_allclose(got, reference_embeddings(tiny, "max", False), atol=2e-6)
    for change, message in (
        (dict(normalize=True), r"--normalize needs --pooling"),
        (dict(pooling="sum"), r"--pooling: expected one of cls, mean, max, mean_sqrt_len_tokens, got 'sum'"),
    ):
        with pytest.raises(ValueError, match=message):
            run_extract_features(
                features_options(tmp_path, output_file=str(tmp_path / "bad.jsonl"), **change)
            )
    assert not (tmp_path / "bad.jsonl").exists()


def test_windows_pool_every_piece_of_the_text_from_its_max_context_window(tiny):
    """A text of 13 WordPieces as windows of 6 - 2: the vector pools the per-token features that
    `encode_documents` gives (`test_feature_extraction.py` holds them against the reference)."""
    config, tokenizer, _, _, _ = tiny
    model = BertSentenceEncoder(config)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    examples = [text_lines.InputExample(0, TEXTS[1])]
    ((_, tokens, (last,)),) = features_task.encode_documents(model, tokenizer, examples, 6, [-1], 4, 2)
    assert len(tokens) == 15
    (record,) = features_task.sentence_embeddings(model, tokenizer, examples, 6, "max", True, 4, 2)
    want = numpy_pooling(last[None], np.ones((1, len(tokens))), "max", True)[0]
    np.testing.assert_allclose(record["sentence_embedding"], want, atol=1e-6)


def sentence_transformers_layout(
    directory,
    pooling_config,
    kinds=("Transformer", "Pooling", "Normalize"),
    sentence_config=None,
    tokenizer_config=None,
):
    """hf_tiny's BertModel with sentence-transformers' modules of `kinds` (as version 2 named
    their types), `pooling_config` as the Pooling module's config and, where given, the text
    `sentence_config` as its sentence_bert_config.json and `tokenizer_config` (a dict) as its
    tokenizer_config.json (hf_tiny's model has none)."""
    shutil.copytree(HF_TINY_MODEL, directory)
    if tokenizer_config is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_config, f)
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize", "Dense": "2_Dense"}
    modules = [
        {"idx": i, "name": str(i), "path": paths[kind], "type": f"sentence_transformers.models.{kind}"}
        for i, kind in enumerate(kinds)
    ]
    with open(os.path.join(directory, "modules.json"), "w", encoding="utf-8") as f:
        json.dump(modules, f)
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w", encoding="utf-8") as f:
        json.dump(pooling_config, f)
    if sentence_config is not None:
        with open(os.path.join(directory, "sentence_bert_config.json"), "w", encoding="utf-8") as f:
            f.write(sentence_config)
    return directory


def read_tree(directory, names):
    result = {}
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            result[name] = json.load(f)
    return result


def test_the_modules_are_recorded_and_written_back_as_sentence_transformers_writes_them(tmp_path):
    # Version 2's keys (a true pooling_mode_* each), as all-MiniLM-L6-v2 was published.
    legacy = {
        "word_embedding_dimension": 24,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_cls_token": False,
    }
    source = sentence_transformers_layout(str(tmp_path / "st"), legacy)
    imported = converter.hf_to_google(source, str(tmp_path / "google"))
    assert imported.written
    # hf_tiny/model's tokenizer keeps case: recorded beside the pooling, and the length
    # sentence-transformers takes without sentence_bert_config.json or tokenizer_config.json,
    # max_position_embeddings.
    assert read_settings(str(tmp_path / "google")) == ModelSettings(
        False, pooling="mean", normalize=True, max_seq_length=32
    )
    google = tmp_path / "google"
    converter.google_to_hf(
        str(google / "bert_config.json"),
        str(google),
        str(google / "vocab.txt"),
        False,
        str(tmp_path / "back"),
    )
    names = ["modules.json", "1_Pooling/config.json", "2_Normalize/config.json"]
    want = read_tree(ST_MODULES, names)
    want["1_Pooling/config.json"]["embedding_dimension"] = 24  # MiniLM's is 384
    assert read_tree(str(tmp_path / "back"), names) == want
    # What is written back reads back.
    assert hf.read_sentence_modules(str(tmp_path / "back")) == ("mean", True)
    assert hf.read_sentence_length(str(tmp_path / "back"), 32) == 32


def test_the_length_is_recorded_and_written_back_as_it_was_read(tmp_path):
    """sentence_bert_config.json's max_seq_length: recorded in model_settings.json, and written
    back by --hf_output_dir as the file was (keys, order, indentation)."""
    source = sentence_transformers_layout(
        str(tmp_path / "st"), {"pooling_mode": "cls"}, ("Transformer", "Pooling"), SENTENCE_CONFIG
    )
    google = tmp_path / "google"
    assert converter.hf_to_google(source, str(google)).written
    assert json.loads((google / SETTINGS_FILE).read_text()) == {
        "do_lower_case": False,
        "max_seq_length": 24,
        "normalize": False,
        "pooling": "cls",
    }
    back = tmp_path / "back"
    converter.google_to_hf(
        str(google / "bert_config.json"), str(google), str(google / "vocab.txt"), False, str(back)
    )
    assert (back / "sentence_bert_config.json").read_text().rstrip("\n") == SENTENCE_CONFIG
    assert hf.read_sentence_length(str(back), 32) == 24


def test_a_length_is_read_only_where_a_pooling_is_recorded(tmp_path):
    """Not beside a model with no Pooling module bert_tf records; beside one, a file without the
    key (version 6's) gives sentence-transformers' fallback (hf_tiny's model has no
    tokenizer_config.json: max_position_embeddings)."""
    unused = str(tmp_path / "unused")
    shutil.copytree(HF_TINY_MODEL, unused)  # lists no Pooling module
    (tmp_path / "unused" / "sentence_bert_config.json").write_text(SENTENCE_CONFIG)
    assert hf.read_hf_model(unused).max_seq_length is None
    weighted = sentence_transformers_layout(
        str(tmp_path / "weighted"), {"pooling_mode": "weightedmean"}, sentence_config=SENTENCE_CONFIG
    )
    assert hf.read_hf_model(weighted).max_seq_length is None
    version_6 = {"transformer_task": "feature-extraction", "module_output_name": "token_embeddings"}
    mean = sentence_transformers_layout(
        str(tmp_path / "mean"), {"pooling_mode": "mean"}, sentence_config=json.dumps(version_6)
    )
    model = hf.read_hf_model(mean)
    assert (model.pooling, model.max_seq_length) == ("mean", 32)


with open(os.path.join(DATA, "sentence_lengths.json"), encoding="utf-8") as f:
    LENGTHS = json.load(f)


@pytest.mark.parametrize("case", LENGTHS, ids=[case["case"] for case in LENGTHS])
def test_without_a_max_seq_length_the_tokenizers_capped_at_the_positions_is_recorded(tmp_path, caplog, case):
    """sentence-transformers' length where sentence_bert_config.json gives none: the tokenizer's
    model_max_length (tokenizer_config.json's key, else its max_len; absent or null: transformers'
    10**30) capped at max_position_embeddings (hf_tiny's 32). `sentence_lengths.json` holds the
    lengths derived by hand from that rule; `tests/data/check_sentence_modules.py` holds
    sentence-transformers' own against them."""
    sentence_config = case.get("sentence_bert_config")
    source = sentence_transformers_layout(
        str(tmp_path / "st"),
        {"pooling_mode": "mean"},
        sentence_config=None if sentence_config is None else json.dumps(sentence_config),
        tokenizer_config=case.get("tokenizer_config"),
    )
    with caplog.at_level(logging.INFO, logger="bert_tf.checkpoints.hf"):
        assert hf.read_hf_model(source).max_seq_length == case["max_seq_length"]
    said = f"max_seq_length {case['max_seq_length']}, "
    if (sentence_config or {}).get("max_seq_length") is not None:
        assert f"{said}{source}/sentence_bert_config.json's" in caplog.text
    else:
        assert (
            f"{said}sentence-transformers' where {source}/sentence_bert_config.json names none: "
            "the tokenizer's model_max_length (" in caplog.text
        )
        assert ") capped at config.json's max_position_embeddings (32)" in caplog.text


@pytest.mark.parametrize(
    ("tokenizer_config", "where"),
    [
        ({"model_max_length": 0}, "model_max_length 0"),
        ({"model_max_length": -1}, "model_max_length -1"),
        ({"model_max_length": 16.0}, "model_max_length 16.0"),
        ({"model_max_length": 32.0}, "model_max_length 32.0"),
        ({"model_max_length": "16"}, "model_max_length '16'"),
        ({"model_max_length": True}, "model_max_length True"),
        ({"max_len": 0}, "max_len 0"),
    ],
    ids=["zero", "negative", "a float", "a float at the positions", "a string", "a bool", "max_len"],
)
def test_a_model_max_length_encode_cannot_cut_at_is_refused_naming_it(tmp_path, tokenizer_config, where):
    """sentence-transformers fails to load (a string) or to encode (a float or a negative length
    under the positions), or cuts nothing (0)."""
    source = sentence_transformers_layout(
        str(tmp_path / "st"), {"pooling_mode": "mean"}, tokenizer_config=tokenizer_config
    )
    with pytest.raises(
        ValueError,
        match=f"^{re.escape(source)}/tokenizer_config\\.json: {re.escape(where)} is not a positive integer$",
    ):
        converter.hf_to_google(source, str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", r"sentence_bert_config\.json: not valid JSON"),
        ("[24]", r"sentence_bert_config\.json: not a JSON object"),
        (
            '{"max_seq_length": "24"}',
            r"sentence_bert_config\.json: max_seq_length '24' is not a positive integer",
        ),
        ('{"max_seq_length": 0}', r"sentence_bert_config\.json: max_seq_length 0 is not a positive integer"),
        (
            '{"max_seq_length": 33}',
            r"sentence_bert_config\.json: max_seq_length 33 is above config\.json's max_position_embeddings "
            r"\(32\)$",
        ),
    ],
    ids=["not JSON", "not an object", "a string", "zero", "past the positions"],
)
def test_a_bad_sentence_bert_config_is_refused_naming_it(tmp_path, text, error):
    source = sentence_transformers_layout(
        str(tmp_path / "st"), {"pooling_mode": "mean"}, sentence_config=text
    )
    with pytest.raises(ValueError, match=error):
        converter.hf_to_google(source, str(tmp_path / "google"))
    assert not (tmp_path / "google").exists()


def test_the_settings_read_validate_and_travel(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    settings = ModelSettings(do_lower_case=True, pooling="mean", normalize=True, max_seq_length=256)
    write_settings(str(source), settings)
    assert json.loads((source / SETTINGS_FILE).read_text())["max_seq_length"] == 256
    assert read_settings(str(source)) == settings
    # A copy beside a converted model (convert_checkpoint --output/--keras_model) carries it.
    target.mkdir()
    copy_settings(str(source), str(target))
    assert read_settings(str(target)).max_seq_length == 256
    for value in (0, -1, 2.5, "256", True, None):
        (source / SETTINGS_FILE).write_text(json.dumps({"max_seq_length": value}))
        with pytest.raises(
            ValueError,
            match=f"^{re.escape(str(source / SETTINGS_FILE))}: max_seq_length .* is not a positive integer$",
        ):
            read_settings(str(source))


def test_modules_bert_tf_does_not_compute_are_not_recorded(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    weighted = sentence_transformers_layout(str(tmp_path / "weighted"), {"pooling_mode": "weightedmean"})
    assert hf.read_sentence_modules(weighted) == (None, None)
    assert 'pooling "weightedmean" is not computed by bert_tf' in caplog.text
    dense = sentence_transformers_layout(
        str(tmp_path / "dense"), {"pooling_mode": "cls"}, ("Transformer", "Pooling", "Dense")
    )
    assert hf.read_sentence_modules(dense) == (None, None)
    assert "the modules Transformer, Pooling, Dense make the sentence vector" in caplog.text
    # hf_tiny's model lists no Pooling module (its 1_Pooling/ is not loaded).
    assert hf.read_sentence_modules(HF_TINY_MODEL) == (None, None)


CASED = {"do_lower_case": False}


@pytest.mark.parametrize(
    ("tokenizer_config", "sentence_lower_case", "want", "warned"),
    [
        (CASED, True, True, True),
        (dict(CASED, strip_accents=True), True, True, False),
        ({"do_lower_case": True}, True, True, False),
        (CASED, False, False, False),
        (CASED, None, False, False),
    ],
    ids=["cased", "cased, stripping accents", "uncased", "false", "null"],
)
def test_sentence_transformers_lower_casing_makes_a_cased_tokenizer_uncased(
    tmp_path, caplog, tokenizer_config, sentence_lower_case, want, warned
):
    """sentence_bert_config.json's do_lower_case true lower-cases the text before the tokenizer:
    a cased one then reads uncased text (recorded do_lower_case=true), but keeps its accents
    unless its strip_accents is true, which the original's do_lower_case=true strips: a warning
    says so."""
    source = sentence_transformers_layout(
        str(tmp_path / "st"),
        {"pooling_mode": "mean"},
        sentence_config=json.dumps({"max_seq_length": 24, "do_lower_case": sentence_lower_case}),
        tokenizer_config=tokenizer_config,
    )
    caplog.set_level(logging.INFO, logger="bert_tf.checkpoints.hf")
    google = tmp_path / "google"
    assert converter.hf_to_google(source, str(google)).written
    assert read_settings(str(google)) == ModelSettings(want, "mean", True, 24)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if warned:
        assert warnings == [
            f"{source}/sentence_bert_config.json: do_lower_case is true, so the tokenizer "
            f"({source}/tokenizer_config.json: do_lower_case false) reads lower-cased text: recorded "
            "as uncased, do_lower_case=true, but the original BERT's lower-casing also strips "
            "accents, which sentence-transformers' (str.lower(); in 6.2 a Lowercase normalizer) "
            "does not, so accented letters (é, ü, ñ) tokenize differently"
        ]
    else:
        assert warnings == []


def test_sentence_lower_casing_is_read_only_beside_a_recorded_pooling(tmp_path):
    unused = str(tmp_path / "unused")
    shutil.copytree(HF_TINY_MODEL, unused)  # lists no Pooling module
    (tmp_path / "unused" / "sentence_bert_config.json").write_text('{"do_lower_case": true}')
    (tmp_path / "unused" / "tokenizer_config.json").write_text(json.dumps(CASED))
    assert hf.read_hf_model(unused).do_lower_case is False


def test_a_sentence_lower_casing_not_true_or_false_is_refused_naming_it(tmp_path):
    source = sentence_transformers_layout(
        str(tmp_path / "st"), {"pooling_mode": "mean"}, sentence_config='{"do_lower_case": "true"}'
    )
    with pytest.raises(
        ValueError,
        match=f"^{re.escape(source)}/sentence_bert_config\\.json: do_lower_case 'true' is not true or false$",
    ):
        converter.hf_to_google(source, str(tmp_path / "google"))


def test_bad_modules_and_export_flags_are_one_line_naming_them(tmp_path):
    broken = sentence_transformers_layout(str(tmp_path / "broken"), {"pooling_mode": "mean"})
    with open(os.path.join(broken, "modules.json"), "w", encoding="utf-8") as f:
        f.write("[{")
    with pytest.raises(ValueError, match=r"broken/modules\.json: not valid JSON"):
        hf.read_sentence_modules(broken)
    from bert_tf.export.bert import export_bert

    common = (mf.GOOGLE_TINY_CKPT, mf.GOOGLE_TINY_CONFIG, VOCAB, True, 16, str(tmp_path / "export"))
    with pytest.raises(
        ValueError,
        match=r"^--pooling: expected one of cls, mean, max, mean_sqrt_len_tokens or none, got 'sum'$",
    ):
        export_bert(*common, pooling="sum")
    # google_tiny records no pooling.
    with pytest.raises(ValueError, match=r"--normalize needs --pooling \(the model records no pooling\)"):
        export_bert(*common, normalize=True)
    assert not (tmp_path / "export").exists()

"""Casing (bert_tf.text.casing): the vocabulary rule on vocabularies whose casing is known from
elsewhere (Google's uncased release, transformers' tokenizer settings, scripts without case),
the order flag > record > released name > vocabulary, and every tool that takes
--do_lower_case refusing false on an uncased vocabulary in one line before any work."""

import json
import logging
import os
import shutil

import pytest

from bert_tf.checkpoints.pretrained import open_pretrained
from bert_tf.model_settings import SETTINGS_FILE, read_settings, settings_directory
from bert_tf.text.casing import CASED, CASELESS, UNCASED, resolve_do_lower_case, vocab_casing
from bert_tf.text.tokenization import load_vocab
from tests import model_fixtures as mf
from tests import real_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOGLE_TINY_VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
# transformers' tiny BERT whose tokenizer keeps case (its tokenizer.json: lowercase false).
HF_TINY_CASED = os.path.join(REPO, "tests", "data", "hf_tiny", "model")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
# Tokens of the kinds mBERT's vocabularies hold: Latin, Cyrillic, Greek, CJK, pieces, digits.
MULTILINGUAL = [*SPECIALS, "the", "москва", "αθήνα", "東", "京", "##ing", "##ов", "1990", ",", "straße"]
MULTILINGUAL_CASED = [*MULTILINGUAL, "Москва", "Αθήνα", "Paris"]
CHINESE = [*SPECIALS, "中", "国", "##国", "人", "，", "。", "1", "##2"]


def write_vocab(path, tokens):
    path.write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")
    return str(path)


def hf_tokenizer_lowercases(directory):
    """What transformers' files say of a tokenizer: tokenizer_config.json's do_lower_case, else
    tokenizer.json's normalizer."""
    config = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(config):
        with open(config, encoding="utf-8") as f:
            return json.load(f)["do_lower_case"]
    with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["normalizer"]["lowercase"]


def test_the_vocabulary_rule_on_vocabularies_of_known_casing(tmp_path):
    # bert-base-uncased's vocabulary (Google's uncased release; the original uses it with True).
    assert vocab_casing(load_vocab(GOOGLE_TINY_VOCAB)) == UNCASED
    # transformers' cased tiny tokenizer: its vocabulary has Hello, John, Paris, J, ...
    assert not hf_tokenizer_lowercases(HF_TINY_CASED)
    with open(os.path.join(HF_TINY_CASED, "tokenizer.json"), encoding="utf-8") as f:
        tokens = json.load(f)["model"]["vocab"]
    assert vocab_casing(tokens) == CASED
    assert vocab_casing(MULTILINGUAL) == UNCASED
    assert vocab_casing(MULTILINGUAL_CASED) == CASED
    assert vocab_casing(["Москва", *CHINESE]) == CASED  # one script with capitals suffices
    assert vocab_casing(CHINESE) == CASELESS  # ideographs have no case
    # What does not count: pieces, bracketed specials, tokens not all letters.
    assert vocab_casing([*MULTILINGUAL, "##Ing", "[UNUSED]", "A1", "U.S", "K-9"]) == UNCASED
    assert vocab_casing(["the", "ǅ"]) == CASED  # a title-case letter is a capital
    assert vocab_casing(["ß", "ﬁ"]) == UNCASED  # lower-case letters without a single upper form


def test_the_converted_minilm_is_uncased_whatever_its_sentence_config_says():
    """all-MiniLM-L6-v2: sentence-transformers' do_lower_case false only adds a lower-casing
    step; its BertTokenizer lower-cases, and the vocabulary is uncased."""
    model = real_model.minilm()
    with open(os.path.join(model.hf_dir, "sentence_bert_config.json"), encoding="utf-8") as f:
        assert json.load(f)["do_lower_case"] is False
    assert hf_tokenizer_lowercases(model.hf_dir) is True
    assert vocab_casing(load_vocab(model.vocab_file)) == UNCASED
    # The converter records the tokenizer's casing, which the tools then read and hold a flag to.
    recorded = read_settings(settings_directory(model.bert_config_file, model.init_checkpoint))
    assert recorded.do_lower_case is True
    pretrained = open_pretrained(model.bert_config_file, model.vocab_file, None, model.init_checkpoint)
    assert pretrained.do_lower_case is True
    with pytest.raises(ValueError, match=r"records do_lower_case=true: .*capitals would become \[UNK\]"):
        open_pretrained(model.bert_config_file, model.vocab_file, False, model.init_checkpoint)


def test_without_the_flag_the_record_then_the_released_name_then_the_vocabulary_decide(tmp_path):
    cased = write_vocab(tmp_path / "cased.txt", MULTILINGUAL_CASED)
    chinese = write_vocab(tmp_path / "chinese.txt", CHINESE)
    # The original's default, True, for an uncased vocabulary with nothing recorded.
    assert resolve_do_lower_case(None, GOOGLE_TINY_VOCAB) is True
    assert resolve_do_lower_case(None, cased) is False
    assert resolve_do_lower_case(None, chinese) is True
    assert resolve_do_lower_case(None, cased, recorded=True, record="r.json") is True
    assert (
        resolve_do_lower_case(
            None, GOOGLE_TINY_VOCAB, init_checkpoint="x/cased_L-12_H-768_A-12/bert_model.ckpt"
        )
        is False
    )
    assert (
        resolve_do_lower_case(None, cased, init_checkpoint="x/chinese_L-12_H-768_A-12/bert_model.ckpt")
        is True
    )
    # Both settings tokenize a caseless vocabulary's letters alike: no error, no warning.
    assert resolve_do_lower_case(False, chinese) is False
    # create_pretraining_data has a vocabulary and no model directory.
    from bert_tf.data import PretrainingDataOptions

    assert PretrainingDataOptions(vocab_file=cased).resolved().do_lower_case is False
    assert PretrainingDataOptions(vocab_file=GOOGLE_TINY_VOCAB).resolved().do_lower_case is True


def test_false_against_an_uncased_vocabulary_or_a_recorded_true_is_one_line(tmp_path):
    with pytest.raises(ValueError) as refused:
        resolve_do_lower_case(False, GOOGLE_TINY_VOCAB)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"--do_lower_case=false with the uncased vocabulary {GOOGLE_TINY_VOCAB}")
    assert "every capital would become [UNK]" in message and "--force_do_lower_case" in message
    cased = write_vocab(tmp_path / "cased.txt", MULTILINGUAL_CASED)
    with pytest.raises(ValueError, match=r"^--do_lower_case=false, but r.json records do_lower_case=true: "):
        resolve_do_lower_case(False, cased, recorded=True, record="r.json")
    assert resolve_do_lower_case(False, GOOGLE_TINY_VOCAB, force=True) is False
    with pytest.raises(ValueError, match="--force_do_lower_case insists on a --do_lower_case"):
        resolve_do_lower_case(None, GOOGLE_TINY_VOCAB, force=True)


def test_true_against_a_cased_vocabulary_or_a_recorded_false_warns(tmp_path, caplog):
    cased = write_vocab(tmp_path / "cased.txt", MULTILINGUAL_CASED)
    with caplog.at_level(logging.WARNING, "bert_tf.text.casing"):
        assert resolve_do_lower_case(True, cased) is True
        assert resolve_do_lower_case(True, GOOGLE_TINY_VOCAB, recorded=False, record="r.json") is True
        assert resolve_do_lower_case(True, GOOGLE_TINY_VOCAB) is True  # agrees: no warning
        assert resolve_do_lower_case(False, cased) is False
    first, second = (record.getMessage() for record in caplog.records)
    assert first.startswith(f"--do_lower_case=true with the cased vocabulary {cased} (tokens such as Москва")
    assert second.startswith("--do_lower_case=true, but r.json records do_lower_case=false")


def test_open_pretrained_reads_the_record_beside_the_config(tmp_path):
    """The casing a model directory records decides without the flag, and is checked with it;
    the original's check by a released checkpoint's name comes first."""
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(os.path.join(mf.GOOGLE_TINY, name), tmp_path / name)
    config, vocab = str(tmp_path / "bert_config.json"), str(tmp_path / "vocab.txt")
    (tmp_path / SETTINGS_FILE).write_text('{"do_lower_case": false}\n')
    assert open_pretrained(config, vocab, None, mf.GOOGLE_TINY_CKPT).do_lower_case is False
    (tmp_path / SETTINGS_FILE).write_text('{"do_lower_case": true}\n')
    with pytest.raises(ValueError, match=f"^--do_lower_case=false, but {tmp_path / SETTINGS_FILE} records"):
        open_pretrained(config, vocab, False, mf.GOOGLE_TINY_CKPT)
    released = tmp_path / "uncased_L-12_H-768_A-12"
    released.mkdir()
    with pytest.raises(ValueError, match="uncased_L-12_H-768_A-12 is a lower-cased model"):
        open_pretrained(config, vocab, False, str(released / "bert_model.ckpt"))


def _tool_options(tool, tmp_path):
    """(the tool's job, its options with --do_lower_case=false on google_tiny) for `tool`; every
    input file it reads exists (the casing, not a missing file, is what refuses)."""
    text = tmp_path / "input.txt"
    text.write_text("Hello there.\n")
    model = dict(
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        vocab_file=GOOGLE_TINY_VOCAB,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        do_lower_case=False,
    )
    out = str(tmp_path / "out")
    finetuning = dict(model, output_dir=out, do_predict=True)
    if tool == "run_classifier":
        from bert_tf.tasks.classifier.run import ClassifierOptions, run_classifier

        return run_classifier, ClassifierOptions(task_name="cola", data_dir=str(tmp_path), **finetuning)
    if tool == "run_squad":
        from bert_tf.tasks.squad.run import SquadOptions, run_squad

        return run_squad, SquadOptions(predict_file=str(text), **finetuning)
    if tool == "run_tagger":
        from bert_tf.tasks.tagging.run import TaggingOptions, run_tagger

        return run_tagger, TaggingOptions(predict_file=str(text), labels="O", **finetuning)
    if tool == "extract_features":
        from bert_tf.tasks.features.run import FeaturesOptions, run_extract_features

        return run_extract_features, FeaturesOptions(input_file=str(text), output_file=out, **model)
    if tool == "export_saved_model":
        from bert_tf.export.bert import ExportOptions, run_export

        return run_export, ExportOptions(export_dir=out, **model)
    if tool == "export_edge":
        from bert_tf.export.edge import EdgeOptions, run_export_edge

        return run_export_edge, EdgeOptions(format="tflite", output=out + ".tflite", **model)
    if tool == "extend_vocab":
        from bert_tf.checkpoints.vocab_extension import ExtendVocabOptions, run_extend_vocab

        return run_extend_vocab, ExtendVocabOptions(output_dir=out, new_tokens=str(text), **model)
    if tool == "convert_checkpoint":
        from bert_tf.checkpoints.converter import ConvertOptions, run_convert

        return run_convert, ConvertOptions(hf_output_dir=out, **model)
    assert tool == "create_pretraining_data"
    from bert_tf.data import CreatePretrainingDataOptions, run_create_pretraining_data

    return run_create_pretraining_data, CreatePretrainingDataOptions(
        input_file=str(text), output_file=out, vocab_file=GOOGLE_TINY_VOCAB, do_lower_case=False
    )


TOOLS = [
    "run_classifier",
    "run_squad",
    "run_tagger",
    "extract_features",
    "export_saved_model",
    "export_edge",
    "extend_vocab",
    "convert_checkpoint",
    "create_pretraining_data",
]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_refuses_false_with_an_uncased_vocabulary_before_any_work(tool, tmp_path):
    job, options = _tool_options(tool, tmp_path)
    with pytest.raises(ValueError) as refused:
        job(options)
    assert str(refused.value).startswith(
        f"--do_lower_case=false with the uncased vocabulary {GOOGLE_TINY_VOCAB}"
    )
    assert "\n" not in str(refused.value)  # the CLI prints it as one line (bert_tf.cli)
    assert sorted(os.listdir(tmp_path)) == ["input.txt"]  # nothing written

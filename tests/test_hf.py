"""Hugging Face BERTs in and out (`bert_tf.checkpoints.hf`, `convert_checkpoint.py --hf_model` and
`--hf_output_dir`), held against what transformers itself wrote and computed
(`tests/data/hf_tiny/`, made by `tests/data/make_hf_tiny.py`): neither torch nor transformers is
needed here."""

import contextlib
import glob
import io
import json
import logging
import os
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

from bert_tf.checkpoints import converter, hf, reference
from bert_tf.checkpoints.converter import ConvertOptions, run_convert
from bert_tf.checkpoints.pretrained import load_weights, open_pretrained
from bert_tf.modeling import BertClassifier, BertPretrainer, BertSquad, BertTagger
from bert_tf.tasks.classifier.run import ClassifierOptions, run_classifier
from bert_tf.tasks.squad.run import SquadOptions
from bert_tf.tasks.tagging.run import TaggingOptions
from bert_tf.training.runner import Runner
from tests import model_fixtures as mf

HF_TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf_tiny")
NAMES = ("pretraining", "mlm", "model", "classifier", "tagger", "squad")
ARCHITECTURES = {
    "pretraining": "BertForPreTraining",
    "mlm": "BertForMaskedLM",
    "model": "BertModel",
    "classifier": "BertForSequenceClassification",
    "tagger": "BertForTokenClassification",
    "squad": "BertForQuestionAnswering",
}
# float32 against transformers' float32 (torch's kernels): the issue's bounds.
OUTPUT_TOLERANCE = 2e-5
LOGITS_TOLERANCE = 1e-4


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def hf_outputs(name):
    return np.load(os.path.join(HF_TINY, f"{name}.npz"))


def hf_tensors(directory):
    """Every tensor of an HF directory's safetensors files, by name."""
    tensors = {}
    for path in glob.glob(os.path.join(directory, "*.safetensors")):
        tensors.update(safetensors.numpy.load_file(path))
    return tensors


def convert(*flags):
    """`run_convert` with `flags` (as `--name=value` strings): (exit status, what it printed)."""
    values = {}
    for flag in flags:
        key, value = flag[2:].split("=", 1)
        values[key] = {"true": True, "false": False}.get(value, value)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = run_convert(ConvertOptions(print_parameters=False, **values))
    return status, printed.getvalue()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Every fixture converted by the tool's library call, HF -> Google (`google/<name>`) and on
    back to HF (`hf/<name>`) with the casing the first recorded (no --do_lower_case): `{name:
    (google dir, hf dir, what the first conversion printed)}`."""
    root = tmp_path_factory.mktemp("hf")
    result = {}
    for name in NAMES:
        google, back = str(root / "google" / name), str(root / "hf" / name)
        status, printed = convert(f"--hf_model={HF_TINY}/{name}", f"--output_dir={google}")
        assert status == 0, printed
        labels = [f"--labels_file={google}/labels.txt"] if os.path.exists(f"{google}/labels.txt") else []
        status, _ = convert(
            f"--bert_config_file={google}/bert_config.json",
            f"--init_checkpoint={google}",
            f"--vocab_file={google}/vocab.txt",
            f"--hf_output_dir={back}",
            *labels,
        )
        assert status == 0
        result[name] = (google, back, printed)
    return result


@pytest.mark.parametrize("name", NAMES)
def test_hf_to_google_to_hf_gives_back_every_tensor_bit_for_bit(converted, name):
    original, back = hf_tensors(os.path.join(HF_TINY, name)), hf_tensors(converted[name][1])
    assert sorted(back) == sorted(original)
    assert all(
        back[key].dtype == np.float32 and back[key].tobytes() == original[key].tobytes() for key in back
    )


def test_every_written_file_has_the_same_permissions(converted):
    """`model.safetensors` is written as the other files are (safetensors' `save_file` made it
    mode 0600 where the others follow the umask)."""
    for _, back, _ in converted.values():
        modes = {name: os.stat(os.path.join(back, name)).st_mode & 0o777 for name in os.listdir(back)}
        assert "model.safetensors" in modes and len(set(modes.values())) == 1, modes


@pytest.mark.parametrize("name", NAMES)
def test_the_written_config_is_transformers_own_for_the_keys_written(converted, name):
    """Each key written has the value transformers wrote for the same model, the activation
    under the name of the same function."""
    written = read_json(os.path.join(converted[name][1], hf.CONFIG_FILE))
    original = read_json(os.path.join(HF_TINY, name, hf.CONFIG_FILE))
    same_function = {"gelu_pytorch_tanh": "gelu_new"}
    assert written["hidden_act"] == same_function.get(original["hidden_act"], original["hidden_act"])
    assert written["architectures"] == [ARCHITECTURES[name]]
    for key, value in written.items():
        if key != "hidden_act":
            assert original[key] == value, key
    tokenizer_config = read_json(os.path.join(converted[name][1], hf.TOKENIZER_CONFIG_FILE))
    assert tokenizer_config["tokenizer_class"] == "BertTokenizer"
    assert tokenizer_config["model_max_length"] == original["max_position_embeddings"]


def test_activations_map_to_the_same_function():
    assert hf.HF_ACTIVATIONS["gelu"] == "gelu_exact"
    assert hf.HF_ACTIVATIONS["gelu_new"] == hf.HF_ACTIVATIONS["gelu_pytorch_tanh"] == "gelu"
    assert {hf.HF_ACTIVATIONS[hf.GOOGLE_ACTIVATIONS[act]] for act in hf.GOOGLE_ACTIVATIONS} == set(
        hf.GOOGLE_ACTIVATIONS
    )


@pytest.mark.parametrize("name", NAMES)
def test_google_to_hf_to_google_gives_back_the_checkpoint(converted, tmp_path, name):
    google, back, _ = converted[name]
    status, printed = convert(f"--hf_model={back}", f"--output_dir={tmp_path / 'again'}")
    assert status == 0, printed
    first = reference.load_checkpoint_weights(os.path.join(google, "bert_model.ckpt"))
    again = reference.load_checkpoint_weights(str(tmp_path / "again" / "bert_model.ckpt"))
    assert sorted(again) == sorted(first)
    assert all(again[key].tobytes() == first[key].tobytes() for key in first)
    # One data file, as Google's releases (the HF tensors given up to TensorFlow as written).
    assert sorted(name for name in os.listdir(google) if name.startswith("bert_model.ckpt")) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    for file in ("bert_config.json", "vocab.txt", "labels.txt", "checkpoint", "model_settings.json"):
        if os.path.exists(os.path.join(google, file)):
            assert read_text(os.path.join(google, file)) == read_text(tmp_path / "again" / file)


def test_a_google_checkpoint_goes_to_hf_and_back_less_nothing(fixtures_dir, tmp_path):
    """The original's pretraining checkpoint: a BertForPreTraining with transformers' names,
    then the same checkpoint again."""
    status, _ = convert(
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
        f"--vocab_file={mf.GOOGLE_TINY}/vocab.txt",
        "--do_lower_case=true",
        f"--hf_output_dir={tmp_path / 'hf'}",
    )
    assert status == 0
    written = hf_tensors(str(tmp_path / "hf"))
    # The fixture made by transformers names a BertForPreTraining's tensors the same way.
    assert sorted(written) == sorted(hf_tensors(os.path.join(HF_TINY, "pretraining")))
    assert read_json(tmp_path / "hf" / "config.json")["architectures"] == ["BertForPreTraining"]
    status, printed = convert(f"--hf_model={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'google'}")
    assert status == 0 and "Every HF tensor is used." in printed
    original = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    again = reference.load_checkpoint_weights(str(tmp_path / "google" / "bert_model.ckpt"))
    weights = {name for name in original if name != "global_step" and "/adam_" not in name}
    assert sorted(again) == sorted(weights)
    assert all(again[key].tobytes() == original[key].tobytes() for key in weights)


@pytest.mark.parametrize("name", NAMES)
def test_converted_models_give_transformers_outputs(converted, name):
    """bert_tf on the converted checkpoint against transformers' recorded outputs: every layer,
    the pooler where HF has one, and each head's logits."""
    google = converted[name][0]
    want = hf_outputs(name)
    pretrained = open_pretrained(f"{google}/bert_config.json", init_checkpoint=google)
    inputs = {
        "input_ids": want["input_ids"],
        "input_mask": want["attention_mask"],
        "segment_ids": want["token_type_ids"],
    }
    mask = want["attention_mask"].astype(bool)
    model, _ = pretrained.model()
    got = model(inputs)
    layers = [got["embedding_output"], *got["all_encoder_layers"]]
    assert len(layers) == len(want["hidden_states"])
    for layer, expected in zip(layers, want["hidden_states"], strict=True):
        np.testing.assert_allclose(np.asarray(layer)[mask], expected[mask], atol=OUTPUT_TOLERANCE, rtol=0)
    if "pooler_output" in want:
        np.testing.assert_allclose(got["pooled_output"], want["pooler_output"], atol=OUTPUT_TOLERANCE, rtol=0)
    if "prediction_logits" in want:
        heads = BertPretrainer(pretrained.config)
        load_weights(heads, google)  # a masked LM has no next-sentence head (it stays random)
        seq = want["input_ids"].shape[1]
        positions = np.tile(np.arange(seq, dtype=np.int32), (len(mask), 1))
        log_probs = np.asarray(heads({**inputs, "masked_lm_positions": positions})["masked_lm_log_probs"])
        expected = reference.log_softmax(want["prediction_logits"].astype(np.float64))
        np.testing.assert_allclose(
            log_probs.reshape(expected.shape)[mask], expected[mask], atol=LOGITS_TOLERANCE, rtol=0
        )
        if "seq_relationship_logits" in want:
            nsp = np.asarray(heads(inputs | {"masked_lm_positions": positions})["next_sentence_log_probs"])
            logits = want["seq_relationship_logits"]
            np.testing.assert_allclose(np.exp(nsp), softmax(logits), atol=LOGITS_TOLERANCE, rtol=0)


def softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


@pytest.mark.parametrize("name", NAMES)
def test_the_recorded_do_lower_case_gives_transformers_token_ids(converted, name):
    """The casing recorded in model_settings.json (and printed) is the tokenizer's; a tool given
    no --do_lower_case takes it (the HF directory written back from it says the same)."""
    google, back, printed = converted[name]
    flag = printed.strip().splitlines()[-1]
    assert flag == ("--do_lower_case=false" if name == "model" else "--do_lower_case=true")
    assert read_json(os.path.join(google, "model_settings.json")) == {"do_lower_case": name != "model"}
    pretrained = open_pretrained(f"{google}/bert_config.json", f"{google}/vocab.txt", None, google)
    assert pretrained.do_lower_case is (name != "model")
    assert hf.read_hf_model(back).do_lower_case is (name != "model")
    tokenizer = pretrained.tokenizer()
    want = hf_outputs(name)
    texts = read_json(os.path.join(HF_TINY, "texts.json"))
    for row, text in enumerate(texts):
        tokens = ["[CLS]"]
        for part in text:
            tokens += [*tokenizer.tokenize(part), "[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens)
        assert ids == list(want["input_ids"][row][want["attention_mask"][row] == 1])


def test_hf_tensors_not_used_are_listed_and_other_files_ignored(converted, tmp_path):
    """The sharded BertModel beside a sentence-transformers `1_Pooling/`, `modules.json` and a
    README: every tensor used, the other files not read. A buffer older transformers saved
    beside the weights is named as not used; their gamma/beta names and 16-bit floats read as
    the float32 weights they hold."""
    assert "Every HF tensor is used." in converted["model"][2]
    assert os.path.exists(os.path.join(HF_TINY, "model", "model.safetensors.index.json"))
    want = hf.read_hf_model(os.path.join(HF_TINY, "squad")).weights
    for dtype in (np.float16, ml_dtypes.bfloat16):
        directory = tmp_path / np.dtype(dtype).name
        shutil.copytree(os.path.join(HF_TINY, "squad"), directory)
        path = str(directory / "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        tensors = {
            name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): (
                value.astype(dtype)
            )
            for name, value in tensors.items()
        }
        tensors["bert.embeddings.position_ids"] = np.arange(32)[None]
        safetensors.numpy.save_file(tensors, path, metadata={"format": "pt"})
        model = hf.read_hf_model(str(directory))
        assert model.unused == ["bert.embeddings.position_ids"]
        assert sorted(model.weights) == sorted(want)
        for name, value in model.weights.items():
            assert value.dtype == np.float32
            assert np.array_equal(value, want[name].astype(dtype).astype(np.float32)), name


def run_tool_model(options, factory, *args):
    """The model a fine-tuning tool predicts with: built and restored as the tool does it."""
    runner = Runner.for_finetuning(options)
    model = runner.build(factory, *args)
    runner.restore(model)
    return model


def test_run_classifier_predicts_transformers_probabilities(converted, tmp_path):
    """`run_classifier --do_predict --init_checkpoint=OUT` on the single texts, with the labels
    of OUT's labels.txt."""
    google = converted["classifier"][0]
    texts = read_json(os.path.join(HF_TINY, "texts.json"))
    rows = [row for row, text in enumerate(texts) if len(text) == 1]
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.tsv").write_text(
        "sentence\n" + "".join(texts[row][0] + "\n" for row in rows), encoding="utf-8"
    )
    labels = read_text(f"{google}/labels.txt").split()
    options = ClassifierOptions(
        task_name="tsv",
        data_dir=str(data),
        labels=",".join(labels),
        vocab_file=f"{google}/vocab.txt",
        do_lower_case=True,
        bert_config_file=f"{google}/bert_config.json",
        init_checkpoint=google,
        output_dir=str(tmp_path / "out"),
        max_seq_length=24,
        do_predict=True,
        predict_batch_size=4,
    )
    probabilities = run_classifier(options)["predict"]
    want = softmax(hf_outputs("classifier")["logits"][rows])
    np.testing.assert_allclose(probabilities, want, atol=LOGITS_TOLERANCE, rtol=0)
    predicted = read_text(tmp_path / "out" / "test_predictions.tsv").splitlines()[1:]
    assert [line.split("\t")[1] for line in predicted] == [labels[i] for i in want.argmax(-1)]
    model = run_tool_model(options, BertClassifier, len(labels))
    got = model(tool_inputs("classifier"))["logits"]
    np.testing.assert_allclose(got, hf_outputs("classifier")["logits"], atol=LOGITS_TOLERANCE, rtol=0)


def tool_inputs(name):
    want = hf_outputs(name)
    return {
        "input_ids": want["input_ids"],
        "input_mask": want["attention_mask"],
        "segment_ids": want["token_type_ids"],
    }


def test_run_tagger_and_run_squad_models_give_transformers_logits(converted, tmp_path):
    """The tagger's and SQuAD's models, built and restored from `--init_checkpoint=OUT` as the
    tools do (the pooler absent, the heads from HF's), on transformers' token ids."""
    google = converted["tagger"][0]
    labels = read_text(f"{google}/labels.txt").split()
    options = TaggingOptions(
        labels=",".join(labels),
        predict_file=os.devnull,
        vocab_file=f"{google}/vocab.txt",
        bert_config_file=f"{google}/bert_config.json",
        init_checkpoint=google,
        output_dir=str(tmp_path / "tagger"),
        max_seq_length=24,
        do_predict=True,
    )
    tagger = run_tool_model(options, BertTagger, len(labels))
    mask = hf_outputs("tagger")["attention_mask"].astype(bool)
    got = np.asarray(tagger(tool_inputs("tagger"))["logits"])
    np.testing.assert_allclose(got[mask], hf_outputs("tagger")["logits"][mask], atol=LOGITS_TOLERANCE, rtol=0)

    google = converted["squad"][0]
    options = SquadOptions(
        predict_file=os.devnull,
        vocab_file=f"{google}/vocab.txt",
        bert_config_file=f"{google}/bert_config.json",
        init_checkpoint=google,
        output_dir=str(tmp_path / "squad"),
        max_seq_length=24,
        do_predict=True,
    )
    squad = run_tool_model(options, BertSquad)
    got = squad(tool_inputs("squad"))
    mask = hf_outputs("squad")["attention_mask"].astype(bool)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(
            np.asarray(got[key])[mask], hf_outputs("squad")[key][mask], atol=LOGITS_TOLERANCE, rtol=0
        )


# Bad input: (fixture, what to change, the message's pattern).
def set_config(key, value):
    def change(directory):
        path = os.path.join(directory, "config.json")
        data = read_json(path)
        data[key] = value
        write_json(path, data)

    return change


def set_tokenizer_model_type(directory):
    path = os.path.join(directory, "tokenizer.json")
    data = read_json(path)
    data["model"]["type"] = "BPE"
    write_json(path, data)


def drop_tensor(name):
    def change(directory):
        path = os.path.join(directory, "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        del tensors[name]
        safetensors.numpy.save_file(tensors, path, metadata={"format": "pt"})

    return change


def untie_decoder(directory):
    path = os.path.join(directory, "model.safetensors")
    tensors = safetensors.numpy.load_file(path)
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"] + 1
    safetensors.numpy.save_file(tensors, path, metadata={"format": "pt"})


def pytorch_only(directory):
    os.remove(os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "pytorch_model.bin"), "wb") as f:
        f.write(b"not read")


BAD_INPUT = {
    "roberta": (
        "classifier",
        set_config("model_type", "roberta"),
        r"config\.json: model_type 'roberta'.*only 'bert'",
    ),
    "relative positions": (
        "classifier",
        set_config("position_embedding_type", "relative_key"),
        r"config\.json: position_embedding_type 'relative_key' is not supported",
    ),
    "epsilon": (
        "classifier",
        set_config("layer_norm_eps", 1e-5),
        r"config\.json: layer_norm_eps 1e-05 .*1e-12",
    ),
    "activation": ("classifier", set_config("hidden_act", "silu"), r"config\.json: hidden_act 'silu'"),
    "architecture": (
        "classifier",
        set_config("architectures", ["BertForNextSentencePrediction"]),
        r"config\.json: architectures \['BertForNextSentencePrediction'\] is not supported",
    ),
    "labels": (
        "classifier",
        set_config("id2label", {"0": "a", "1": "b"}),
        r"config\.json: id2label names 2 labels, the classifier has 3 outputs",
    ),
    # transformers' rule: one label is a regression, whose layer has one output.
    "regression": (
        "classifier",
        set_config("id2label", {"0": "a"}),
        r"classifier: the classifier of a regressor has 3 outputs, not 1",
    ),
    "tokenizer": ("model", set_tokenizer_model_type, r"tokenizer\.json: model\.type 'BPE' is not supported"),
    "missing tensor": (
        "tagger",
        drop_tensor("bert.encoder.layer.1.output.dense.weight"),
        r"has no tensor bert\.encoder\.layer\.1\.output\.dense\.weight",
    ),
    "untied decoder": (
        "pretraining",
        untie_decoder,
        r"model\.safetensors: cls\.predictions\.decoder\.weight differs from bert/embeddings/word_embeddings",
    ),
    "pytorch without torch": ("squad", pytorch_only, r"pytorch_model\.bin: .*torch.*safetensors copy"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path, monkeypatch, case):
    name, change, pattern = BAD_INPUT[case]
    directory = str(tmp_path / name)
    shutil.copytree(os.path.join(HF_TINY, name), directory)
    change(directory)
    monkeypatch.setitem(sys.modules, "torch", None)  # as where torch is not installed
    with pytest.raises(ValueError, match=pattern) as error:
        converter.hf_to_google(directory, str(tmp_path / "out"))
    assert "\n" not in str(error.value)
    assert sorted(os.listdir(tmp_path)) == [name]


def test_a_failed_check_writes_nothing(tmp_path):
    imported = converter.hf_to_google(os.path.join(HF_TINY, "squad"), str(tmp_path / "out"), tolerance=1e-12)
    assert not imported.written and not imported.conversion.verification.ok
    assert os.listdir(tmp_path) == []


def test_an_output_dir_with_files_is_refused(converted, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("")
    with pytest.raises(ValueError, match=r"--output_dir: .*out exists and is not an empty directory"):
        converter.hf_to_google(os.path.join(HF_TINY, "squad"), str(tmp_path / "out"))
    google = converted["tagger"][0]
    with pytest.raises(
        ValueError, match=r"--labels_file: .* names 2 labels, .*cls/tagging/output_weights has 5"
    ):
        (tmp_path / "labels.txt").write_text("a\nb\n")
        converter.google_to_hf(
            f"{google}/bert_config.json",
            google,
            f"{google}/vocab.txt",
            True,
            str(tmp_path / "hf"),
            str(tmp_path / "labels.txt"),
        )
    assert sorted(os.listdir(tmp_path)) == ["labels.txt", "out"]


def test_lower_casing_without_accent_stripping_is_a_warning(tmp_path, caplog):
    directory = str(tmp_path / "squad")
    shutil.copytree(os.path.join(HF_TINY, "squad"), directory)
    path = os.path.join(directory, "tokenizer_config.json")
    data = read_json(path)
    data["strip_accents"] = False
    write_json(path, data)
    with caplog.at_level(logging.WARNING):
        model = hf.read_hf_model(directory)
    assert model.do_lower_case
    assert any(
        "strip_accents is False" in r.message and "accented letters" in r.message for r in caplog.records
    )


def test_a_cased_tokenizer_json_without_a_tokenizer_config_is_a_warning(tmp_path, caplog):
    """hf_tiny/model has only tokenizer.json, whose normalizer keeps case: recorded cased, with a
    warning that transformers 5 lower-cases it (its BertTokenizer default); a tokenizer_config.json
    that says do_lower_case false leaves no warning."""
    directory = str(tmp_path / "model")
    shutil.copytree(os.path.join(HF_TINY, "model"), directory)
    assert not os.path.exists(os.path.join(directory, "tokenizer_config.json"))

    def casing_warnings():
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            model = hf.read_hf_model(directory)
        return model.do_lower_case, [r.message for r in caplog.records if "transformers 5" in r.message]

    do_lower_case, warnings = casing_warnings()
    assert not do_lower_case
    assert len(warnings) == 1 and "normalizer.lowercase is false and tokenizer_config.json" in warnings[0]
    write_json(os.path.join(directory, "tokenizer_config.json"), {"do_lower_case": False})
    assert casing_warnings() == (False, [])


@pytest.mark.parametrize("name", ["two_labels", "sparse"])
def test_keys_left_out_of_config_json_read_as_transformers_reads_them(name):
    """transformers 5 writes no id2label for its default two labels; a hand-written config may
    name only num_labels. Both read as transformers read them (tests/data/make_hf_defaults.py)."""
    directory = os.path.join(os.path.dirname(HF_TINY), "hf_defaults", name)
    expected = read_json(os.path.join(directory, "read.json"))
    assert "id2label" not in read_json(os.path.join(directory, "config.json"))
    config, architecture, head, labels = hf.read_hf_config(directory)
    assert architecture == "BertForSequenceClassification" and head.name == "classifier"
    assert labels == [expected["id2label"][str(i)] for i in range(len(expected["id2label"]))]
    assert config.hidden_act == hf.HF_ACTIVATIONS[expected["hidden_act"]]
    for key, value in config.to_dict().items():
        if key != "hidden_act":
            assert value == expected[key], key

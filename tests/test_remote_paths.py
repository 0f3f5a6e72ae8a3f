"""Every library function that reads or writes a user path, on a non-local filesystem.

TensorFlow's in-memory filesystem (`ram://`) goes through the same `tf.io.gfile` code path as
`gs://`, without a network. It lives inside one process: the scale mode's worker processes and
the command-line tools (subprocesses) cannot see it, so those are tested on local paths
(tests/test_pretraining_data.py and the tool tests); in-process, the same reader and planner
functions the workers call are tested here.
"""

import json
import os
import pathlib
import uuid

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import (
    BertConfig,
    BertModel,
    BertPretrainer,
    files,
    load_google_checkpoint,
    save_google_checkpoint,
)
from bert_tf.checkpoints import converter, open_checkpoint, write_checkpoint
from bert_tf.data import PretrainingDataOptions, create_pretraining_data, shards
from bert_tf.tasks.classifier import data as classifier_data
from bert_tf.tasks.classifier import run as classifier_run
from bert_tf.tasks.classifier.run import ClassifierOptions
from bert_tf.tasks.features import data as features_data
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import evaluation as squad_evaluation
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.tasks.tagging import data as tagging_data
from bert_tf.text import text_lines
from bert_tf.text.tokenization import FullTokenizer, load_vocab
from bert_tf.text.vocabulary import build_vocab
from tests import model_fixtures as mf
from tests import pretraining_fixtures as pf


@pytest.fixture
def ram():
    """A fresh directory on the in-memory filesystem, deleted afterwards."""
    directory = f"ram://{uuid.uuid4().hex}"
    yield directory
    if tf.io.gfile.exists(directory):
        tf.io.gfile.rmtree(directory)


def copy_in(local_path, directory):
    """Copies a local file into `directory` under its own name; returns the new path."""
    tf.io.gfile.makedirs(directory)
    path = f"{directory}/{os.path.basename(local_path)}"
    tf.io.gfile.copy(local_path, path, overwrite=True)
    return path


def read_text(path):
    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def listing(directory):
    return sorted(tf.io.gfile.listdir(directory))


def tiny_config():
    return BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)


# --- bert_tf.files ------------------------------------------------------------------------------


def test_atomic_output_on_ram(ram):
    path = f"{ram}/new/out.txt"
    with files.atomic_output(path) as tmp, files.open_file(tmp, "w") as writer:
        writer.write("done")
        assert listing(f"{ram}/new") == [f"out.txt.tmp-{os.getpid()}"]  # nothing under the final name
    assert read_text(path) == "done" and listing(f"{ram}/new") == ["out.txt"]
    with pytest.raises(RuntimeError), files.atomic_output(path) as tmp:
        with files.open_file(tmp, "w") as writer:
            writer.write("half")
        raise RuntimeError("interrupted")
    assert read_text(path) == "done" and listing(f"{ram}/new") == ["out.txt"]


def test_file_helpers_on_ram(ram):
    path = f"{ram}/d/a.txt"
    files.makedirs(f"{ram}/d")
    with files.open_file(path, "wb") as writer:
        writer.write(b"one\ntwo\n")
    assert files.exists(path) and not files.exists(f"{ram}/d/b.txt")
    assert files.isdir(f"{ram}/d") and not files.isdir(path)
    assert files.size(path) == 8
    assert files.glob(f"{ram}/d/*.txt") == [path]
    with files.open_file(path, "rb") as reader:
        reader.seek(4)
        assert list(reader) == [b"two\n"]
    files.rename(path, f"{ram}/d/b.txt")
    assert files.glob(f"{ram}/d/*") == [f"{ram}/d/b.txt"]
    files.remove(f"{ram}/d/b.txt")
    assert files.glob(f"{ram}/d/*") == []
    with pytest.raises(FileNotFoundError):
        files.open_file(path, "rb")


def test_input_patterns_on_ram(ram):
    for name in ("b.txt", "a.txt", "c.md"):
        with files.open_file(f"{ram}/{name}", "w") as writer:
            writer.write("x\n")
    files.makedirs(f"{ram}/dir.txt")
    assert files.expand_input_patterns(f"{ram}/*.txt, {ram}/c.md") == [
        f"{ram}/a.txt",
        f"{ram}/b.txt",
        f"{ram}/c.md",
    ]
    with pytest.raises(ValueError, match=r"--input_file: 'ram://.*/\*\.none' matches no file"):
        files.expand_input_patterns(f"{ram}/*.none")


# --- Checkpoints --------------------------------------------------------------------------------


def test_checkpoint_load_and_save_on_ram(fixtures_dir, ram):
    for suffix in (".index", ".data-00000-of-00001"):
        copy_in(mf.GOOGLE_TINY_CKPT + suffix, f"{ram}/in")
    original = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    names = original.get_variable_to_shape_map()
    # The prefix, its .index file and its directory all name it.
    for path in (f"{ram}/in/bert_model.ckpt", f"{ram}/in/bert_model.ckpt.index", f"{ram}/in"):
        model = BertPretrainer(tiny_config())
        report = load_google_checkpoint(model, path)
        assert report.checkpoint == f"{ram}/in/bert_model.ckpt" and len(report.loaded) == 46
        for weight in model.weights:
            np.testing.assert_array_equal(np.asarray(weight), original.get_tensor(weight.path))

    prefix = save_google_checkpoint(model, f"{ram}/out/bert_model.ckpt", global_step=3)
    assert listing(f"{ram}/out") == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    written = open_checkpoint(prefix)
    assert written.get_variable_to_shape_map() == dict(names, global_step=[])
    for name in names:
        assert written.get_tensor(name).tobytes() == original.get_tensor(name).tobytes(), name
    assert written.get_tensor("global_step") == 3
    # Over it again: on ram:// any prefix of a file is a directory, and the prefix is not one.
    assert save_google_checkpoint(model, prefix, global_step=4) == prefix
    assert listing(f"{ram}/out") == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    assert open_checkpoint(prefix).get_tensor("global_step") == 4


def test_write_checkpoint_any_named_tensors_on_ram(ram):
    named = [
        ("bert/embeddings/word_embeddings/adam_m", np.arange(6, dtype=np.float32).reshape(2, 3)),
        ("global_step", np.int64(12)),
        ("scale", np.float64(0.5)),
    ]
    prefix = write_checkpoint(f"{ram}/train/model.ckpt-12", named)
    assert prefix == f"{ram}/train/model.ckpt-12"
    assert listing(f"{ram}/train") == ["model.ckpt-12.data-00000-of-00001", "model.ckpt-12.index"]
    reader = open_checkpoint(prefix)
    for name, value in named:
        got = reader.get_tensor(name)
        assert got.dtype == value.dtype and np.array_equal(got, value), name
    with pytest.raises(ValueError, match=r"model\.ckpt-13: duplicate variable names \['a'\]"):
        write_checkpoint(f"{ram}/train/model.ckpt-13", [("a", np.zeros(1)), ("a", np.ones(1))])
    assert listing(f"{ram}/train") == ["model.ckpt-12.data-00000-of-00001", "model.ckpt-12.index"]


def test_missing_checkpoints_on_ram(ram):
    model = BertModel(tiny_config())
    with pytest.raises(ValueError, match=r"/nope\.ckpt: no checkpoint here"):
        load_google_checkpoint(model, f"{ram}/nope.ckpt")
    tf.io.gfile.makedirs(f"{ram}/empty")
    with pytest.raises(ValueError, match=r"/empty: directory has no checkpoint"):
        load_google_checkpoint(model, f"{ram}/empty")
    with pytest.raises(ValueError, match=r"^ram://.*/nope\.ckpt: cannot read checkpoint \(.+\)$"):
        open_checkpoint(f"{ram}/nope.ckpt")


def test_converter_on_ram(fixtures_dir, ram):
    config = copy_in(mf.GOOGLE_TINY_CONFIG, f"{ram}/google")
    for suffix in (".index", ".data-00000-of-00001"):
        copy_in(mf.GOOGLE_TINY_CKPT + suffix, f"{ram}/google")
    result = converter.google_to_keras(config, f"{ram}/google", f"{ram}/keras/model.weights.h5")
    assert result.verification.ok
    assert listing(f"{ram}/keras") == ["model.weights.h5"]
    converter.keras_to_google(result.model, f"{ram}/back/bert_model.ckpt")  # reads its bytes back
    assert listing(f"{ram}/back") == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    assert BertConfig.from_json_file(f"{ram}/back/bert_config.json") == tiny_config()


# --- Config, vocabulary ------------------------------------------------------------------------------


def test_config_read_and_write_on_ram(fixtures_dir, ram):
    config = BertConfig.from_json_file(copy_in(mf.GOOGLE_TINY_CONFIG, ram))
    assert config == tiny_config()
    config.to_json_file(f"{ram}/out/bert_config.json")
    assert json.loads(read_text(f"{ram}/out/bert_config.json")) == config.to_dict()
    assert listing(f"{ram}/out") == ["bert_config.json"]
    with pytest.raises(ValueError, match=r"/nope\.json: no such BERT config file"):
        BertConfig.from_json_file(f"{ram}/nope.json")


def test_vocab_on_ram(fixtures_dir, ram):
    vocab = load_vocab(copy_in(pf.VOCAB, ram))
    assert vocab == load_vocab(pf.VOCAB) and len(vocab) == 30522
    assert FullTokenizer(f"{ram}/vocab.txt").tokenize("Hello, world!") == ["hello", ",", "world", "!"]
    with pytest.raises(ValueError, match=r"/nope\.txt: cannot read the vocab file"):
        load_vocab(f"{ram}/nope.txt")


def test_vocab_learning_on_ram(fixtures_dir, ram, tmp_path):
    corpus = copy_in(pf.SAMPLE_TEXT, f"{ram}/corpus")
    local = build_vocab(pf.SAMPLE_TEXT, str(tmp_path / "vocab.txt"), vocab_size=400, min_count=1)
    tokens = build_vocab(f"{ram}/corpus/*.txt", f"{ram}/out/vocab.txt", vocab_size=400, min_count=1)
    assert tokens == local
    assert read_text(f"{ram}/out/vocab.txt") == (tmp_path / "vocab.txt").read_text(encoding="utf-8")
    assert listing(f"{ram}/out") == ["vocab.txt"]
    assert corpus == f"{ram}/corpus/sample_text.txt"


# --- Pretraining data -----------------------------------------------------------------------------


def test_exact_mode_from_and_to_ram_reproduces_the_original(fixtures_dir, ram):
    corpus = copy_in(pf.SAMPLE_TEXT, f"{ram}/corpus")
    vocab = copy_in(pf.VOCAB, f"{ram}/vocab")
    output = f"{ram}/out/sample.tfrecord"
    options = PretrainingDataOptions(**dict(pf.FIXTURE_ARGS, vocab_file=vocab))
    summary = create_pretraining_data(f"{ram}/corpus/*.txt", output, options)
    assert summary.instances == 60 and corpus.endswith("sample_text.txt")
    assert pf.read_records(output) == pf.fixture_records()
    with tf.io.gfile.GFile(output, "rb") as f:
        written = f.read()
    with open(os.path.join(pf.DATA_DIR, "sample_s12345.tfrecord"), "rb") as f:
        assert written == f.read()
    assert listing(f"{ram}/out") == ["sample.tfrecord"]


def test_shard_planning_and_reading_on_ram(fixtures_dir, ram, tmp_path):
    """The planner and the reader of scale mode's workers, in this process, on ram://."""
    text = pathlib.Path(pf.SAMPLE_TEXT).read_bytes().rstrip(b"\n") + b"\n\n"
    local = tmp_path / "corpus.txt"
    local.write_bytes(text.replace(b"\n", b"\r\n") * 6)
    remote = copy_in(str(local), ram)
    shard_bytes = 3000
    local_shards = shards.plan_shards([str(local)], shard_bytes)
    remote_shards = shards.plan_shards([remote], shard_bytes)
    assert len(local_shards) > 3
    assert remote_shards == [[(remote, start, end) for _, start, end in shard] for shard in local_shards]
    maker = shards.ShardMaker(PretrainingDataOptions(vocab_file=pf.VOCAB))
    for local_ranges, remote_ranges in zip(local_shards, remote_shards, strict=True):
        want, got = maker.read(local_ranges), maker.read(remote_ranges)
        assert got.num_documents == want.num_documents > 0
        for array in ("tokens", "segment_starts", "document_starts"):
            np.testing.assert_array_equal(getattr(got, array), getattr(want, array))


# --- Feature extraction ---------------------------------------------------------------------------


def test_feature_extraction_input_and_output_on_ram(ram):
    lines = ["Who was Jim Henson ? ||| Jim Henson was a puppeteer.", "caf\xe9 \u6771\u4eac"]
    path = f"{ram}/in/input.txt"
    tf.io.gfile.makedirs(f"{ram}/in")
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8") + b"bad \xff byte\n")
    examples = list(text_lines.read_examples(path))
    assert examples == [
        text_lines.InputExample(0, "Who was Jim Henson ?", "Jim Henson was a puppeteer."),
        text_lines.InputExample(1, "caf\xe9 \u6771\u4eac"),
        text_lines.InputExample(2, "bad  byte"),
    ]
    records = [{"linex_index": i, "features": [{"token": "x", "layers": []}]} for i in range(3)]
    assert features_data.write_jsonl(iter(records), f"{ram}/out/features.jsonl") == 3
    assert [json.loads(line) for line in read_text(f"{ram}/out/features.jsonl").splitlines()] == records
    assert listing(f"{ram}/out") == ["features.jsonl"]
    with pytest.raises(ValueError, match=r"/nope\.txt: no such input file"):
        list(text_lines.read_examples(f"{ram}/nope.txt"))


# --- Fine-tuning ----------------------------------------------------------------------------------

DEMO_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "demo_data")


def _fields(examples, *names):
    return [tuple(getattr(example, name) for name in names) for example in examples]


def test_classifier_inputs_and_outputs_on_ram(ram, tmp_path):
    local = os.path.join(DEMO_DATA, "mrpc_keyword")
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        copy_in(os.path.join(local, name), f"{ram}/glue")
    remote_processor, local_processor = (
        classifier_data.get_processor("mrpc"),
        classifier_data.get_processor("mrpc"),
    )
    names = ("guid", "text_a", "text_b", "label", "line_number")
    for get in ("get_train_examples", "get_dev_examples", "get_test_examples"):
        remote = getattr(remote_processor, get)(f"{ram}/glue")
        assert remote and _fields(remote, *names) == _fields(getattr(local_processor, get)(local), *names)
    options = ClassifierOptions(
        task_name="mrpc",
        data_dir=f"{ram}/glue",
        vocab_file=copy_in(os.path.join(mf.GOOGLE_TINY, "vocab.txt"), f"{ram}/model"),
        bert_config_file=copy_in(mf.GOOGLE_TINY_CONFIG, f"{ram}/model"),
        output_dir=f"{ram}/out",
        do_predict=True,
    )
    options.validate()
    classifier_run.write_test_results(np.array([[0.25, 0.75]], np.float32), f"{ram}/out/test_results.tsv")
    assert read_text(f"{ram}/out/test_results.tsv") == "0.25\t0.75\n"


def test_tagger_inputs_and_outputs_on_ram(ram, tmp_path):
    local = os.path.join(DEMO_DATA, "conll_names", "dev.txt")
    remote = tagging_data.read_conll(copy_in(local, f"{ram}/conll"), "dev")
    names = ("guid", "words", "tags", "line")
    assert remote and _fields(remote, *names) == _fields(tagging_data.read_conll(local, "dev"), *names)
    predicted = [example.tags for example in remote]
    tagging_data.write_conll(remote, predicted, f"{ram}/out/test_predictions.txt")
    tagging_data.write_conll(remote, predicted, str(tmp_path / "test_predictions.txt"))
    assert read_text(f"{ram}/out/test_predictions.txt") == (tmp_path / "test_predictions.txt").read_text()


def test_squad_inputs_and_outputs_on_ram(ram, tmp_path):
    local = os.path.join(DEMO_DATA, "squad", "squad-v1.1.json")
    path = copy_in(local, f"{ram}/squad")
    remote = squad_data.read_squad_examples(path, is_training=False)
    names = ("qas_id", "question_text", "doc_tokens")
    assert remote and _fields(remote, *names) == _fields(squad_data.read_squad_examples(local, False), *names)
    tokenizer = FullTokenizer(os.path.join(mf.GOOGLE_TINY, "vocab.txt"))
    features = list(squad_data.convert_examples_to_features(remote, tokenizer, 64, 16, 16, is_training=False))
    logits = np.linspace(-1.0, 1.0, 64).tolist()
    results = [squad_predictions.RawResult(feature.unique_id, logits, logits[::-1]) for feature in features]
    outputs = [f"{ram}/out/{name}.json" for name in ("predictions", "nbest_predictions", "null_odds")]
    squad_predictions.write_predictions(remote, features, results, 5, 30, True, *outputs)
    predictions = json.loads(read_text(outputs[0]))
    assert sorted(predictions) == sorted(example.qas_id for example in remote)
    assert squad_evaluation.evaluate_files(path, outputs[0]) == squad_evaluation.evaluate_v1(
        squad_evaluation.read_dataset(local), predictions
    )

"""The converter: Google -> Keras -> Google, and its numeric check can fail."""

import os
import shutil
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import converter, pretrained, reference
from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel
from tests import model_fixtures as mf
from tests import tool_runs
from tests.conftest import FIXTURES_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_tool(*args):
    return tool_runs.run(
        [sys.executable, os.path.join(REPO, "tools", "convert_checkpoint.py"), *args], cwd=REPO, timeout=600
    )


@pytest.fixture(scope="module")
def conversion():
    return converter.google_to_keras(mf.GOOGLE_TINY_CONFIG, mf.GOOGLE_TINY_CKPT)


def test_google_to_keras_matches_the_reference_per_layer(fixtures_dir, conversion):
    rows = dict(conversion.verification.rows)
    assert list(rows) == [
        "bert/embeddings",
        "bert/encoder/layer_0",
        "bert/encoder/layer_1",
        "bert/pooler",
        "cls/predictions",
        "cls/seq_relationship",
    ]
    assert all(diff <= 1e-5 for diff in rows.values()), rows
    assert conversion.verification.ok
    assert "PASS" in conversion.verification.format_table()


def test_the_check_fails_on_a_wrong_model(fixtures_dir, conversion):
    model = conversion.model
    layer_norm = model.bert.encoder.transformer_layers[1].output_block.layer_norm
    layer_norm.epsilon = 1e-3  # Keras' default instead of the original's 1e-12
    try:
        weights = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
        inputs = converter.make_check_inputs(model.config)
        result = converter.verify_against_reference(model, weights, model.config, inputs)
    finally:
        layer_norm.epsilon = 1e-12
    rows = dict(result.rows)
    assert not result.ok
    assert rows["bert/encoder/layer_0"] <= 1e-5 < rows["bert/encoder/layer_1"]
    assert "ABOVE TOLERANCE" in result.format_table()


def test_check_inputs_have_padding_and_both_segments(fixtures_dir, conversion):
    inputs = converter.make_check_inputs(conversion.model.config)
    mask = inputs["input_mask"]
    assert mask[0].all() and not mask[-1].all()
    assert set(np.unique(inputs["segment_ids"][mask == 1])) == {0, 1}
    lengths = mask.sum(1)
    assert (inputs["masked_lm_positions"] < lengths[:, None]).all()


def test_round_trip_through_the_tool(fixtures_dir, tmp_path):
    keras_file = str(tmp_path / "tiny.keras")
    result = run_tool(
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
        f"--output={keras_file}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "PASS" in result.stdout and "bert/encoder/layer_1" in result.stdout
    assert "4,433,468" in result.stdout  # the parameter table's total, as variables.json
    assert os.path.exists(keras_file)

    # A directory as --output gets bert_model.ckpt and bert_config.json inside it.
    prefix = str(tmp_path / "back" / "bert_model.ckpt")
    result = run_tool(f"--keras_model={keras_file}", f"--output={tmp_path / 'back'}/")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"to {prefix} (read back identically)" in result.stdout
    original = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    written = tf.train.load_checkpoint(prefix)
    assert written.get_variable_to_shape_map() == original.get_variable_to_shape_map()
    for name in original.get_variable_to_shape_map():
        assert written.get_tensor(name).tobytes() == original.get_tensor(name).tobytes(), name
    assert os.path.exists(tmp_path / "back" / "bert_config.json")


def test_tool_errors_are_one_line(fixtures_dir, tmp_path):
    result = run_tool(
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}", f"--init_checkpoint={tmp_path}/missing.ckpt"
    )
    assert result.returncode == 2
    assert "missing.ckpt: no checkpoint here" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: ") and "Traceback" not in result.stderr
    # The other direction's error, from the tool's call in this process.
    with pytest.raises(ValueError, match=r"none\.keras: no such Keras model file") as error:
        converter.run_convert(
            converter.ConvertOptions(keras_model=f"{tmp_path}/none.keras", output=f"{tmp_path}/x.ckpt")
        )
    assert "\n" not in str(error.value)


def test_bad_inputs_are_errors_naming_them_before_any_output(fixtures_dir, tmp_path):
    import json

    with open(mf.GOOGLE_TINY_CONFIG, encoding="utf-8") as f:
        config = json.load(f)
    one_layer = tmp_path / "one_layer.json"
    one_layer.write_text(json.dumps(dict(config, num_hidden_layers=1)))
    # The check alone would pass: the reference reads the same one-layer config.
    with pytest.raises(
        ValueError,
        match=r"16 of the checkpoint's encoder weights are not in the model \(bert/encoder/layer_1/",
    ):
        converter.google_to_keras(str(one_layer), mf.GOOGLE_TINY_CKPT, str(tmp_path / "out.keras"))
    (tmp_path / "d.keras").mkdir()
    with pytest.raises(ValueError, match=r"^--output: .*d\.keras is a directory"):
        converter.google_to_keras(mf.GOOGLE_TINY_CONFIG, mf.GOOGLE_TINY_CKPT, str(tmp_path / "d.keras"))
    (tmp_path / "text.keras").write_text("not a model")
    with pytest.raises(ValueError, match=r"text\.keras: not a Keras model saved as \.keras"):
        converter.keras_to_google(str(tmp_path / "text.keras"), str(tmp_path / "ckpt" / "bert_model.ckpt"))
    # A .keras file cut short (a copy interrupted): Keras would report it as not found.
    with zipfile.ZipFile(tmp_path / "cut.keras", "w") as archive:
        archive.writestr("config.json", json.dumps(config) * 100)
    (tmp_path / "cut.keras").write_bytes((tmp_path / "cut.keras").read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"cut\.keras: not a Keras model saved as \.keras \(not a whole zip"):
        converter.keras_to_google(str(tmp_path / "cut.keras"), str(tmp_path / "ckpt" / "bert_model.ckpt"))
    # A .keras file whose config was edited to fewer layers than its weights: Keras' load_model
    # would build the smaller model and drop the other layers' weights without a word.
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    model.save(tmp_path / "two.keras")
    with zipfile.ZipFile(tmp_path / "two.keras") as two, zipfile.ZipFile(tmp_path / "one.keras", "w") as one:
        for name in two.namelist():
            content = two.read(name)
            if name == "config.json":
                content = content.replace(b'"num_hidden_layers": 2', b'"num_hidden_layers": 1')
            one.writestr(name, content)
    with pytest.raises(ValueError, match=r"one\.keras: its weights file holds 39 weights, .* has 23: "):
        converter.keras_to_google(str(tmp_path / "one.keras"), str(tmp_path / "ckpt" / "bert_model.ckpt"))
    assert pretrained.load_keras_bert(str(tmp_path / "two.keras")).config.num_hidden_layers == 2
    with pytest.raises(ValueError, match=r"d\.keras: a directory, not a Keras model saved as \.keras"):
        converter.keras_to_google(str(tmp_path / "d.keras"), str(tmp_path / "ckpt" / "bert_model.ckpt"))
    with pytest.raises(ValueError, match=r"d\.keras: a directory, not a bert_config\.json file"):
        converter.google_to_keras(str(tmp_path / "d.keras"), mf.GOOGLE_TINY_CKPT)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["cut.keras", "d.keras", "one.keras", "one_layer.json", "text.keras", "two.keras"]


def test_a_training_checkpoint_is_read_for_its_weights_only(fixtures_dir, tmp_path):
    """The original's 3-shard training checkpoint keeps its Adam slots in the last shard: the
    converter reads the weights the model loads, so the conversion does not need that shard."""
    source = os.path.join(FIXTURES_DIR, "google_tiny_train")
    for name in (
        "model.ckpt-3.index",
        "model.ckpt-3.data-00000-of-00003",
        "model.ckpt-3.data-00001-of-00003",
    ):
        shutil.copy(os.path.join(source, name), tmp_path / name)
    result = converter.google_to_keras(
        os.path.join(source, "bert_config.json"), str(tmp_path / "model.ckpt-3"), str(tmp_path / "out.keras")
    )
    assert result.verification.ok and len(result.load_report.loaded) == 46


def test_keras_to_google_refuses_other_names_and_warns_of_bert_tfs_activation(fixtures_dir, tmp_path, caplog):
    from bert_tf import BertConfig, BertModel

    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    with pytest.raises(ValueError, match=r"encoder: its weight paths are not Google's names \(encoder/"):
        converter.keras_to_google(BertModel(config, name="encoder"), str(tmp_path / "a" / "bert_model.ckpt"))
    assert not (tmp_path / "a").exists()
    config.hidden_act = "gelu_exact"
    with caplog.at_level("WARNING"):
        _, prefix = converter.keras_to_google(BertModel(config), str(tmp_path / "b") + "/")
    assert prefix == str(tmp_path / "b" / "bert_model.ckpt")
    assert (
        "hidden_act='gelu_exact', bert_tf's: the original's modeling.py reads gelu, relu, tanh, linear"
        in caplog.text
    )

"""Google checkpoint load/save: identity mapping, strictness, and clear errors on bad input."""

import logging
import os
import shutil
import weakref

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertModel, BertPretrainer, load_google_checkpoint, save_google_checkpoint
from bert_tf.checkpoints import reference
from bert_tf.checkpoints.google import write_checkpoint
from bert_tf.checkpoints.pretrained import load_weights, open_pretrained
from tests import model_fixtures as mf
from tests.conftest import FIXTURES_DIR

TRAIN_CKPT = os.path.join(FIXTURES_DIR, "google_tiny_train", "model.ckpt-3")


def tiny_config(**overrides):
    values = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG).to_dict()
    values.update(overrides)
    return BertConfig.from_dict(values)


def snapshot(model):
    return {w.path: np.array(w) for w in model.weights}


def test_load_assigns_every_variable_from_the_checkpoint(fixtures_dir):
    model = BertPretrainer(tiny_config())
    report = load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    reader = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    assert len(report.loaded) == 46 and report.unused == [] and report.missing == []
    for w in model.weights:
        np.testing.assert_array_equal(np.asarray(w), reader.get_tensor(w.path), err_msg=w.path)


def test_save_round_trips_names_shapes_and_bytes(fixtures_dir, tmp_path):
    model = BertPretrainer(tiny_config())
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    prefix = save_google_checkpoint(model, str(tmp_path / "out" / "bert_model.ckpt"))
    original = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    written = tf.train.load_checkpoint(prefix)
    assert written.get_variable_to_shape_map() == original.get_variable_to_shape_map()
    for name in original.get_variable_to_shape_map():
        a, b = original.get_tensor(name), written.get_tensor(name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]


def test_save_with_global_step(tmp_path):
    model = BertModel(
        BertConfig(
            vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
        )
    )
    prefix = save_google_checkpoint(model, str(tmp_path / "m.ckpt"), global_step=7)
    reader = tf.train.load_checkpoint(prefix)
    assert reader.get_tensor("global_step") == 7
    assert reader.get_variable_to_dtype_map()["global_step"] == tf.int64


def test_bert_model_reports_the_heads_as_unused(fixtures_dir):
    report = load_google_checkpoint(BertModel(tiny_config()), mf.GOOGLE_TINY_CKPT)
    assert len(report.loaded) == 39
    assert report.unused_weights == sorted(
        n
        for n in tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT).get_variable_to_shape_map()
        if n.startswith("cls/")
    )
    assert "cls/predictions/output_bias" in str(report)


def test_training_checkpoint_skips_optimizer_slots(fixtures_dir):
    model = BertPretrainer(tiny_config())
    report = load_google_checkpoint(model, TRAIN_CKPT)
    assert len(report.loaded) == 46
    assert len(report.unused_optimizer_state) == 93  # 46 adam_m + 46 adam_v + global_step
    assert report.unused_weights == []


def test_directory_is_resolved_to_its_checkpoint(fixtures_dir, tmp_path):
    report = load_google_checkpoint(BertPretrainer(tiny_config()), mf.GOOGLE_TINY)
    assert report.checkpoint.endswith("bert_model.ckpt")
    # A killed write's temporary beside it (`<prefix>.tmp-<pid>`) is not a second checkpoint.
    for name in os.listdir(mf.GOOGLE_TINY):
        if name.startswith("bert_model.ckpt."):
            shutil.copy(os.path.join(mf.GOOGLE_TINY, name), tmp_path / name)
            shutil.copy(
                os.path.join(mf.GOOGLE_TINY, name), tmp_path / name.replace(".ckpt.", ".ckpt.tmp-999999.")
            )
    report = load_google_checkpoint(BertPretrainer(tiny_config()), str(tmp_path))
    assert report.checkpoint == str(tmp_path / "bert_model.ckpt")


def test_any_optimizers_slots_are_optimizer_state(fixtures_dir, tmp_path):
    """Slots are named below their variable: TF1 Adam's `/Adam` and `/Adam_1` as the original's
    `/adam_m` and `/adam_v` (the encoder's rule would otherwise refuse them as weights)."""
    reader = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    named = [(name, reader.get_tensor(name)) for name in reader.get_variable_to_shape_map()]
    slots = [(f"{name}/{slot}", value) for name, value in named for slot in ("Adam", "Adam_1")]
    prefix = write_checkpoint(str(tmp_path / "adam.ckpt"), named + slots + [("beta1_power", np.float32(0.9))])
    report = load_google_checkpoint(BertModel(tiny_config()), prefix)
    assert len(report.unused_optimizer_state) == 2 * len(named)
    assert report.unused_weights == sorted(["beta1_power"] + [n for n, _ in named if n.startswith("cls/")])


def test_saving_writes_float32_under_any_policy_and_takes_a_directory(fixtures_dir, tmp_path):
    model = BertModel(tiny_config(), dtype="bfloat16")
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    prefix = save_google_checkpoint(model, str(tmp_path) + "/")
    assert prefix == str(tmp_path / "bert_model.ckpt")
    assert save_google_checkpoint(model, prefix + ".index") == prefix
    assert sorted(os.listdir(tmp_path)) == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    dtypes = tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()
    assert set(dtypes.values()) == {tf.float32}


def test_missing_variables_are_an_error_and_nothing_is_assigned(fixtures_dir, tmp_path):
    source = BertModel(tiny_config())
    load_google_checkpoint(source, mf.GOOGLE_TINY_CKPT)
    prefix = save_google_checkpoint(source, str(tmp_path / "bert_only.ckpt"))
    model = BertPretrainer(tiny_config())
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"7 model variables are not in the checkpoint: cls/"):
        load_google_checkpoint(model, prefix)
    after = snapshot(model)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    report = load_google_checkpoint(model, prefix, strict=False)
    assert len(report.missing) == 7 and len(report.loaded) == 39


def test_a_checkpoint_without_the_pooler_loads_with_a_warning(fixtures_dir, tmp_path, caplog):
    """HF's token classification, QA and masked LM models have no pooler: such a checkpoint loads
    with the default arguments, and through every tool's loader, the pooler keeping its initial
    values; any other encoder weight missing is still an error."""
    source = BertModel(tiny_config())
    load_google_checkpoint(source, mf.GOOGLE_TINY_CKPT)
    values = snapshot(source)

    def without(*left_out):
        kept = [(name, value) for name, value in values.items() if not name.startswith(left_out)]
        return write_checkpoint(str(tmp_path / f"{len(left_out)}.ckpt"), kept)

    prefix = without("bert/pooler/")
    model = BertModel(tiny_config())
    before = snapshot(model)
    with caplog.at_level(logging.WARNING):
        report = load_google_checkpoint(model, prefix)
    assert sorted(report.missing) == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
    after = snapshot(model)
    for name, value in after.items():
        want = before[name] if name.startswith("bert/pooler/") else values[name]
        assert np.array_equal(value, want), name
    assert any("pooled output is untrained" in record.message for record in caplog.records)
    pretrained = open_pretrained(mf.GOOGLE_TINY_CONFIG, init_checkpoint=prefix)
    assert load_weights(BertModel(pretrained.config), prefix).missing == report.missing

    prefix = without("bert/pooler/", "bert/encoder/layer_1/output/dense/kernel")
    message = r"1 model variables are not in the checkpoint: bert/encoder/layer_1/output/dense/kernel Nothing"
    with pytest.raises(ValueError, match=message):
        load_google_checkpoint(BertModel(tiny_config()), prefix)
    with pytest.raises(
        ValueError, match=r"1 encoder variables are not in the checkpoint \(bert/encoder/layer_1/"
    ):
        open_pretrained(mf.GOOGLE_TINY_CONFIG, init_checkpoint=prefix)
    prefix = without("bert/pooler/dense/bias")  # half a pooler is no model's
    with pytest.raises(
        ValueError, match=r"1 model variables are not in the checkpoint: bert/pooler/dense/bias"
    ):
        load_google_checkpoint(BertModel(tiny_config()), prefix)


def test_a_checkpoint_is_one_data_file_with_each_value_released_as_written(fixtures_dir, tmp_path):
    """Google's layout (`.data-00000-of-00001`), over a sharded checkpoint at the same prefix too
    (the original's training checkpoint, 3 data files); each value is let go once TensorFlow has
    its copy, so an iterator giving values up holds the model once."""
    values = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    source = os.path.join(FIXTURES_DIR, "google_tiny_train")
    for name in os.listdir(source):
        if name.startswith("model.ckpt-3."):
            shutil.copy(os.path.join(source, name), tmp_path / name.replace("model.ckpt-3", "one.ckpt"))
    given = []  # a weak reference to each value given, alive or not when the next is asked for

    def giving_up():
        for name in list(values):
            if given:
                assert given[-1]() is None, "the previous value is still held"
            value = values.pop(name)
            given.append(weakref.ref(value))
            yield name, value
            del value

    expected = {name: value.copy() for name, value in values.items()}
    prefix = write_checkpoint(str(tmp_path / "one.ckpt"), giving_up())
    assert len(given) == len(expected) > 40 and not values
    assert sorted(os.listdir(tmp_path)) == ["one.ckpt.data-00000-of-00001", "one.ckpt.index"]
    written = reference.load_checkpoint_weights(prefix)
    assert sorted(written) == sorted(expected)
    assert all(written[name].tobytes() == expected[name].tobytes() for name in expected)


@pytest.mark.parametrize(
    "layers, side",
    [
        (1, "checkpoint's encoder weights are not in the model"),
        (3, "model's encoder weights are not in the checkpoint"),
    ],
)
def test_a_config_of_another_depth_is_an_error_even_for_heads_left_out(fixtures_dir, layers, side):
    """The 2-layer checkpoint: a config of 1 layer would load a truncated encoder, one of 3 leave
    a random layer, whatever `strict` and `allow_unused` allow of the heads."""
    model = BertModel(tiny_config(num_hidden_layers=layers))
    before = snapshot(model)
    with pytest.raises(ValueError, match=rf"16 of the {side} \(bert/encoder/layer_[12]/.*num_hidden_layers"):
        load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT, strict=False, allow_unused=True)
    after = snapshot(model)
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_wrong_config_names_the_variable_and_both_shapes(fixtures_dir):
    model = BertModel(tiny_config(intermediate_size=256))
    before = snapshot(model)
    with pytest.raises(ValueError) as error:
        load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    message = str(error.value)
    assert (
        "bert/encoder/layer_0/intermediate/dense/kernel: checkpoint [128, 512], model [128, 256]" in message
    )
    assert "bert_config.json" in message and "Nothing was loaded" in message
    assert all(np.array_equal(before[k], np.asarray(w)) for k, w in ((w.path, w) for w in model.weights))


def test_more_layers_than_the_checkpoint_is_an_error(fixtures_dir):
    with pytest.raises(ValueError, match=r"bert/encoder/layer_2/attention/self/query/kernel"):
        load_google_checkpoint(BertModel(tiny_config(num_hidden_layers=3)), mf.GOOGLE_TINY_CKPT)


def test_non_bert_checkpoint_is_an_error(tmp_path):
    prefix = str(tmp_path / "other.ckpt")
    tf.raw_ops.SaveV2(
        prefix=prefix, tensor_names=["resnet/conv1/kernel"], shape_and_slices=[""], tensors=[tf.zeros([3, 3])]
    )
    with pytest.raises(ValueError, match=r"not a BERT checkpoint.*resnet/conv1/kernel"):
        load_google_checkpoint(BertModel(tiny_config()), prefix)


def test_missing_path_and_empty_directory(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.ckpt: no checkpoint here"):
        load_google_checkpoint(BertModel(tiny_config()), str(tmp_path / "nope.ckpt"))
    with pytest.raises(ValueError, match=r"directory has no checkpoint"):
        load_google_checkpoint(BertModel(tiny_config()), str(tmp_path))


def test_truncated_data_file_is_an_error_and_nothing_is_assigned(fixtures_dir, tmp_path):
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        shutil.copy(os.path.join(mf.GOOGLE_TINY, name), tmp_path / name)
    data = tmp_path / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1_000_000])
    model = BertPretrainer(tiny_config())
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"truncated or corrupt"):
        load_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    assert all(np.array_equal(before[w.path], np.asarray(w)) for w in model.weights)


def test_index_without_data_file(fixtures_dir, tmp_path):
    shutil.copy(os.path.join(mf.GOOGLE_TINY, "bert_model.ckpt.index"), tmp_path / "m.ckpt.index")
    with pytest.raises(ValueError, match=r"no m\.ckpt\.data-\* file"):
        load_google_checkpoint(BertModel(tiny_config()), str(tmp_path / "m.ckpt"))


def test_writing_over_a_sharded_checkpoint_replaces_it_whole(fixtures_dir, tmp_path, monkeypatch):
    """The original's training checkpoint has three data shards: writing one file over it
    leaves the new checkpoint alone, and a write killed before its index leaves no checkpoint,
    never the old index over new data."""
    from bert_tf.checkpoints import google, write_checkpoint

    for name in os.listdir(os.path.dirname(TRAIN_CKPT)):
        if name.startswith("model.ckpt-3."):
            shutil.copy(os.path.join(os.path.dirname(TRAIN_CKPT), name), tmp_path / name)
    prefix = str(tmp_path / "model.ckpt-3")
    write_checkpoint(prefix, [("w", np.arange(3.0))])
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index"]
    np.testing.assert_array_equal(tf.train.load_checkpoint(prefix).get_tensor("w"), np.arange(3.0))

    renames = []

    def rename_data_then_stop(source, target):
        if target.endswith(".index"):
            raise KeyboardInterrupt("killed before the index")
        renames.append(target)
        os.replace(source, target)

    monkeypatch.setattr(google.files, "rename", rename_data_then_stop)
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(prefix, [("w", np.zeros(3))])
    assert renames == [prefix + ".data-00000-of-00001"]
    assert not os.path.exists(prefix + ".index")  # no checkpoint: not the old index on new data
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]

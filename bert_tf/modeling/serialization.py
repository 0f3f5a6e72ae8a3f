"""Keras serialisation of the layers and models whose structure follows from a `BertConfig`."""

from bert_tf.config import BertConfig


def as_bert_config(config):
    """`config` itself if it is a `BertConfig`, else the `BertConfig` of its dict (Google's keys)."""
    return config if isinstance(config, BertConfig) else BertConfig.from_dict(config)


class BertConfigured:
    """Mixin for a Keras layer or model that a `BertConfig` describes completely.

    Such a layer creates all its sub-layers from the `BertConfig`, so its Keras config is
    small: the layer's own arguments (`name`, `trainable`, the `dtype` policy), the
    `BertConfig` as Google's dict under `"config"`, and, under `"sublayers_trainable"`, the
    `trainable` flag of every sub-layer with weights whose flag differs from its parent's, keyed
    by the path of layer names below this layer (`"encoder/layer_0"`). `from_config` rebuilds the
    layer and sets those flags again, so a frozen sub-layer stays frozen through `get_config` /
    `from_config` and a `.keras` file. Use it before `keras.layers.Layer` (or `keras.Model`) among
    the base classes.
    """

    def __init__(self, config, **kwargs):
        """Args:
        config: A `BertConfig`, or its dict.
        **kwargs: Keras layer arguments (`name`, `trainable`, `dtype`).
        """
        super().__init__(**kwargs)
        self.config = as_bert_config(config)

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        sublayers_trainable = _sublayers_trainable(self)
        if sublayers_trainable:
            config["sublayers_trainable"] = sublayers_trainable
        return config

    @classmethod
    def from_config(cls, config):
        """The layer of `get_config`'s dict, built (every shape follows from the `BertConfig`).

        Building here lets the flags reach sub-layers that a parent creates in its `build`.
        """
        config = dict(config)
        trainable = config.pop("trainable", True)
        sublayers_trainable = config.pop("sublayers_trainable", {})
        layer = cls(**config)
        if not layer.built:
            layer.build()
        # Everything is trainable now. The setter (unlike the constructor argument) also sets the
        # sub-layers' flags; each flag set below differs from the current one (on TensorFlow,
        # setting an attribute to the value it has is skipped, setter and all).
        layer.trainable = trainable
        for path, flag in sublayers_trainable.items():  # parents before their sub-layers
            _sublayer(layer, path).trainable = flag
        return layer


def _sublayers_trainable(layer, prefix=""):
    """`{path: trainable}` for the sub-layers whose flag differs from their parent's, parents first.

    Layers without weights are left out: their flag changes nothing, and their generated names
    (`dropout_7`) are not the same in another process.
    """
    flags = {}
    for sublayer in layer._layers:  # Keras' list of directly tracked sub-layers
        if not sublayer.weights:
            continue
        path = prefix + sublayer.name
        if sublayer.trainable != layer.trainable:
            flags[path] = sublayer.trainable
        flags.update(_sublayers_trainable(sublayer, path + "/"))
    return flags


def _sublayer(layer, path):
    """The sub-layer at `path` (names joined by "/") below `layer`.

    Raises:
      ValueError: No such sub-layer.
    """
    for name in path.split("/"):
        found = [sublayer for sublayer in layer._layers if sublayer.name == name]
        if not found:
            raise ValueError(f"{layer.name} has no sub-layer {name!r} (path {path!r} of sublayers_trainable)")
        layer = found[0]
    return layer

"""`LayerNorm` with the original's variables (beta, then gamma) and epsilon."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNorm(keras.layers.Layer):
    """Normalises each token over its features: `gamma * (x - mean) / sqrt(var + eps) + beta`.

    The mean and the biased variance are taken over the last axis only. The arithmetic is
    done in float32 whatever the compute dtype, so it is stable under mixed precision.
    """

    def __init__(self, hidden_size, epsilon=1e-12, name="LayerNorm", **kwargs):
        """Args:
        hidden_size: Size of the last axis.
        epsilon: Added to the variance; the original uses 1e-12.
        name: Variable scope; the original's is "LayerNorm".
        """
        super().__init__(name=name, **kwargs)
        self.hidden_size = hidden_size
        self.epsilon = epsilon

    def build(self, input_shape=None):
        # The original creates beta before gamma. autocast=False keeps them in float32 under
        # mixed precision, where the normalisation is computed.
        self.beta = self.add_weight(
            name="beta", shape=(self.hidden_size,), initializer="zeros", autocast=False
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(self.hidden_size,), initializer="ones", autocast=False
        )

    def call(self, x):
        x32 = ops.cast(x, "float32")
        mean = ops.mean(x32, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x32 - mean), axis=-1, keepdims=True)
        normalized = (x32 - mean) * ops.rsqrt(variance + self.epsilon)
        return ops.cast(normalized * self.gamma + self.beta, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, epsilon=self.epsilon)
        return config

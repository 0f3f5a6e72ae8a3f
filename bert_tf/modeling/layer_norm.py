"""`LayerNorm` with the original's variables (beta, then gamma) and epsilon."""

import functools

import keras
from keras import ops


def _float32_sum(summands):
    return sum(ops.cast(s, "float32") for s in summands)


# Added to the variance: the original's value, which every LayerNorm of the model uses.
EPSILON = 1e-12


def _layer_norm_forward(gamma, beta, *summands, epsilon):
    """`(y, normalized, inverse_std)` of `x = sum(summands)`, all float32:
    `y = gamma * normalized + beta`, `normalized = (x - mean) * inverse_std`,
    `inverse_std = 1 / sqrt(var + epsilon)`."""
    x = _float32_sum(summands)
    centered = x - ops.mean(x, axis=-1, keepdims=True)
    inverse_std = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
    normalized = centered * inverse_std
    return normalized * gamma + beta, normalized, inverse_std


def _layer_norm_backward(normalized, inverse_std, gamma, upstream):
    """The float32 gradients of `y` for `x`, `gamma` and `beta`, from `upstream = dL/dy`.

    With `g = upstream * gamma` and `n = normalized`, over the H features of each token:
    `dL/dx = inverse_std (g - mean(g) - n mean(g n))`; `gamma` and `beta` get `upstream n`
    and `upstream` summed over the tokens.
    """
    upstream = ops.cast(upstream, "float32")
    g = upstream * gamma
    d_x = inverse_std * (
        g
        - ops.mean(g, axis=-1, keepdims=True)
        - normalized * ops.mean(g * normalized, axis=-1, keepdims=True)
    )
    tokens = (-1, normalized.shape[-1])
    d_gamma = ops.sum(ops.reshape(upstream * normalized, tokens), axis=0)
    d_beta = ops.sum(ops.reshape(upstream, tokens), axis=0)
    return d_x, d_gamma, d_beta


@functools.cache  # one function (and one set of compiled traces) for every layer
def layer_norm_training_form(epsilon, compile_fn=None):
    """`LayerNorm`'s arithmetic with its gradient written out, for training.

    The backward pass is `_layer_norm_backward`'s few element-wise ops and three reductions,
    from the `normalized` and `inverse_std` the forward pass keeps, against about twice as many
    ops for automatic differentiation (each, on TensorFlow without XLA, a pass over the
    [tokens, H] activations).

    Args:
      epsilon: Added to the variance.
      compile_fn: None, or a function that compiles the forward and the backward computation
        (each a function of tensors), e.g. TensorFlow's XLA, which makes each of them about one
        pass over memory (the trainer's `TrainStep` passes it).

    Returns:
      A function of `(gamma, beta, *summands)`, float32 `y` of `x = sum(summands)`, with its
      gradient for each argument (a summand's in its own dtype).
    """
    forward = functools.partial(_layer_norm_forward, epsilon=epsilon)
    backward = _layer_norm_backward
    if compile_fn:
        forward, backward = compile_fn(forward), compile_fn(backward)

    @ops.custom_gradient
    def layer_norm_for_training(gamma, beta, *summands):
        y, normalized, inverse_std = forward(gamma, beta, *summands)

        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            d_x, d_gamma, d_beta = backward(normalized, inverse_std, gamma, upstream)
            return (d_gamma, d_beta, *(ops.cast(d_x, s.dtype) for s in summands))

        return y, gradient

    return layer_norm_for_training


def _onednn_layer_norm():
    """`bert_tf.onednn.layer_norm` where an inference pass is being traced for TensorFlow's
    oneDNN, which runs it as one kernel where `keras.ops` takes six passes over the activations;
    else None."""
    if keras.backend.backend() != "tensorflow":
        return None
    from bert_tf import onednn  # TensorFlow's: imported only on that backend

    return onednn.layer_norm if onednn.applies() else None


@keras.saving.register_keras_serializable(package="bert_tf")
class LayerNorm(keras.layers.Layer):
    """Normalises each token over its features: `gamma * (x - mean) / sqrt(var + eps) + beta`.

    The mean and the biased variance are taken over the last axis only. The arithmetic is done
    in float32 whatever the compute dtype, and under mixed precision the inputs are not cast to
    the compute dtype first nor the output after: the output is in the variable dtype (float32),
    and so is the residual stream that the Transformer layers add to and normalise, as the
    float32 model's (`DenseOutput`).

    An inference pass traced in a `tf.function` on a CPU with TensorFlow's oneDNN computes the
    same function as oneDNN's LayerNorm kernel (`bert_tf.onednn.layer_norm`).
    """

    def __init__(self, hidden_size, epsilon=EPSILON, name="LayerNorm", **kwargs):
        """Args:
        hidden_size: Size of the last axis.
        epsilon: Added to the variance; the original uses 1e-12.
        name: Variable scope; the original's is "LayerNorm".
        """
        super().__init__(name=name, autocast=False, **kwargs)
        self.hidden_size = hidden_size
        self.epsilon = epsilon
        self.training_form = layer_norm_training_form(epsilon)

    def build(self, input_shape=None):
        # The original creates beta before gamma. Both stay in the variable dtype under mixed
        # precision.
        self.beta = self.add_weight(
            name="beta", shape=(self.hidden_size,), initializer="zeros", autocast=False
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(self.hidden_size,), initializer="ones", autocast=False
        )

    def compile_training_form(self, compile_fn):
        """Has the training form run its computations as `compile_fn` compiles them (the
        TensorFlow trainer: with XLA, about one pass over memory each way).

        Args:
          compile_fn: Maps a function of tensors to a compiled one.
        """
        self.training_form = layer_norm_training_form(self.epsilon, compile_fn)

    def call(self, x, residual=None, training=False):
        """Args:
          x: float [..., hidden_size], any float dtype.
          residual: None, or float [..., hidden_size] added to `x` (in float32) before the
            normalisation.
          training: Whether this pass is differentiated (`layer_norm_training_form`).

        Returns:
          float [..., hidden_size], in the variable dtype.
        """
        summands = (x,) if residual is None else (x, residual)
        if training:
            # Read here (a copy), not inside the training form: TensorFlow's custom gradient takes
            # a variable read inside its function for one it must return a gradient of separately.
            y = self.training_form(ops.copy(self.gamma), ops.copy(self.beta), *summands)
        elif kernel := _onednn_layer_norm():
            y = kernel(_float32_sum(summands), self.gamma, self.beta, self.epsilon)
        else:
            y = _layer_norm_forward(self.gamma, self.beta, *summands, epsilon=self.epsilon)[0]
        return ops.cast(y, self.variable_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, epsilon=self.epsilon)
        return config

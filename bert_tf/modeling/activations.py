"""Activation functions a `BertConfig.hidden_act` can name, in `keras.ops`."""

import functools
import math

from keras import ops

# The tanh-form GELU's constants: u = sqrt(2/pi) (x + 0.044715 x^3).
_GELU_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
# The erf form's scale of its argument, 1 / sqrt(2).
_SQRT_HALF = math.sqrt(0.5)


def gelu(x):
    """GELU as the original code computes it: the tanh approximation.

    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as the backend's own op
    (`tf.nn.gelu(approximate=True)`, `jax.nn.gelu`), which oneDNN fuses into the matmul before
    it on CPU and XLA into its neighbours.

    Args:
      x: A float tensor.

    Returns:
      `x` with the activation applied.
    """
    return ops.gelu(x, approximate=True)


def _gelu_forward(x):
    """`(gelu(x), s)` with `s = sigmoid(2u) = 0.5 (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`."""
    two_c = 2.0 * _GELU_SQRT_2_OVER_PI
    s = ops.sigmoid(x * (two_c + (two_c * _GELU_CUBIC) * ops.square(x)))
    return x * s, s


def _gelu_backward(x, s, upstream):
    """`upstream * gelu'(x)`, with `gelu'(x) = s (1 + x (1 - s) 2u')`,
    `2u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)`."""
    two_c = 2.0 * _GELU_SQRT_2_OVER_PI
    slope = two_c + (3.0 * two_c * _GELU_CUBIC) * ops.square(x)
    return upstream * (s * (1.0 + x * (1.0 - s) * slope))


@functools.cache  # one function (and one set of compiled traces) for every layer
def gelu_training_form(compile_fn=None):
    """The tanh-form GELU of `gelu`, with its derivative written out, for training.

    The same function as `gelu` (within float32 rounding): `gelu(x) = x s` with
    `s = sigmoid(2u)` (`_gelu_forward`), and the gradient from `x` and `s` (`_gelu_backward`).
    Its forward pass is 6 element-wise ops and its backward pass 9, against about 9 and 12 for
    automatic differentiation through the tanh form: on TensorFlow without XLA each is a pass
    over the [tokens, intermediate_size] activations. Inference keeps `gelu`, the backend's op,
    which oneDNN fuses into the matmul before it (a custom gradient hides the pattern it fuses).

    Args:
      compile_fn: None, or a function that compiles the forward and the backward computation
        (each a function of tensors), e.g. TensorFlow's XLA, which makes each of them one pass
        over memory (the trainer's `TrainStep` passes it).

    Returns:
      A function of one tensor, with its gradient.
    """
    forward = compile_fn(_gelu_forward) if compile_fn else _gelu_forward
    backward = compile_fn(_gelu_backward) if compile_fn else _gelu_backward

    @ops.custom_gradient
    def gelu_for_training(x):
        y, s = forward(x)

        def gradient(*args, upstream=None):
            return backward(x, s, args[0] if upstream is None else upstream)

        return y, gradient

    return gelu_for_training


def gelu_exact(x):
    """GELU in its exact erf form, `0.5 x (1 + erf(x / sqrt(2)))`, written with `erf`.

    The original code used this form before 2019-02-07; the 2018 checkpoints were trained with
    it, and Hugging Face's "gelu" is it. Written out rather than as the backend's op:
    TensorFlow's `tf.nn.gelu(approximate=False)` computes it with `erfc`, an op that ONNX lacks
    (tf2onnx cannot convert it), while this form exports to ONNX's `Erf`, and oneDNN fuses it
    into the matmul before it all the same.

    Args:
      x: A float tensor.

    Returns:
      `x` with the activation applied.
    """
    return 0.5 * x * (1.0 + ops.erf(x * _SQRT_HALF))


def linear(x):
    """The identity."""
    return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": linear,
}


# Makers of the activations' training forms: the same function, with a gradient that is cheaper
# to run.
_TRAINING_FORMS = {"gelu": gelu_training_form}


def get_activation(name, training=False, compile_fn=None):
    """Maps a `hidden_act` string to its function.

    Args:
      name: One of `bert_tf.config.ACTIVATIONS`.
      training: Whether the function is for a training pass (differentiated); some activations
        have a form whose gradient costs fewer passes over memory (`gelu_training_form`).
      compile_fn: For a training form: compiles its computations (see `gelu_training_form`).

    Returns:
      A function of one tensor.

    Raises:
      ValueError: `name` is not a known activation.
    """
    if training and name in _TRAINING_FORMS:
        return _TRAINING_FORMS[name](compile_fn)
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}") from None

"""The original's optimizer and learning-rate schedule, as Keras 3 optimizers written in `keras.ops`.

`AdamWeightDecay` is the original's `AdamWeightDecayOptimizer`: Adam moments without bias
correction, and the weight decay added to the update (decoupled from the moments) for every
variable whose name matches none of `exclude_from_weight_decay`:

    m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
    update = m / (sqrt(v) + eps) + weight_decay_rate * param   (decay unless excluded)
    param = param - lr * update

`WarmupPolynomialDecay` is its schedule: linear warm-up `lr = init_lr * step / num_warmup_steps`
while `step < num_warmup_steps`, else polynomial (power 1: linear) decay from `init_lr` to 0 at
`num_train_steps`. The step is the number of updates made before this one (the original's
`global_step` before its increment; Keras' `optimizer.iterations`).

`Lamb` is LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning"), the second choice.

The update rules use `keras.ops` only, so they run on the TensorFlow and JAX backends; clipping
across replicas and the all-reduce belong to the caller (`bert_tf.training.step` on TensorFlow).
Variable names are the variables' `path`s, which are Google checkpoint names
(`bert/encoder/layer_0/attention/output/LayerNorm/gamma`), so the exclusions match as in the
original.
"""

import functools
import re

import keras
from keras import ops

# The original's `exclude_from_weight_decay`.
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then polynomial decay to `end_learning_rate`, as the original's schedule.

    Args:
      initial_learning_rate: The peak rate, reached at the end of warm-up.
      num_train_steps: Step at which the decay reaches `end_learning_rate`.
      num_warmup_steps: Steps of linear warm-up from 0 (0: none).
      end_learning_rate: Rate at and after `num_train_steps`.
      power: Power of the polynomial decay (1.0: linear).
    """

    def __init__(
        self,
        initial_learning_rate,
        num_train_steps,
        num_warmup_steps=0,
        end_learning_rate=0.0,
        power=1.0,
    ):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        """The rate for the update made after `step` earlier updates (float32 scalar)."""
        step = ops.cast(step, "float32")
        # The original's tf.train.polynomial_decay with cycle=False.
        done = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        span = self.initial_learning_rate - self.end_learning_rate
        learning_rate = span * ops.power(1.0 - done, self.power) + self.end_learning_rate
        if self.num_warmup_steps:
            warmup_learning_rate = self.initial_learning_rate * (step / float(self.num_warmup_steps))
            is_warmup = ops.cast(step < float(self.num_warmup_steps), "float32")
            learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
        return learning_rate

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }


def global_norm(tensors):
    """`sqrt(sum of squares)` over every element of `tensors` (None entries skipped), float32."""
    return ops.sqrt(sum(ops.sum(ops.square(ops.cast(t, "float32"))) for t in tensors if t is not None))


def clip_by_global_norm(tensors, clip_norm, norm=None):
    """Scales `tensors` so their global norm is at most `clip_norm`, as `tf.clip_by_global_norm`.

    Args:
      tensors: A list of tensors (None entries are kept as None).
      clip_norm: The bound.
      norm: Their global norm, if already computed.

    Returns:
      (clipped tensors, the global norm before clipping).
    """
    if norm is None:
        norm = global_norm(tensors)
    scale = clip_scale(norm, clip_norm)
    clipped = [None if t is None else t * ops.cast(scale, t.dtype) for t in tensors]
    return clipped, norm


def clip_scale(norm, clip_norm):
    """`tf.clip_by_global_norm`'s factor: `clip_norm / max(norm, clip_norm)` (1 when not clipped)."""
    return clip_norm / ops.maximum(norm, clip_norm)


class _MomentsOptimizer(keras.optimizers.Optimizer):
    """Shared by AdamWeightDecay and Lamb: two moment slots per variable (`adam_m`, `adam_v`)
    and the name-based decay exclusions.

    The slots are named as in the original's checkpoints: `<variable>/adam_m`, `<variable>/adam_v`
    (`slot_names`); `slots(variable)` gives them for checkpoint I/O.

    Args:
      learning_rate: A float or a schedule (e.g. `WarmupPolynomialDecay`).
      weight_decay_rate: Decoupled weight decay, added to the update (0.01 in the original).
      beta_1, beta_2, epsilon: Adam's constants (0.9, 0.999, 1e-6 in the original).
      exclude_from_weight_decay: Regular expressions; a variable whose name matches one is
        not decayed (`re.search`, as the original).
      name: The optimizer's name (default: the class's).
      **kwargs: Keras optimizer arguments (`gradient_accumulation_steps`, `global_clipnorm`,
        ...), for use outside bert_tf's training step, which clips and accumulates itself.
    """

    slot_names = ("adam_m", "adam_v")
    # The attributes `apply_rule` reads: the rule is a function of these and its arguments.
    RULE_CONSTANTS = ("weight_decay_rate", "beta_1", "beta_2", "epsilon")

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        name=None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name or type(self).__name__, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        # What `update_step` runs: `assign_rule`, or the compiled form of it that the training
        # step sets with `compile_update`.
        self.update_variables = self.assign_rule

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.adam_m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self.adam_v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        # Decided here, on the Keras variables' paths: the backend variables that reach
        # `update_step` under tf.distribute carry no path.
        self._decayed = [self.uses_weight_decay(v.path) for v in var_list]

    def uses_weight_decay(self, name):
        """Whether the variable called `name` is decayed (the original's `_do_use_weight_decay`)."""
        if not self.weight_decay_rate:
            return False
        return not any(re.search(pattern, name) for pattern in self.exclude_from_weight_decay)

    def slots(self, variable):
        """The (`adam_m`, `adam_v`) variables of a trainable variable."""
        index = self._get_variable_index(variable)
        return self.adam_m[index], self.adam_v[index]

    def learning_rate_of_update(self, count):
        """The learning rate of the `count`-th update (made after `count - 1` earlier ones), as a
        float: what a log line or summary after that update shows beside its loss."""
        rate = self._learning_rate
        if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
            rate = rate(max(count - 1, 0))
        return float(ops.convert_to_numpy(rate))

    def update_step(self, gradient, variable, learning_rate, gradient_scale=None):
        """Updates `variable` and its moments from `gradient`.

        Args:
          gradient, variable, learning_rate: As Keras' `update_step`.
          gradient_scale: None, or a float32 scalar the gradient is multiplied by first (the
            clipping factor of `clip_scale`, applied here so the gradient is read once).
        """
        index = self._get_variable_index(variable)
        options = self._rule_options(index)
        if gradient_scale is not None:
            options["gradient_scale"] = gradient_scale
        self.update_variables(
            gradient, variable, self.adam_m[index], self.adam_v[index], learning_rate, **options
        )

    def assign_rule(self, gradient, variable, m, v, learning_rate, **options):
        """Assigns `apply_rule`'s next values to `variable` and its moments `m` and `v`."""
        values = self.apply_rule(gradient, variable, m, v, learning_rate, **options)
        for target, value in zip((variable, m, v), values, strict=True):
            self.assign(target, value)

    def compile_update(self, compile_fn):
        """Makes `update_step` run `compile_fn` of `assign_rule`: e.g. an XLA-compiled
        `tf.function` of the variables themselves, which fuses the rule's element-wise ops into
        one loop per variable and writes the next values over the old ones.

        The rule reads only the optimizer's constants (`RULE_CONSTANTS`) and its arguments, so
        every optimizer of a class with the same constants shares one compiled rule in a process
        (`_shared_assign_rule`): a later training step reuses its traces and compiled code.
        """
        constants = tuple((name, getattr(self, name)) for name in self.RULE_CONSTANTS)
        self.update_variables = _shared_assign_rule(type(self), constants, compile_fn)

    def _rule_options(self, index):
        """The Python-valued options of the rule for the variable at `index`."""
        return {"decay": self._decayed[index]}

    def _moments(self, gradient, m, v, gradient_scale):
        """The next (m, v) from the gradient (cast to the moments' dtype, times `gradient_scale`
        unless that is None)."""
        gradient = ops.cast(gradient, m.dtype)
        if gradient_scale is not None:
            gradient = gradient * gradient_scale
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
        return next_m, next_v

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay),
        )
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(_MomentsOptimizer):
    """The original's `AdamWeightDecayOptimizer` (see the module docstring for the rule); its
    arguments are `_MomentsOptimizer`'s, with the original's defaults."""

    def apply_rule(self, gradient, param, m, v, learning_rate, decay, gradient_scale=None):
        """One update of a variable, as values: returns its next (param, m, v).

        Args:
          gradient, param, m, v: Tensors of the variable's shape.
          learning_rate: float scalar.
          decay: Whether the variable is decayed (Python bool).
          gradient_scale: None, or a float32 scalar multiplying the gradient (clipping).
        """
        next_m, next_v = self._moments(gradient, m, v, gradient_scale)
        update = next_m / (ops.sqrt(next_v) + self.epsilon)
        if decay:
            update = update + self.weight_decay_rate * param
        return param - ops.cast(learning_rate, param.dtype) * update, next_m, next_v


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_MomentsOptimizer):
    """LAMB: Adam's direction (with bias correction), weight decay, and a per-variable trust ratio.

        m_hat = m / (1 - b1^t);   v_hat = v / (1 - b2^t)       (t: this update's number, from 1)
        r = m_hat / (sqrt(v_hat) + eps) + weight_decay_rate * param   (decay unless excluded)
        trust = ||param|| / ||r||  if both norms are positive, else 1  (1 for excluded variables)
        param = param - lr * trust * r

    Variables matching `exclude_from_layer_adaptation` (by default the same names as the decay
    exclusions: LayerNorm parameters and biases) take trust 1.

    Args:
      learning_rate: A float or a schedule.
      exclude_from_layer_adaptation: Regular expressions of variables updated without the
        trust ratio; None means `exclude_from_weight_decay`.
      **kwargs: As `_MomentsOptimizer`'s (`weight_decay_rate`, `beta_1`, ...).
    """

    def __init__(self, learning_rate=0.001, exclude_from_layer_adaptation=None, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if exclude_from_layer_adaptation is None:
            exclude_from_layer_adaptation = self.exclude_from_weight_decay
        self.exclude_from_layer_adaptation = tuple(exclude_from_layer_adaptation)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapted = [
            not any(re.search(p, v.path) for p in self.exclude_from_layer_adaptation) for v in var_list
        ]

    def _rule_options(self, index):
        # The step is read here (a copy: a tensor, not the variable) and passed, so that the
        # rule reads no variable of its own.
        step = ops.copy(self.iterations)
        return {"decay": self._decayed[index], "adapt": self._adapted[index], "step": step}

    def apply_rule(self, gradient, param, m, v, learning_rate, decay, adapt, step, gradient_scale=None):
        """One update of a variable, as values: returns its next (param, m, v).

        Args:
          gradient, param, m, v: Tensors of the variable's shape.
          learning_rate: float scalar.
          decay: Whether the variable is decayed (Python bool).
          adapt: Whether the trust ratio applies (Python bool).
          step: int scalar, the updates made before this one (`iterations`).
          gradient_scale: None, or a float32 scalar multiplying the gradient (clipping).
        """
        next_m, next_v = self._moments(gradient, m, v, gradient_scale)
        t = ops.cast(step + 1, param.dtype)
        m_hat = next_m / (1.0 - ops.power(self.beta_1, t))
        v_hat = next_v / (1.0 - ops.power(self.beta_2, t))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if decay:
            update = update + self.weight_decay_rate * param
        if adapt:
            weight_norm = ops.sqrt(ops.sum(ops.square(param)))
            update_norm = ops.sqrt(ops.sum(ops.square(update)))
            trust = ops.where(
                (weight_norm > 0) & (update_norm > 0), weight_norm / ops.maximum(update_norm, 1e-30), 1.0
            )
            update = trust * update
        return param - ops.cast(learning_rate, param.dtype) * update, next_m, next_v

    def get_config(self):
        config = super().get_config()
        config.update(exclude_from_layer_adaptation=list(self.exclude_from_layer_adaptation))
        return config


@functools.cache  # one compiled rule (and its traces) per class, constants and compiler
def _shared_assign_rule(optimizer_class, constants, compile_fn):
    """`compile_fn` of the `assign_rule` of an `optimizer_class` with `constants`.

    Args:
      optimizer_class: A `_MomentsOptimizer` class.
      constants: `(name, value)` pairs of its `RULE_CONSTANTS`.
      compile_fn: Maps a function of tensors to a compiled one.

    Returns:
      The compiled `assign_rule(gradient, variable, m, v, learning_rate, **options)`.
    """
    # An instance that holds only the constants (no variables, so the cache keeps none alive):
    # the rule reads nothing else of it.
    rule_owner = object.__new__(optimizer_class)
    vars(rule_owner).update(constants)
    return compile_fn(rule_owner.assign_rule)


OPTIMIZERS = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(name, init_lr, num_train_steps, num_warmup_steps, weight_decay_rate=0.01):
    """The original's `create_optimizer` configuration: the schedule and the optimizer.

    Args:
      name: "adamw" (the original's AdamWeightDecay) or "lamb".
      init_lr: Peak learning rate.
      num_train_steps: End of the linear decay.
      num_warmup_steps: Linear warm-up steps.
      weight_decay_rate: Decoupled weight decay (0.01 in the original).

    Returns:
      A `keras.optimizers.Optimizer` with a `WarmupPolynomialDecay` learning rate. Clipping to
      global norm 1.0 is the training step's (`bert_tf.training.step`), as it must be
      coordinated with the all-reduce.

    Raises:
      ValueError: An unknown optimizer name.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"--optimizer: unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZERS)}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps)
    return OPTIMIZERS[name](learning_rate=schedule, weight_decay_rate=weight_decay_rate)

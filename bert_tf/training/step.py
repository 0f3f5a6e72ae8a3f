"""The distributed train and eval steps (TensorFlow only): N steps per `tf.function` call.

A training step on each replica:

1. The task's loss is a sum of terms `numerator / (denominator + epsilon)` (the masked-LM loss
   `sum(w * nll) / (sum(w) + 1e-5)`, the next-sentence loss `sum(nll) / rows`, ...). The
   denominators depend on the inputs only, so they are computed first, over the replica's batch
   or, with `reduction="global"`, summed over all replicas.
2. The batch is cut into `gradient_accumulation_steps` micro-batches; the gradients of each
   micro-batch's share of the loss are summed. The result is the gradient of the whole batch's
   loss, whatever the number of micro-batches.
3. `reduction="global"` (default): the gradients are summed over replicas, then clipped to
   global norm 1.0 (the clipping factor is applied inside the update rule, which reads each
   gradient once). One step equals one device's step on the same global batch.
   `reduction="tpu_original"`: each replica clips the gradient of its own loss, then the clipped
   gradients are summed (no division by the replica count): the original's TPU update
   (`tf.gradients`, `clip_by_global_norm`, `CrossShardOptimizer`).
4. The optimizer's `update_step` (its rule, in `keras.ops`) is applied to every variable with
   the learning rate of the optimizer's current step, and the step counter advances. Keras'
   own `optimizer.apply` would sum the gradients across replicas once more (see
   BUILD_NOTES.md), so the update is applied here, once, on the already reduced gradients.

A step whose loss or gradient is not finite makes no update; the loop stops on it, except that
under `mixed_float16` a non-finite gradient with a finite loss is dynamic loss scaling's
business (the scale is halved and the step skipped).

AutoGraph converts only the loops over steps and micro-batches. The model, the losses and the
update rule branch on Python values only (they run under JAX's `jit` too), so the functions
that call them are marked `do_not_convert`: converted, AutoGraph would transpile every Keras
function they reach, for most of the time a step takes to trace.
"""

import keras
import tensorflow as tf

from bert_tf.training.optimization import clip_by_global_norm, clip_scale

REDUCTIONS = ("global", "tpu_original")

_SUM = tf.distribute.ReduceOp.SUM
_ON_READ = dict(
    synchronization=tf.VariableSynchronization.ON_READ,
    aggregation=tf.VariableAggregation.SUM,
    trainable=False,
)
_FIRST_REPLICA = dict(aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA, trainable=False)


def _xla_compiled(fn):
    """`fn` as an XLA-compiled function of tensors (variables are read first, so that one trace
    serves every variable of a shape)."""
    compiled = tf.function(fn, jit_compile=True, autograph=False)

    def read_and_apply(*values, **options):
        return compiled(*[tf.convert_to_tensor(value) for value in values], **options)

    return read_and_apply


def _xla_compiled_update(assign_rule):
    """The optimizer's `assign_rule(gradient, variable, m, v, learning_rate, **options)` as an
    XLA-compiled function of the variables themselves: XLA writes the next values over their
    buffers, where values it returned would be new buffers that TensorFlow assigns afterwards.
    One trace serves every variable of a shape.

    `variable` is a plain variable: under tf.distribute, the component that
    `strategy.extended.update` passes. The moments passed are their components on its device (a
    distributed variable passed whole would be bound to the first trace, not passed).
    """
    compiled = tf.function(assign_rule, jit_compile=True, autograph=False)

    def call(gradient, variable, m, v, learning_rate, **options):
        variable = _backend_variable(variable)
        m, v = (_component_on(_backend_variable(slot), variable.device) for slot in (m, v))
        gradient, learning_rate = tf.convert_to_tensor(gradient), tf.convert_to_tensor(learning_rate)
        return compiled(gradient, variable, m, v, learning_rate, **options)

    return call


def _backend_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


def _component_on(variable, device):
    """`variable`, or, if it is distributed, its component on `device`."""
    if not isinstance(variable, tf.distribute.DistributedValues):
        return variable
    for component in tf.distribute.get_strategy().experimental_local_results(variable):
        if component.device == device:
            return component
    raise ValueError(f"{variable.name}: no component on {device}, the device of the variable updated")


def _is_tpu(strategy):
    return isinstance(strategy, tf.distribute.TPUStrategy)


def _replica_value(strategy, value):
    """A value that every replica computed alike (from all-reduced tensors), as one tensor."""
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


class SumMetrics:
    """Named ratios `sum(numerator) / sum(denominator)` accumulated over steps and replicas.

    Each replica adds to its own copy (no communication in the step); reading sums them.

    Args:
      names: The metric names.
    """

    def __init__(self, names):
        self.names = tuple(names)
        self._sums = {
            name: (
                tf.Variable(0.0, name=f"{name}_sum", **_ON_READ),
                tf.Variable(0.0, name=f"{name}_count", **_ON_READ),
            )
            for name in self.names
        }

    def add(self, values):
        """In replica context: adds `{name: (numerator, denominator)}`."""
        for name, (numerator, denominator) in values.items():
            total, count = self._sums[name]
            total.assign_add(tf.cast(numerator, tf.float32))
            count.assign_add(tf.cast(denominator, tf.float32))

    def result(self):
        """`{name: float}` of the ratios so far (0 where nothing was counted)."""
        out = {}
        for name, (total, count) in self._sums.items():
            count = float(count.read_value())
            out[name] = float(total.read_value()) / count if count else 0.0
        return out

    def reset(self):
        for total, count in self._sums.values():
            total.assign(tf.zeros_like(total))
            count.assign(tf.zeros_like(count))


class DynamicLossScale:
    """Dynamic loss scaling for float16: halve on a non-finite gradient, double after
    `growth_interval` finite steps in a row.

    Args:
      initial_scale: The starting scale.
      growth_interval: Finite steps before the scale doubles.
    """

    def __init__(self, initial_scale=2.0**15, growth_interval=2000):
        self.growth_interval = growth_interval
        self.scale = tf.Variable(initial_scale, dtype=tf.float32, name="loss_scale", **_FIRST_REPLICA)
        self.good_steps = tf.Variable(0, dtype=tf.int64, name="loss_scale_good_steps", **_FIRST_REPLICA)

    def update(self, finite):
        """Called once per step (every replica with the same `finite`)."""
        grow = finite & (self.good_steps + 1 >= self.growth_interval)
        self.scale.assign(
            tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale), tf.maximum(self.scale / 2.0, 1.0))
        )
        self.good_steps.assign(tf.where(finite & ~grow, self.good_steps + 1, tf.zeros_like(self.good_steps)))

    @property
    def variables(self):
        return [self.scale, self.good_steps]


def local_replica_batches(strategy, batch, num_local_replicas):
    """Cuts a worker's batch into one slice per local replica, as distributed values.

    The input pipeline yields each worker's whole batch through a plain (checkpointable)
    tf.data iterator; replica `r` of this worker takes rows `r * n : (r + 1) * n`.
    """
    if strategy.num_replicas_in_sync == 1:
        return batch
    rows = tf.shape(tf.nest.flatten(batch)[0])[0] // num_local_replicas

    def value_fn(context):
        index = context.replica_id_in_sync_group % num_local_replicas
        return tf.nest.map_structure(lambda t: t[index * rows : (index + 1) * rows], batch)

    return strategy.experimental_distribute_values_from_function(value_fn)


def _micro_batches(batch, count):
    """`count` equal slices of every feature of `batch` (rows must divide)."""
    rows = tf.shape(tf.nest.flatten(batch)[0])[0] // count
    return lambda i: tf.nest.map_structure(lambda t: t[i * rows : (i + 1) * rows], batch)


class TrainStep:
    """Builds `train(iterator, num_steps)`: `num_steps` distributed training steps in one call.

    Args:
      task: A `bert_tf.training.task.Task` (its `model`, `loss_denominators(batch)`,
        `loss_epsilons`, `loss_terms(outputs, batch)` and `metric_names`).
      optimizer: A Keras optimizer whose `update_step` is the update rule (e.g.
        `AdamWeightDecay`); it is built here, inside the strategy's scope.
      strategy: The `tf.distribute.Strategy` the model's variables were made under.
      num_local_replicas: Replicas of this worker (the worker's batch is split among them).
      reduction: "global" or "tpu_original" (module docstring).
      gradient_accumulation_steps: Micro-batches per replica batch.
      clip_norm: The global-norm bound (1.0 in the original).
      loss_scale: A `DynamicLossScale` (mixed_float16) or None.
      jit_compile: Compile the forward and backward pass with XLA.
      compile_elementwise: Compile the step's element-wise computations with XLA (unless the
        strategy is a TPU's, which compiles the whole step): the optimizer's update rule (where
        the optimizer has `compile_update`), whose ops, the clipping factor included, become one
        loop per variable, reading the parameter, gradient and moments once; and the layers'
        training forms (where the model has `compile_training_forms`,
        `bert_tf.modeling.training_forms`): GELU's forward and backward one pass each,
        LayerNorm's, the residual sum included, a loop or two each way, dropout's, one loop
        each way, and the transposed kernel the intermediate layer's input gradient multiplies
        by (the figures in benchmarks/RESULTS.md).
    """

    def __init__(
        self,
        task,
        optimizer,
        strategy,
        num_local_replicas=1,
        reduction="global",
        gradient_accumulation_steps=1,
        clip_norm=1.0,
        loss_scale=None,
        jit_compile=False,
        compile_elementwise=True,
    ):
        if reduction not in REDUCTIONS:
            raise ValueError(
                f"--gradient_reduction: expected one of {', '.join(REDUCTIONS)}, got {reduction!r}"
            )
        self.task = task
        self.optimizer = optimizer
        self.strategy = strategy
        self.num_local_replicas = num_local_replicas
        self.reduction = reduction
        self.accumulation = gradient_accumulation_steps
        self.clip_norm = clip_norm
        self.loss_scale = loss_scale
        self.variables = task.model.trainable_variables
        with strategy.scope():
            optimizer.build(self.variables)
            self.metrics = SumMetrics(("loss", "grad_norm", *task.metric_names))
            # The step at which a loss or gradient was not finite (-1: none yet).
            self.nonfinite_step = tf.Variable(-1, dtype=tf.int64, name="nonfinite_step", **_FIRST_REPLICA)
            # Set (by `bert_tf.training.interruption`) to end a block before its next step.
            self.stop_requested = tf.Variable(False, name="stop_requested", **_FIRST_REPLICA)
        if compile_elementwise and not _is_tpu(strategy):
            if hasattr(optimizer, "compile_update"):
                optimizer.compile_update(_xla_compiled_update)
            if hasattr(task.model, "compile_training_forms"):
                task.model.compile_training_forms(_xla_compiled)
        self._gradients = tf.function(self._gradients_of_batch, jit_compile=jit_compile)
        # With micro-batches, the first one's and the loop's are one function traced once
        # (`_gradients_of_batch`), where calling `_loss_and_gradients` itself would build the
        # model's forward and backward pass twice.
        self._micro_batch_gradients = tf.function(self._loss_and_gradients, autograph=False)
        self.train = tf.function(self._train)

    # -- one replica ------------------------------------------------------------------------

    def _denominators(self, batch):
        denominators = self.task.loss_denominators(batch)
        if self.reduction == "global":
            denominators = tf.distribute.get_replica_context().all_reduce(_SUM, denominators)
        return [d + eps for d, eps in zip(denominators, self.task.loss_epsilons, strict=True)]

    @tf.autograph.experimental.do_not_convert
    def _loss_and_gradients(self, batch, denominators, scale):
        """Loss share of one micro-batch, its (scaled) gradients, and its metric terms."""
        with tf.GradientTape() as tape:
            outputs = self.task.model(batch, training=True)
            numerators, terms = self.task.loss_terms(outputs, batch)
            loss = tf.add_n([n / d for n, d in zip(numerators, denominators, strict=True)])
            scaled = loss * scale if scale is not None else loss
        gradients = tape.gradient(scaled, self.variables)
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        return loss, gradients, terms

    def _gradients_of_batch(self, batch, denominators, scale):
        """Sum over micro-batches of `_loss_and_gradients` (the whole batch's loss gradient)."""
        if self.accumulation == 1:
            return self._loss_and_gradients(batch, denominators, scale)
        micro = _micro_batches(batch, self.accumulation)
        if scale is not None:
            scale = tf.convert_to_tensor(scale)
        # One trace for every micro-batch: its rows unknown, as the loop's are.
        rows_unknown = tf.nest.map_structure(lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), micro(0))
        micro_batch_gradients = self._micro_batch_gradients.get_concrete_function(
            rows_unknown, denominators, scale
        )
        loss, gradients, terms = micro_batch_gradients(micro(0), denominators, scale)
        for i in tf.range(1, self.accumulation):
            more_loss, more_gradients, more_terms = micro_batch_gradients(micro(i), denominators, scale)
            loss += more_loss
            gradients = [g + h for g, h in zip(gradients, more_gradients, strict=True)]
            terms = tf.nest.map_structure(tf.add, terms, more_terms)
        return loss, gradients, terms

    @tf.autograph.experimental.do_not_convert
    def _replica_step(self, batch):
        context = tf.distribute.get_replica_context()
        scale = self.loss_scale.scale if self.loss_scale is not None else None
        loss, gradients, terms = self._gradients(batch, self._denominators(batch), scale)
        if scale is not None:
            gradients = [g / scale for g in gradients]
        if self.reduction == "global":
            gradients = context.all_reduce(_SUM, gradients)
            # The original's norm (tf.clip_by_global_norm's): one fused l2_loss per tensor.
            norm = tf.linalg.global_norm(gradients)
            gradient_scale = clip_scale(norm, self.clip_norm)
            loss = context.all_reduce(_SUM, loss)
            logged_loss, logged_norm = loss, norm
        else:
            gradients, norm = clip_by_global_norm(gradients, self.clip_norm, tf.linalg.global_norm(gradients))
            gradients = context.all_reduce(_SUM, gradients)
            gradient_scale = None
            # The loss is each replica's own; every replica logs its share of the mean.
            loss_sum, norm_sum = context.all_reduce(_SUM, [loss, norm])
            logged_loss = loss_sum / self.strategy.num_replicas_in_sync
            logged_norm = norm_sum / self.strategy.num_replicas_in_sync
            norm = tf.linalg.global_norm(gradients)
        finite_loss = tf.math.is_finite(logged_loss)
        finite_gradients = tf.math.is_finite(norm)
        first_replica = tf.cast(context.replica_id_in_sync_group == 0, tf.float32)
        self.metrics.add({"loss": (logged_loss * first_replica, first_replica)})
        # A step loss scaling skips has an infinite norm: the logged norm is the mean over the
        # steps applied (0 if the block applied none).
        counted = first_replica * tf.cast(tf.math.is_finite(logged_norm), tf.float32)
        self.metrics.add({"grad_norm": (tf.where(counted > 0, logged_norm, 0.0), counted)})
        self.metrics.add(terms)
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._apply, self.strategy, gradients, gradient_scale, finite_loss, finite_gradients
        )

    def _apply(self, strategy, gradients, gradient_scale, finite_loss, finite_gradients):
        """Applies the reduced gradients, times `gradient_scale` (None: as they are), once (in
        cross-replica context, or on every replica with identical values where the strategy
        needs no merge call)."""
        finite_loss = _replica_value(strategy, finite_loss)
        finite_gradients = _replica_value(strategy, finite_gradients)
        step = self.optimizer.iterations
        if self.loss_scale is not None:
            # A non-finite gradient with a finite loss is loss scaling's, not an error.
            self.loss_scale.update(finite_gradients)
            failed = ~finite_loss
        else:
            failed = ~(finite_loss & finite_gradients)
        apply = finite_loss & finite_gradients
        learning_rate = self.optimizer.learning_rate

        def update(variable, gradient, scale):
            self.optimizer.update_step(gradient, variable, learning_rate, gradient_scale=scale)

        def update_all():
            for gradient, variable in zip(gradients, self.variables, strict=True):
                strategy.extended.update(variable.value, update, args=(gradient, gradient_scale), group=False)

        # One condition for every update (not one per variable: each is a pair of branch
        # functions to build and optimise when the step is traced).
        tf.cond(apply, update_all, lambda: None)
        self.nonfinite_step.assign(tf.where(failed, tf.cast(step, tf.int64), self.nonfinite_step))
        # Every step counts, skipped ones too: the step is the number of batches consumed.
        step.assign_add(1)

    # -- the loop -----------------------------------------------------------------------------

    def _train(self, iterator, num_steps):
        """Runs up to `num_steps` steps; stops early after a step with a non-finite loss, or
        when `stop_requested` is set."""
        for _ in tf.range(num_steps):
            if self.nonfinite_step >= 0 or self.stop_requested:
                break
            batch = local_replica_batches(self.strategy, next(iterator), self.num_local_replicas)
            self.strategy.run(self._replica_step, args=(batch,))


class EvalStep:
    """Builds `evaluate(iterator, num_steps)`: the task's metrics and the mean per-batch loss.

    Args:
      task: As `TrainStep`'s.
      strategy: The strategy.
      num_local_replicas: Replicas of this worker.
    """

    def __init__(self, task, strategy, num_local_replicas=1):
        self.task = task
        self.strategy = strategy
        self.num_local_replicas = num_local_replicas
        with strategy.scope():
            self.metrics = SumMetrics(("loss", *task.metric_names))
            # As `TrainStep`'s: set to end the evaluation before its next batch.
            self.stop_requested = tf.Variable(False, name="stop_requested", **_FIRST_REPLICA)
        self.evaluate = tf.function(self._evaluate)

    @tf.autograph.experimental.do_not_convert
    def _replica_step(self, batch):
        context = tf.distribute.get_replica_context()
        denominators = context.all_reduce(_SUM, self.task.loss_denominators(batch))
        denominators = [d + eps for d, eps in zip(denominators, self.task.loss_epsilons, strict=True)]
        outputs = self.task.model(batch, training=False)
        numerators, terms = self.task.loss_terms(outputs, batch)
        # This replica's share of the batch loss; the shares of all replicas sum to it.
        loss = tf.add_n([n / d for n, d in zip(numerators, denominators, strict=True)])
        first_replica = tf.cast(context.replica_id_in_sync_group == 0, tf.float32)
        self.metrics.add({"loss": (loss, first_replica)})
        self.metrics.add(terms)

    def _evaluate(self, iterator, num_steps):
        for _ in tf.range(num_steps):
            if self.stop_requested:
                break
            batch = local_replica_batches(self.strategy, next(iterator), self.num_local_replicas)
            self.strategy.run(self._replica_step, args=(batch,))

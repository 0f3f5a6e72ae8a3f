"""The trainer's hook into the layers' compiled training forms.

A layer with a `compile_training_form(compile_fn)` method (`LayerNorm`, `Dropout`, the
intermediate layer) can run the element-wise work of its training pass as `compile_fn` compiles
it (the TensorFlow trainer: XLA, one pass over memory each way). A model with `TrainingForms`
hands `compile_fn` to every such layer below it, found through the layers' public attributes.
"""

import keras


def sublayers(layer):
    """Every layer below `layer`, depth first and each once, found through its public attributes
    that hold a layer or a list or tuple of layers.

    Args:
      layer: A Keras layer or model.

    Returns:
      A list of layers, `layer` itself not included.
    """
    found, seen = [], {id(layer)}

    def visit(parent):
        for name, value in vars(parent).items():
            if name.startswith("_"):
                continue
            children = value if isinstance(value, (list, tuple)) else [value]
            for child in children:
                if isinstance(child, keras.layers.Layer) and id(child) not in seen:
                    seen.add(id(child))
                    found.append(child)
                    visit(child)

    visit(layer)
    return found


class TrainingForms:
    """Mixin for a model whose layers may have compiled training forms (module docstring)."""

    def compile_training_forms(self, compile_fn):
        """Has every layer below the model with a training form compile it with `compile_fn`.

        Args:
          compile_fn: Maps a function of tensors to a compiled one.
        """
        for layer in sublayers(self):
            if hasattr(layer, "compile_training_form"):
                layer.compile_training_form(compile_fn)

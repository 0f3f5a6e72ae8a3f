"""The original's variables (names and shapes, in creation order) and parameter counts.

Derived from the config alone, independently of the Keras layers, so a test can hold the model's
`weights` against it.
"""

import math


def variable_shapes(config, with_heads=True):
    """Every trainable variable of the original, in the order the original creates them.

    Args:
      config: A `BertConfig`.
      with_heads: Include the pretraining heads (`cls/predictions`, `cls/seq_relationship`).

    Returns:
      A list of `(name, shape)` with `shape` a tuple.
    """
    h, i = config.hidden_size, config.intermediate_size

    def dense(scope, n_in, n_out):
        return [(f"{scope}/kernel", (n_in, n_out)), (f"{scope}/bias", (n_out,))]

    def layer_norm(scope):
        return [(f"{scope}/LayerNorm/beta", (h,)), (f"{scope}/LayerNorm/gamma", (h,))]

    shapes = [
        ("bert/embeddings/word_embeddings", (config.vocab_size, h)),
        ("bert/embeddings/token_type_embeddings", (config.type_vocab_size, h)),
        ("bert/embeddings/position_embeddings", (config.max_position_embeddings, h)),
        *layer_norm("bert/embeddings"),
    ]
    for n in range(config.num_hidden_layers):
        layer = f"bert/encoder/layer_{n}"
        for name in ("query", "key", "value"):
            shapes += dense(f"{layer}/attention/self/{name}", h, h)
        shapes += dense(f"{layer}/attention/output/dense", h, h)
        shapes += layer_norm(f"{layer}/attention/output")
        shapes += dense(f"{layer}/intermediate/dense", h, i)
        shapes += dense(f"{layer}/output/dense", i, h)
        shapes += layer_norm(f"{layer}/output")
    shapes += dense("bert/pooler/dense", h, h)
    if with_heads:
        shapes += dense("cls/predictions/transform/dense", h, h)
        shapes += layer_norm("cls/predictions/transform")
        shapes += [
            ("cls/predictions/output_bias", (config.vocab_size,)),
            ("cls/seq_relationship/output_weights", (2, h)),
            ("cls/seq_relationship/output_bias", (2,)),
        ]
    return shapes


def _component(name):
    """The row a variable is counted in: embeddings, each layer, pooler, each head."""
    parts = name.split("/")
    if parts[0] == "cls":
        return "/".join(parts[:2])
    if parts[1] == "encoder":
        return "/".join(parts[:3])
    return "/".join(parts[:2])


def parameter_counts(config, with_heads=True, seq_length=None):
    """Parameters per component, as the original code's variables give them.

    Args:
      config: A `BertConfig`.
      with_heads: Count the pretraining heads too.
      seq_length: If given, count a position table of this many rows instead of
        `max_position_embeddings` (a paper's count does so for its sequence length, 128: see
        BUILD_NOTES.md, "Parameter counts").

    Returns:
      A list of `(component, count)`: `bert/embeddings`, each `bert/encoder/layer_{i}`,
      `bert/pooler`, then (with heads) `cls/predictions` and `cls/seq_relationship`, then
      `total (encoder + pooler)` and, with heads, `total (with heads)`.
    """
    rows = {}
    for name, shape in variable_shapes(config, with_heads):
        if name == "bert/embeddings/position_embeddings" and seq_length is not None:
            shape = (seq_length, shape[1])
        component = _component(name)
        rows[component] = rows.get(component, 0) + math.prod(shape)
    result = list(rows.items())
    bert_total = sum(count for component, count in result if component.startswith("bert/"))
    result.append(("total (encoder + pooler)", bert_total))
    if with_heads:
        result.append(("total (with heads)", sum(rows.values())))
    return result


def format_parameter_table(rows):
    """`parameter_counts` rows as a text table with thousands separators."""
    width = max(len(component) for component, _ in rows)
    lines = [f"{'component':<{width}}  {'parameters':>13}"]
    for component, count in rows:
        lines.append(f"{component:<{width}}  {count:>13,}")
    return "\n".join(lines)

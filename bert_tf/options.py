"""Options: a job's settings as a dataclass whose fields are also its tool's command-line flags.

Each field declared with `option` carries the flag's help (and choices, and whether the tool
requires it), so the dataclass is the one place a flag is described: a tool calls
`define_flags(ItsOptions)` and, in `main`, `options_from_flags(ItsOptions)`; a program or a
test builds the same dataclass directly. A field without `option` is no flag (e.g. a positional
argument the tool fills in itself).

absl is imported inside the functions only: the pretraining-data options are read by worker
processes that import neither absl's flags nor TensorFlow.
"""

import dataclasses


def option(default, help, choices=None, required=False):
    """A dataclass field that is also a command-line flag (`define_flags`).

    Args:
      default: The flag's default (None: no value).
      help: The flag's help, one sentence or two.
      choices: None, or the values the flag accepts (an enum flag).
      required: Whether the tool refuses to run without the flag (absl's required flags).
    """
    metadata = {"help": help, "choices": choices, "required": required}
    if isinstance(default, (list, tuple)):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def redefine(options_class, name, **changes):
    """A flag of `options_class` declared again in a subclass, with another `default` or
    `required` (its help and choices kept, or `help` replaced): a tool's own default for a flag
    that several tools share (run_squad's `--max_seq_length=384`).

    Raises:
      ValueError: `options_class` has no such option, or a change that is not one of those.
    """
    fields = {field.name: field for field in flag_fields(options_class)}
    if name not in fields:
        raise ValueError(f"redefine: {options_class.__name__} has no option {name!r}")
    unknown = sorted(set(changes) - {"default", "help", "required"})
    if unknown:
        raise ValueError(f"redefine: {unknown} cannot be changed")
    field = fields[name]
    default = field.default_factory() if field.default is dataclasses.MISSING else field.default
    metadata = dict(field.metadata)
    return option(
        changes.get("default", default),
        changes.get("help", metadata["help"]),
        metadata["choices"],
        changes.get("required", metadata["required"]),
    )


def flag_fields(options_class):
    """The fields of `options_class` that are flags, in declaration order."""
    return [field for field in dataclasses.fields(options_class) if "help" in field.metadata]


def define_flags(options_class, omit=()):
    """Defines an absl flag for every `option` field of `options_class`, as flags of the module
    that calls this (so that its `--help` lists them).

    Args:
      options_class: An options dataclass (e.g. `bert_tf.training.options.TrainingOptions`).
      omit: Options the tool has no flag for (the original's tool has none and nothing reads
        them); they keep their defaults.

    Raises:
      ValueError: An omission of a field that is not an option.
    """
    from absl import flags

    # The flags are the caller's key flags, not this module's (absl attributes a flag to the
    # first module on the stack that has not disclaimed them).
    flags.disclaim_key_flags()
    fields = flag_fields(options_class)
    unknown = sorted(set(omit) - {field.name for field in fields})
    if unknown:
        raise ValueError(f"define_flags: {options_class.__name__} has no options {unknown}")
    define = {
        str: flags.DEFINE_string,
        int: flags.DEFINE_integer,
        float: flags.DEFINE_float,
        bool: flags.DEFINE_bool,
        list: flags.DEFINE_list,
    }
    for field in fields:
        if field.name in omit:
            continue
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        help_text, choices = field.metadata["help"], field.metadata["choices"]
        if field.metadata["required"]:
            help_text += " (required)"
        if choices:
            flags.DEFINE_enum(field.name, default, list(choices), help_text)
        else:
            define[field.type](field.name, default, help_text)
        if field.metadata["required"]:
            flags.mark_flag_as_required(field.name)


def options_from_flags(options_class, **more):
    """An `options_class` filled from the absl flags named as its fields, and `more`."""
    from absl import flags

    values = flags.FLAGS
    names = [field.name for field in flag_fields(options_class) if field.name in values]
    return options_class(**{name: values[name].value for name in names}, **more)

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
import inspect
import sys


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


def flag_fields(options_class):
    """The fields of `options_class` that are flags, in declaration order."""
    return [field for field in dataclasses.fields(options_class) if "help" in field.metadata]


def _calling_module():
    """The name absl gives the module that called `define_flags` (its key flags, which `--help`
    lists): the script's path for `__main__`, as absl names a tool's own flags."""
    name = inspect.currentframe().f_back.f_back.f_globals.get("__name__", "")
    return sys.argv[0] if name == "__main__" else name


def define_flags(options_class, omit=(), helps=None, **defaults):
    """Defines an absl flag for every `option` field of `options_class`, as flags of the module
    that calls this (so that its `--help` lists them).

    Args:
      options_class: An options dataclass (e.g. `bert_tf.training.options.TrainingOptions`).
      omit: Options the tool has no flag for (the original's tool has none and nothing reads
        them); they keep their defaults.
      helps: None, or `{option: help}` where the tool's original words a flag otherwise.
      **defaults: Defaults that differ from the fields' (e.g. SQuAD's `max_seq_length=384`).

    Raises:
      ValueError: A default, a help or an omission for a field that is not an option.
    """
    from absl import flags

    helps = helps or {}
    fields = flag_fields(options_class)
    unknown = sorted((set(defaults) | set(omit) | set(helps)) - {field.name for field in fields})
    if unknown:
        raise ValueError(f"define_flags: {options_class.__name__} has no options {unknown}")
    module_name = _calling_module()
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
        if field.name in defaults:
            default = defaults[field.name]
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = field.default
        help_text, choices = helps.get(field.name, field.metadata["help"]), field.metadata["choices"]
        if field.metadata["required"]:
            help_text += " (required)"
        if choices:
            flags.DEFINE_enum(field.name, default, list(choices), help_text, module_name=module_name)
        else:
            define[field.type](field.name, default, help_text, module_name=module_name)
        if field.metadata["required"]:
            flags.mark_flag_as_required(field.name)


def options_from_flags(options_class, **more):
    """An `options_class` filled from the absl flags named as its fields, and `more`."""
    from absl import flags

    values = flags.FLAGS
    names = [field.name for field in flag_fields(options_class) if field.name in values]
    return options_class(**{name: values[name].value for name in names}, **more)

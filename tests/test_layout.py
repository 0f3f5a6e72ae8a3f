"""The package's shape: no import cycle (a module's own import statements, those inside
functions included; a package's `__init__`, run by importing any module of it, is not counted as
imported by them), `training/` knows no job, every job has the same modules, and every tool
defines its flags from its options."""

import ast
import io
import os
import tokenize

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "bert_tf")
JOBS = ("pretraining", "classifier", "squad", "tagging", "features", "multiple_choice")
# The words of the jobs' own pieces, which the trainer's code must not name.
JOB_WORDS = ("masked_lm", "next_sentence", "squad", "classifier", "tagging", "tagger")


def _modules():
    """`{module name: path}` of every module of the package."""
    modules = {}
    for directory, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, REPO)[: -len(".py")].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = path
    return modules


def _is_type_checking_block(node):
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported_modules(path, modules):
    """The package's modules that the module at `path` imports, anywhere in it (inside functions
    too; `if TYPE_CHECKING:` blocks aside)."""
    found = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name in modules)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:
                    candidate = f"{child.module}.{alias.name}"
                    found.add(candidate if candidate in modules else child.module)
            visit(child)

    with open(path, encoding="utf-8") as f:
        visit(ast.parse(f.read()))
    return {name for name in found if name in modules}


def _import_graph():
    modules = _modules()
    return {name: _imported_modules(path, modules) - {name} for name, path in modules.items()}


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    source = "def f():\n    from bert_tf.training import loop\n"
    tree = ast.parse(source)
    assert isinstance(tree.body[0].body[0], ast.ImportFrom)  # what `_imported_modules` walks into


def test_the_package_has_no_import_cycle():
    graph = _import_graph()
    assert len(graph) > 50 and "bert_tf.training.runner" in graph
    assert _cycles(graph) == []


def _imports_across(graph, importer, imported):
    """`{module: [names]}` of the modules under `importer` that import modules under `imported`."""
    offending = {
        module: sorted(name for name in names if name.startswith(imported))
        for module, names in graph.items()
        if module.startswith(importer)
    }
    return {module: names for module, names in offending.items() if names}


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("bert_tf.training", "bert_tf.tasks"),  # the trainer knows no job
        ("bert_tf.training", "bert_tf.export"),  # jobs export; the trainer trains
        ("bert_tf.export", "bert_tf.tasks"),  # an export reads the heads' table, not a job
        ("bert_tf.checkpoints", "bert_tf.tasks"),
        ("bert_tf.modeling", "bert_tf.tasks"),
    ],
)
def test_no_module_imports_across_the_floors(importer, imported):
    graph = _import_graph()
    assert _imports_across(graph, importer, imported) == {}


def test_the_floors_rule_sees_an_import_across_them():
    """The check above can fail: a graph with one such import is caught."""
    graph = {"bert_tf.export.edge": {"bert_tf.tasks.features.data"}, "bert_tf.tasks.x": set()}
    assert _imports_across(graph, "bert_tf.export", "bert_tf.tasks") == {
        "bert_tf.export.edge": ["bert_tf.tasks.features.data"]
    }


def _code_tokens(path):
    """The NAME and STRING tokens of a module's code: docstrings and comments left out."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(body[0].lineno)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        code_string = token.type == tokenize.STRING and token.start[0] not in docstrings
        if token.type == tokenize.NAME or code_string:
            yield token


def test_the_trainers_code_names_no_jobs_pieces():
    named = []
    for name, path in _modules().items():
        if name.startswith("bert_tf.training"):
            for token in _code_tokens(path):
                if any(word in token.string.lower() for word in JOB_WORDS):
                    named.append(f"{os.path.relpath(path, REPO)}:{token.start[0]}: {token.string}")
    assert named == []


@pytest.mark.parametrize("job", JOBS)
def test_every_job_has_data_task_and_run_modules(job):
    modules = _modules()
    for part in ("data", "task", "run"):
        assert f"bert_tf.tasks.{job}.{part}" in modules
    with open(modules[f"bert_tf.tasks.{job}.run"], encoding="utf-8") as f:
        tree = ast.parse(f.read())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert any(name.startswith("run_") for name in functions)


def test_every_tool_defines_its_flags_from_its_options():
    tools = sorted(name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py"))
    assert "run_classifier.py" in tools
    for name in tools:
        if name == "demo.py":  # `make demo`'s script, no tool with flags
            continue
        with open(os.path.join(REPO, "tools", name), encoding="utf-8") as f:
            source = f.read()
        assert "define_flags(" in source, name
        assert "flags.DEFINE_" not in source, name

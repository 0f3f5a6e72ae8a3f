"""The modules of `bert_tf.data`: the two runners build on one shards module, and no module imports
another's private names. Read from their source, imports inside functions included (only those
under `if TYPE_CHECKING:` are left out, as they never run)."""

import ast
import pathlib

PACKAGE = "bert_tf.data"
DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "bert_tf" / "data"
MODULES = {
    PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}": path for path in DATA_DIR.glob("*.py")
}


def _is_type_checking(node):
    """Whether `node` is `if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node):
    """The import statements under `node`, in functions too, but not under `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif not _is_type_checking(child):
            yield from _import_nodes(child)


def imported(module):
    """`(imported module, name or None)` of every import in `module` of a module of the package."""
    path = MODULES[module]
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found = []
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:  # relative: from its package, up one level per dot after the first
            parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{parent}.{base}" if base else parent
        for alias in node.names:
            if f"{base}.{alias.name}" in MODULES:  # `from bert_tf.data import shards`
                found.append((f"{base}.{alias.name}", None))
            else:
                found.append((base, alias.name))
    return [(target, name) for target, name in found if target in MODULES]


def test_the_runners_share_the_shards_module_and_beams_does_not_import_the_local_one():
    """`tests/test_layout.py` finds the package's import cycles; here the layering that keeps
    `bert_tf.data` free of them: `shards` imports neither runner, and `beam_pipeline` (which
    `pipeline` imports for `--runner`) does not import `pipeline`."""
    imports = {module: {target for target, _ in imported(module)} for module in MODULES}
    assert f"{PACKAGE}.shards" in imports[f"{PACKAGE}.pipeline"] & imports[f"{PACKAGE}.beam_pipeline"]
    assert not imports[f"{PACKAGE}.shards"] & {f"{PACKAGE}.pipeline", f"{PACKAGE}.beam_pipeline"}
    assert f"{PACKAGE}.pipeline" not in imports[f"{PACKAGE}.beam_pipeline"]


def test_no_module_of_the_package_imports_the_private_names_of_another():
    private = [
        f"{module} imports {target}.{name}"
        for module in sorted(MODULES)
        for target, name in imported(module)
        if name and name.startswith("_") and target != module
    ]
    assert not private

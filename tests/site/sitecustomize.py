"""Start-up of every Python process the test suite starts: tests/conftest.py puts this directory
first on `PYTHONPATH`, so Python imports this module at start-up (`site`), as it does in the
pytest workers themselves.

Two optional imports of TensorFlow's own import are left out, each found only because the `test`
extra installs its package, as in an install without that extra:
- `import jax` (TensorFlow's LiteRT converter's JAX path): 1-2 CPU s. JAX is for the processes
  that run Keras' JAX backend (`KERAS_BACKEND=jax`); a process on the TensorFlow backend here
  finds no JAX.
- `import sklearn` from Keras' scikit-learn wrappers (`keras.src.wrappers`, imported with Keras):
  1.1-1.3 CPU s. Only that importer is refused: a test that imports scikit-learn (the GLUE metrics'
  reference) gets it.
Each of the suite's TensorFlow processes (its workers, the fork servers of `tests/tool_runs.py`,
the real processes of the tests) pays neither.
"""

import os
import sys


class _NoScikitLearnForKeras:
    """A `sys.meta_path` finder that refuses `sklearn` to `keras.src.wrappers` (which then
    defines its fallbacks, as without scikit-learn) and leaves every other import to the other
    finders."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "sklearn":
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith("keras.src.wrappers"):
                raise ModuleNotFoundError("sklearn: refused to Keras by the tests", name=name)
            frame = frame.f_back
        return None


if os.environ.get("KERAS_BACKEND", "tensorflow") != "jax":
    # An import of a module whose entry is None raises ModuleNotFoundError.
    sys.modules.setdefault("jax", None)
sys.meta_path.insert(0, _NoScikitLearnForKeras())

"""Start-up of every Python process the test suite starts: tests/conftest.py puts this directory
first on `PYTHONPATH`, so Python imports this module at start-up (`site`), as it does in the
pytest workers themselves.

TensorFlow's import tries `import jax` (for its LiteRT converter's JAX path) and, with JAX
installed, imports it: 1-2 CPU s in each of the suite's ~80 TensorFlow processes. JAX is in the
`test` extra only, for the processes that run Keras' JAX backend (`KERAS_BACKEND=jax`); a
process on the TensorFlow backend here finds no JAX, as in an install without the `test` extra.
"""

import os
import sys

if os.environ.get("KERAS_BACKEND", "tensorflow") != "jax":
    # An import of a module whose entry is None raises ModuleNotFoundError.
    sys.modules.setdefault("jax", None)

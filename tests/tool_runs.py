"""The tests' runs of the command-line tools and of other Python scripts, each in a process of its
own without paying for TensorFlow's import every time.

`run([sys.executable, "tools/<tool>.py", *flags], ...)` takes `subprocess.run`'s arguments and
returns its `CompletedProcess` (output captured as text). A run is forked from a server: a
Python process of this pytest process that has imported what the script imports first (its
preload) and then forks one child per run.
The child takes the run's working directory, environment, argv and standard streams, writes
what the preload wrote to stdout and stderr (TensorFlow's start-up lines), runs the script as
`__main__` and exits as the script's own process would (its `sys.exit` status, a traceback and 1
on an uncaught exception, a signal's negative status). A fresh process costs 5-8 s of CPU before
a script does anything; a fork costs milliseconds.

The servers (`SERVERS`), each started on first use and ended with the pytest process:
  - TOOLS: `bert_tf.cli` first, as every tool does, then the `bert_tf` modules named in
    `tools/*.py`. `tools/*.py` runs use it by default; a `python -c CODE` script or another
    script whose first import is `from bert_tf import cli` may name it.
  - TENSORFLOW: TensorFlow, Keras and bert_tf's model and training modules, for scripts that
    import TensorFlow themselves (not through `bert_tf.cli`): the benchmarks.
  - JAX: the same under `KERAS_BACKEND=jax JAX_PLATFORMS=cpu`, JAX and Keras first: the
    scripts that check bert_tf on the JAX backend.
A script other than a tool is forked only where its caller names a server (`server=`): the
caller vouches that the script imports that server's modules before it does anything else that
shows (a line written, a variable read); extra modules of bert_tf's preloaded make no other
difference than their place in `sys.modules`.

What a fork cannot show is checked with real processes: the start-up itself (the lines TensorFlow
prints while it loads, the log level a user sets, a process without bert_tf or TensorFlow, what
`PYTHONHASHSEED` or the locale decide), Python's own signal handling (SIGINT's handler as a
terminal's command gets it, a handler run inside a finalizer), and runs whose environment decides
what gets imported (`KERAS_BACKEND`, `TF_*`, `PYTHON*`, ...) other than a server's: `run`
starts those as plain subprocesses, as it does a run with no server.

A server forks before TensorFlow or JAX has run an op, while its only other threads are
OpenBLAS's idle thread servers (OpenBLAS stops its threads around a fork); the children run every
op. Each run is a fresh fork of the server, which runs nothing itself: no state passes from one
run to the next. A server runs one child at a time. The server's own objects are frozen out of
the cyclic garbage collector's reach (`gc.freeze`) before it forks: a child's collections visit
only what the child made, not the whole heap it shares with the server (which a visit would copy).
"""

import ast
import gc
import glob
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_DIR = os.path.join(REPO, "tools")

TOOLS, TENSORFLOW, JAX = "tools", "tensorflow", "jax"

# Variables read while modules are imported (or by the interpreter itself): a run whose values
# differ from its server's gets a process of its own.
_IMPORT_TIME_VARIABLES = ("TF_", "KERAS", "JAX", "XLA", "CUDA", "PYTHON", "OMP_", "MKL", "OPENBLAS", "LD_")
# Of those, the ones read only when used, never while a module is imported: TF_CONFIG (the cluster
# of a multi-worker strategy, read by its cluster resolver when the strategy is made).
_READ_WHEN_USED = ("TF_CONFIG",)

# bert_tf's modules a model or training script imports (none runs an op when imported).
_MODEL_MODULES = ["bert_tf", "bert_tf.modeling", "bert_tf.training", "bert_tf.tasks.pretraining.task"]


def _tool_modules():
    """The `bert_tf` modules the tools import at their top level."""
    modules = []
    for path in sorted(glob.glob(os.path.join(TOOLS_DIR, "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bert_tf"):
                modules.append(node.module)
            elif isinstance(node, ast.Import):
                modules.extend(a.name for a in node.names if a.name.startswith("bert_tf"))
    return list(dict.fromkeys(modules))


# Each server: the variables it sets in its environment and the modules it imports, in order.
SERVERS = {
    TOOLS: ({}, lambda: ["bert_tf.cli", *_tool_modules()]),
    TENSORFLOW: ({}, lambda: ["tensorflow", "keras", *_MODEL_MODULES]),
    JAX: ({"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}, lambda: ["jax", "keras", *_MODEL_MODULES]),
}


def _import_time_environment(env):
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME_VARIABLES) and k not in _READ_WHEN_USED}


class _Server:
    """A server of this pytest process (module doc)."""

    def __init__(self, name):
        variables, preload = SERVERS[name]
        self.environment = dict(os.environ, **variables)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (open while the server lives)
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), json.dumps(preload())],
            cwd=REPO,
            env=self.environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.expect("ready")

    def expect(self, what):
        """The server's next reply, which must be `what`."""
        line = self.process.stdout.readline()
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"the test server ended: {self._stderr.read().decode()[-3000:]}")
        reply = json.loads(line)
        assert reply["kind"] == what, reply
        return reply

    def fork(self, request):
        """Sends a run's request; returns the child's pid."""
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        return self.expect("started")["pid"]


_servers = {}


def _server_for(command, cwd, env, server):
    """The server that can fork `command` in `env` (started now, or already), or None."""
    if len(command) < 2 or command[0] != sys.executable:
        return None
    if server is None:
        script = os.path.abspath(os.path.join(cwd or os.getcwd(), command[1]))
        if os.path.dirname(script) != TOOLS_DIR or not script.endswith(".py"):
            return None
        server = TOOLS
    if command[1] == "-c" and len(command) < 3:
        return None
    started = _servers.get(server)
    environment = dict(os.environ, **SERVERS[server][0]) if started is None else started.environment
    if _import_time_environment(env) != _import_time_environment(environment):
        return None
    if started is None:
        started = _servers[server] = _Server(server)
    return started


def _request(command, cwd, stdin, stdout, stderr, env, timeout):
    return {
        "args": list(command[1:]),
        "cwd": os.path.abspath(cwd or os.getcwd()),
        "env": env,
        "stdin": stdin,
        "stdout": stdout,
        "stderr": stderr,
        "timeout": timeout,
    }


def run(command, cwd=None, env=None, input=None, timeout=None, server=None):
    """`subprocess.run(command, cwd=cwd, env=env, input=input, timeout=timeout,
    capture_output=True, text=True)`, forked from a server where `command` runs a tool of
    `tools/` or names a `server`, in an environment the server was imported under (module doc).

    Raises:
      subprocess.TimeoutExpired: The run took longer than `timeout` seconds (it is killed).
    """
    env = dict(os.environ if env is None else env)
    forker = _server_for(command, cwd, env, server)
    if forker is None:
        return subprocess.run(
            command, cwd=cwd, env=env, input=input, timeout=timeout, capture_output=True, text=True
        )
    with tempfile.TemporaryDirectory() as scratch:
        paths = {name: os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")}
        with open(paths["stdin"], "w", encoding="utf-8") as f:
            f.write(input or "")
        forker.fork(_request(command, cwd, paths["stdin"], paths["stdout"], paths["stderr"], env, timeout))
        status = forker.expect("exit")["status"]
        outputs = {}
        for name in ("stdout", "stderr"):
            with open(paths[name], encoding="utf-8", errors="replace") as f:
                outputs[name] = f.read()
    if status is None:
        raise subprocess.TimeoutExpired(command, timeout, outputs["stdout"], outputs["stderr"])
    return subprocess.CompletedProcess(command, status, outputs["stdout"], outputs["stderr"])


def _serve(preload):
    """A server's loop (module doc): returns a request in a forked child, None at the end."""
    started_with = dict(os.environ)
    # What the preload writes (TensorFlow's start-up lines) is kept for each run to write.
    written = {}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            for module in preload:
                importlib.import_module(module)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
        for fd, f in ((1, out), (2, err)):
            f.seek(0)
            written[fd] = f.read()
    set_on_import = {k: v for k, v in os.environ.items() if k not in started_with}
    # The objects the preload keeps (its modules', TensorFlow's...) are frozen out of the cyclic
    # collector's reach, its garbage collected first: else every collection in a child, the one at
    # its exit included, visits each of them and so copies each page of the server's heap (most
    # of a `--help` run's CPU). A child still collects what it makes itself.
    gc.collect()
    gc.freeze()
    requests, replies = sys.stdin.buffer, sys.stdout
    print(json.dumps({"kind": "ready"}), file=replies, flush=True)
    for line in requests:
        request = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            request["env"] = {**set_on_import, **request["env"]}
            request["written"] = written
            return request
        print(json.dumps({"kind": "started", "pid": pid}), file=replies, flush=True)
        deadline = None if request["timeout"] is None else time.monotonic() + request["timeout"]
        status = None
        while True:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(wait_status)
                break
            if deadline is not None and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        print(json.dumps({"kind": "exit", "status": status}), file=replies, flush=True)
    return None


def _run_in_child(request):
    """Becomes the script's process: its directory, environment, streams and argv, then the
    script (a file, or `-c` code) as `__main__`."""
    import importlib.machinery
    import types

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, name, flags in (
        (0, "stdin", os.O_RDONLY),
        (1, "stdout", os.O_WRONLY),
        (2, "stderr", os.O_WRONLY),
    ):
        create = os.O_CREAT | os.O_TRUNC if fd and request[name] != os.devnull else 0
        opened = os.open(request[name], flags | create, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    for fd, written in request["written"].items():
        os.write(int(fd), written)
    args = request["args"]
    main = types.ModuleType("__main__")
    main.__cached__ = None
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""  # the working directory, as `python -c` has it
        filename, source = "<string>", args[1]
        main.__loader__ = importlib.machinery.BuiltinImporter
    else:
        sys.argv = list(args)
        filename = os.path.abspath(args[0])  # __file__ and the code's, as `python <script>` has them
        sys.path[0] = os.path.dirname(filename)
        with open(filename, "rb") as f:
            source = f.read()
        main.__file__ = filename
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", filename)
    sys.modules["__main__"] = main
    code = compile(source, filename, "exec")
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001  (as the interpreter reports it)
        # The traceback from the script's own frame on, as the interpreter prints it.
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        error.__traceback__ = tb or error.__traceback__  # what the hook prints
        sys.excepthook(type(error), error, error.__traceback__)
        sys.stderr.flush()
        if isinstance(error, KeyboardInterrupt):  # the interpreter ends itself by SIGINT then
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


if __name__ == "__main__":
    child_request = _serve(json.loads(sys.argv[1]))
    if child_request is not None:
        _run_in_child(child_request)  # a SystemExit ends the child as it ends a script

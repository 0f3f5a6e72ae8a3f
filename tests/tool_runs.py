"""The tests' runs of the command-line tools, each in a process of its own without paying for
TensorFlow's import every time.

`run([sys.executable, "tools/<tool>.py", *flags], ...)` takes `subprocess.run`'s arguments
and returns its `CompletedProcess` (output captured as text). The first call in a pytest process
starts a tool server: a Python process that imports what the tools import (`bert_tf.cli` first,
as every tool does, then the `bert_tf` modules named in `tools/*.py`) and then forks one child per
run. The child takes the run's working directory, environment, argv and standard streams, runs
the tool as `__main__` and exits as the tool's own process would (its `sys.exit` status, a
traceback and 1 on an uncaught exception, a signal's negative status). A fresh process costs 5-8
s of CPU before a tool does anything; a fork costs milliseconds.

What a fork cannot show is checked with real processes elsewhere: the start-up itself (the lines
TensorFlow prints while it loads, the log level a user sets: `tests/test_cli.py`), signals sent
to a tool, and runs whose environment decides what gets imported (`KERAS_BACKEND`, `TF_*`,
`PYTHON*`, ...): `run` starts those as plain subprocesses.

The server forks before TensorFlow has run an op, while its only other thread is OpenBLAS's idle
thread server (OpenBLAS stops its threads around a fork); the children run every op.
"""

import ast
import glob
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")

# Variables read while modules are imported (or by the interpreter itself): a run that changes
# one gets a process of its own.
_IMPORT_TIME_VARIABLES = ("TF_", "KERAS", "JAX", "XLA", "CUDA", "PYTHON", "OMP_", "MKL", "OPENBLAS", "LD_")


def _tool_modules():
    """The `bert_tf` modules the tools import at their top level."""
    modules = []
    for path in sorted(glob.glob(os.path.join(TOOLS, "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bert_tf"):
                modules.append(node.module)
            elif isinstance(node, ast.Import):
                modules.extend(a.name for a in node.names if a.name.startswith("bert_tf"))
    return list(dict.fromkeys(modules))


def _import_time_environment(env):
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME_VARIABLES)}


class _Server:
    """The tool server of this pytest process (started on first use, ended with it)."""

    def __init__(self):
        self.environment = dict(os.environ)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (open while the server lives)
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._expect("ready")

    def _expect(self, what):
        line = self.process.stdout.readline()
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"the tool server ended: {self._stderr.read().decode()[-3000:]}")
        reply = json.loads(line)
        assert reply["kind"] == what, reply
        return reply

    def run(self, args, cwd, env, stdin_path, stdout_path, stderr_path, timeout):
        request = {
            "args": args,
            "cwd": cwd,
            "env": env,
            "stdin": stdin_path,
            "stdout": stdout_path,
            "stderr": stderr_path,
            "timeout": timeout,
        }
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        return self._expect("exit")


_server = None


def _forkable(command, cwd, env):
    """Whether `command` runs a tool that the server (started now, or already) can fork."""
    if len(command) < 2 or command[0] != sys.executable:
        return False
    tool = os.path.abspath(os.path.join(cwd or os.getcwd(), command[1]))
    if os.path.dirname(tool) != TOOLS or not tool.endswith(".py"):
        return False
    server_environment = os.environ if _server is None else _server.environment
    return _import_time_environment(env) == _import_time_environment(server_environment)


def run(command, cwd=None, env=None, input=None, timeout=None):
    """`subprocess.run(command, cwd=cwd, env=env, input=input, timeout=timeout,
    capture_output=True, text=True)`, forked from the tool server where `command` runs a tool of
    `tools/` in an environment the server was imported under (module doc).

    Raises:
      subprocess.TimeoutExpired: The run took longer than `timeout` seconds (it is killed).
    """
    global _server
    env = dict(os.environ if env is None else env)
    if not _forkable(command, cwd, env):
        return subprocess.run(
            command, cwd=cwd, env=env, input=input, timeout=timeout, capture_output=True, text=True
        )
    if _server is None:
        _server = _Server()
    with tempfile.TemporaryDirectory() as scratch:
        paths = {name: os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")}
        with open(paths["stdin"], "w", encoding="utf-8") as f:
            f.write(input or "")
        reply = _server.run(
            list(command[1:]),
            os.path.abspath(cwd or os.getcwd()),
            env,
            paths["stdin"],
            paths["stdout"],
            paths["stderr"],
            timeout,
        )
        outputs = {}
        for name in ("stdout", "stderr"):
            with open(paths[name], encoding="utf-8", errors="replace") as f:
                outputs[name] = f.read()
    if reply["status"] is None:
        raise subprocess.TimeoutExpired(command, timeout, outputs["stdout"], outputs["stderr"])
    return subprocess.CompletedProcess(command, reply["status"], outputs["stdout"], outputs["stderr"])


def _serve():
    """The server's loop (module doc): returns a request in a forked child, None at the end."""
    started_with = dict(os.environ)
    for module in ["bert_tf.cli", *_tool_modules()]:
        importlib.import_module(module)
    set_on_import = {k: v for k, v in os.environ.items() if k not in started_with}
    requests, replies = sys.stdin.buffer, sys.stdout
    print(json.dumps({"kind": "ready"}), file=replies, flush=True)
    for line in requests:
        request = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            request["env"] = {**set_on_import, **request["env"]}
            return request
        deadline = None if request["timeout"] is None else time.monotonic() + request["timeout"]
        status = None
        while True:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(wait_status)
                break
            if deadline is not None and time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                break
            time.sleep(0.005)
        print(json.dumps({"kind": "exit", "status": status}), file=replies, flush=True)
    return None


def _run_in_child(request):
    """Becomes the tool's process: its directory, environment, streams and argv, then the tool."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, name, flags in (
        (0, "stdin", os.O_RDONLY),
        (1, "stdout", os.O_WRONLY),
        (2, "stderr", os.O_WRONLY),
    ):
        opened = os.open(request[name], flags | (os.O_CREAT | os.O_TRUNC if fd else 0), 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    tool = request["args"][0]
    sys.argv = list(request["args"])
    sys.path[0] = os.path.dirname(os.path.abspath(tool))  # as `python tools/<tool>.py` has it
    runpy.run_path(tool, run_name="__main__")


if __name__ == "__main__":
    child_request = _serve()
    if child_request is not None:
        _run_in_child(child_request)  # a SystemExit ends the child as it ends a tool

"""`make install`'s pip command, as the Makefile runs it: no setuptools banner on the way."""

import importlib.util
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EDITABLE = "-e '.[test,beam,zh,tflite,onnx]'"


def test_make_install_prints_no_setuptools_banner(tmp_path):
    """setuptools' build backend printed a dozen-line BuildBackendWarning ("Editable
    installation ... Please be careful with folders ...") on every editable install."""
    recipe = subprocess.run(
        ["make", "-n", "-B", "install"], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    (line,) = [line for line in recipe.splitlines() if EDITABLE in line]
    # The same command in an environment of its own, installing bert_tf alone (pip would
    # uninstall the project's own editable install to reinstall it anywhere else). Its pip is
    # this environment's, which `make install` upgrades before it installs bert_tf (Python's
    # bundled pip, which venv would install, is older and prints no banner to begin with):
    # linked into the new environment, which venv makes without a pip of its own.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    (site_packages,) = venv.glob("lib/python*/site-packages")
    (site_packages / "pip").symlink_to(os.path.dirname(importlib.util.find_spec("pip").origin))
    command = line.replace(".venv/bin/python", str(venv / "bin" / "python")).replace(
        EDITABLE, "--no-deps -e ."
    )
    assert command != line and str(venv) in command
    result = subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "BuildBackendWarning" not in result.stdout + result.stderr
    assert list(venv.glob("lib/python*/site-packages/__editable__.bert_tf-*.pth"))

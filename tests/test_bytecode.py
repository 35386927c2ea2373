"""Where PYTHONDONTWRITEBYTECODE forbids bytecode beside the sources, the processes a test run
starts write it under a private prefix (harness/gate/bytecode.py): compiled once, not once
per process. Shown with real interpreters importing a module of a temporary directory."""
from __future__ import annotations

import os
import subprocess
import sys

from harness.gate import bytecode


def _import_in_child(src_dir, env: dict) -> None:
    subprocess.run([sys.executable, "-c", "import probe_mod"], cwd=src_dir, env=env, check=True,
                   timeout=60)


def _pycs(root) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".pyc")]


def test_children_write_bytecode_under_the_prefix_only(tmp_path):
    """The redirected environment: the child's import leaves a .pyc under the prefix and
    none beside the source. The control, the environment as it was: no .pyc at all."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe_mod.py").write_text("X = 1\n")
    prefix = tmp_path / "prefix"
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    forbidding = {**base, "PYTHONDONTWRITEBYTECODE": "1"}

    _import_in_child(src, forbidding)
    assert _pycs(tmp_path) == []  # neither beside the source nor anywhere else

    env = {**forbidding, "PYTHONPYCACHEPREFIX": str(prefix)}
    assert bytecode.redirect(env, this_process=False)
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(prefix)
    _import_in_child(src, env)
    assert _pycs(src) == []
    # (the interpreter's own modules are compiled under the prefix too: it mirrors every
    # source path)
    assert [p for p in _pycs(prefix) if os.path.basename(p).startswith("probe_mod.")]


def test_redirect_leaves_other_environments_alone():
    """Nothing to do where bytecode may be written, or with the opt-out; a prefix the user
    chose is kept; the default prefix is private to the user."""
    env = {"PATH": "/bin"}
    assert not bytecode.redirect(env, this_process=False) and env == {"PATH": "/bin"}
    env = {"PYTHONDONTWRITEBYTECODE": "1", bytecode.OPT_OUT: "1"}
    assert not bytecode.redirect(env, this_process=False)
    assert env == {"PYTHONDONTWRITEBYTECODE": "1", bytecode.OPT_OUT: "1"}
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    assert bytecode.redirect(env, this_process=False)
    assert env == {"PYTHONPYCACHEPREFIX": bytecode.private_prefix()}
    assert str(os.getuid()) in bytecode.private_prefix()

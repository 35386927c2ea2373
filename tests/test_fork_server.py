"""The fork server (harness/gate/fork_server.py): a command it forks behaves as `python
-X faulthandler -m MODULE ARGS` started from scratch with the requester's environment,
working directory and arguments; exit statuses, output, time limits and deaths come back as
run_bounded gives them; without a server the command starts from scratch."""
from __future__ import annotations

import json
import os

import pytest

from harness.gate import fork_server

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def server():
    saved = os.environ.get(fork_server.SERVER_ENV)
    srv = fork_server.start(preload=("torch",))
    yield srv
    srv.stop()
    assert not os.path.exists(srv.path) and srv.proc.poll() is not None
    if saved is not None:
        os.environ[fork_server.SERVER_ENV] = saved


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": HERE, **extra}


def _report(tmp_path, env) -> dict:
    rc, out, err = fork_server.run("fork_probe", ["report", "x"], 60, "probe", env)
    assert rc == 0, err
    return json.loads(out)


@pytest.mark.parametrize("served", [True, False])
def test_a_command_runs_as_a_fresh_process_would(server, tmp_path, monkeypatch, served):
    """Arguments, environment, working directory and thread count are the requester's, and
    every command draws fresh seeds; the same with a server as without one."""
    monkeypatch.chdir(tmp_path)
    env = _env(FORK_PROBE="seen", OMP_NUM_THREADS="1")
    if not served:
        env[fork_server.SERVER_ENV] = str(tmp_path / "no-server.sock")
    first, second = _report(tmp_path, env), _report(tmp_path, env)
    assert first["argv"][1:] == ["report", "x"] and first["probe"] == "seen"
    assert first["cwd"] == str(tmp_path) and first["threads"] == 1
    assert first["random"] != second["random"] and first["pid"] != second["pid"]
    # Which way it ran: forked by the server, or started by this process.
    assert first["ppid"] == (server.proc.pid if served else os.getpid())


def test_exit_status_and_output_come_back(server):
    rc, out, err = fork_server.run("fork_probe", ["exit", "3"], 60, "probe", _env())
    assert (rc, out, err) == (3, "", "to stderr\n")


def test_a_command_past_its_limit_is_stopped_with_its_stacks(server):
    """Past the limit: SIGABRT, faulthandler's stacks in the error, and the process gone."""
    with pytest.raises(RuntimeError, match=r"probe still running after 2 s") as info:
        fork_server.run("fork_probe", ["sleep"], 2, "probe", _env())
    assert "sleep_forever" in str(info.value), str(info.value)


def test_a_command_killed_by_a_signal_returns_what_it_wrote(server):
    rc, out, _ = fork_server.run("fork_probe", ["die"], 60, "probe", _env())
    assert rc == -1 and out == "before the signal\n"


def test_a_server_that_is_gone_falls_back_to_a_fresh_process(tmp_path, monkeypatch):
    """Its socket left behind, the server killed: the command still runs (started from
    scratch, our child), with one warning that says so."""
    monkeypatch.delenv(fork_server.SERVER_ENV, raising=False)
    monkeypatch.setattr(fork_server.run, "warned", False, raising=False)
    srv = fork_server.start(preload=())
    srv.proc.kill()
    srv.proc.wait()
    env = _env(**{fork_server.SERVER_ENV: srv.path})
    with pytest.warns(RuntimeWarning, match="starting processes from scratch"):
        got = _report(tmp_path, env)
    assert got["ppid"] == os.getpid()
    srv.stop()

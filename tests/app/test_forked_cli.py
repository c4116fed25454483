"""conftest.run_cli forks each command from a process with the imports done (tests/cli_fork.py).
What a process reads as it starts (PYTHON*, the locale) cannot change in a forked child: a command
whose environment differs there from the forking process's, by env= or by the test's own
environment, must run in a fresh process, or the test would not test what it says."""

from conftest import run_cli


def _refused_file(tmp_path) -> str:
    p = tmp_path / "ü.json"  # named with a character outside ASCII, said on stderr
    p.write_text("not json")
    return str(p)


def test_a_start_setting_given_as_env_is_honoured(tmp_path):
    r = run_cli("info", _refused_file(tmp_path), env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 2, r.stderr
    assert "\\xfc" in r.stderr and "ü" not in r.stderr, r.stderr  # ascii, with its escapes


def test_a_start_setting_in_the_tests_environment_is_honoured(tmp_path, monkeypatch):
    assert run_cli("--version").returncode == 0  # a forking process started before the setting
    monkeypatch.setenv("PYTHONIOENCODING", "ascii")
    r = run_cli("info", _refused_file(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "\\xfc" in r.stderr and "ü" not in r.stderr, r.stderr
    monkeypatch.delenv("PYTHONIOENCODING")
    r = run_cli("info", _refused_file(tmp_path))  # and the setting's end too
    assert r.returncode == 2 and "ü" in r.stderr, r.stderr

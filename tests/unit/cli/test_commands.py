"""Every command's help and its error promise: verify-gpu's flags, run without a cluster."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from dask_gpu_parity import probe
from dask_gpu_parity.cli import parser as cli_parser
from tests.unit.reports import cli

COMMANDS = ["check", "fix", "verify-gpu", "run", "webhook-config"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_a_line_per_flag_an_example_and_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_parser.build_parser().parse_args([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "example" in text
    assert "exit codes:" in text
    assert re.search(r"^  [012]  ", text, re.M)
    sub = cli_parser.build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    for action in sub._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, f"{command} {action.option_strings} has no help"
            assert "\n" not in action.help


def test_verify_gpu_takes_every_documented_probe_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str] | None = None) -> int:
        seen.append(list(argv or []))
        return 0

    monkeypatch.setattr(probe, "main", fake_main)
    docs = (Path(__file__).resolve().parents[3] / "docs" / "probe.md").read_text()
    documented = set(re.findall(r"`(--[a-z-]+)`", docs.split("## Settings", 1)[1].split("##")[0]))
    assert documented == set(cli_parser.PROBE_FLAGS.values())
    argv = ["verify-gpu"]
    for flag in sorted(documented):
        argv += [flag, "-5" if flag == "--timeout-s" else "580.159.04"]
    code, _, err = cli(argv)
    assert (code, err) == (0, "")
    assert sorted(seen[0]) == sorted(
        f"{flag}={'-5' if flag == '--timeout-s' else '580.159.04'}" for flag in documented
    )


def test_verify_gpu_flags_reach_the_real_probe_parser(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The flags as passed on parse in the probe's own argparse (no GPU needed for that)."""
    log = tmp_path / "termination-log"  # never the machine's /dev/termination-log
    monkeypatch.setenv(probe.ENV_TERMINATION_LOG, str(log))
    parsed: dict[str, Any] = {}
    real = probe._settings

    def settings(argv: list[str] | None) -> dict[str, str]:
        parsed.update(real(argv))
        raise probe.CheckFailedError("stop here")

    monkeypatch.setattr(probe, "_settings", settings)
    code, _, _ = cli(["verify-gpu", "--expect-driver", "580.159.04", "--timeout-s=-5"])
    assert code == 1  # the probe reports even a failure of its own parsing, with its JSON line
    assert parsed[probe.ENV_EXPECT_DRIVER] == "580.159.04"
    assert parsed[probe.ENV_TIMEOUT_S] == "-5"
    assert log.read_text().strip() == "stop here"


def test_verify_gpu_unknown_flag_is_a_usage_error() -> None:
    code, _, err = cli(["verify-gpu", "--bogus"])
    assert code == 2
    assert "unrecognized arguments: --bogus" in err


@pytest.fixture
def certs(tmp_path: Path) -> list[str]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("cert")
    key.write_text("key")
    return ["run", "--tls-cert", str(cert), "--tls-key", str(key)]


@pytest.fixture
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in [m for m in sys.modules if m == "kopf" or m.startswith("kopf.")]:
        monkeypatch.delitem(sys.modules, name)
    return home


def test_run_without_a_cluster_is_one_line(certs: list[str], no_cluster: Path) -> None:
    code, _, err = cli(certs)
    assert code == 2
    assert err.count("\n") == 1
    assert "run: no cluster configuration" in err
    assert "set KUBECONFIG or run it in the cluster" in err
    assert "kopf" not in sys.modules  # failed before importing the operator


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
        "contexts: [{name: dev, context: {cluster: c, user: u}}]\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    return path


def test_run_with_an_unreachable_api_server_is_one_line(
    certs: list[str], no_cluster: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
    monkeypatch.setenv("KUBECONFIG", str(config))
    code, _, err = cli(certs)
    assert code == 2
    assert err.count("\n") == 1
    assert f"cannot reach the API server at https://127.0.0.1:{port}" in err
    assert "kopf" not in sys.modules


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("current-context: ''\n", "sets no current-context"),
        ("current-context: dev\ncontexts: []\n", "no context named 'dev'"),
        (": [\n", "cannot read the kubeconfig"),
    ],
    ids=["no-context", "missing-context", "invalid-yaml"],
)
def test_run_with_a_broken_kubeconfig_is_one_line(
    certs: list[str], no_cluster: Path, config: str, message: str
) -> None:
    (no_cluster / ".kube").mkdir()
    (no_cluster / ".kube" / "config").write_text(config)
    code, _, err = cli(certs)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


def test_run_without_certificates_names_them(no_cluster: Path, tmp_path: Path) -> None:
    code, _, err = cli(["run", "--tls-cert", str(tmp_path / "x"), "--tls-key", str(tmp_path / "y")])
    assert code == 2
    assert "cannot read" in err
    assert "mount the webhook certificate there" in err

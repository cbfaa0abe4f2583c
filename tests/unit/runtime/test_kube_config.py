"""Where the operator's connection comes from: the Pod's service account, else a kubeconfig.

The in-cluster layout is client-go's (``rest.InClusterConfig``: ``KUBERNETES_SERVICE_HOST`` and
``_PORT``, ``token`` and ``ca.crt`` in ``/var/run/secrets/kubernetes.io/serviceaccount``,
https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/); the kubeconfig fields
and the merge rules are kubectl's
(https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/,
https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.admission.runtime import kube
from dask_gpu_parity.admission.runtime.kube import ConfigError, TokenFile

POD_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def account(tmp_path: Path) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("first-token\n")
    (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    return folder


def test_in_a_pod_the_service_account_is_the_connection(account: Path) -> None:
    found = kube.in_cluster(POD_ENV, account)
    assert found is not None
    assert (found.server, found.ca_file, found.cert_file, found.verify) == (
        "https://10.96.0.1:443",
        str(account / "ca.crt"),
        None,
        True,
    )
    assert found.authorization() == "Bearer first-token"


def test_an_ipv6_service_host_is_bracketed(account: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
    found = kube.in_cluster(env, account)
    assert found is not None
    assert found.server == "https://[fd00:10:96::1]:443"


@pytest.mark.parametrize(
    ("env", "token"),
    [
        pytest.param({}, True, id="no-env"),
        pytest.param({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, True, id="no-port"),
        pytest.param(POD_ENV, False, id="no-token"),
    ],
)
def test_outside_a_pod_there_is_no_in_cluster_connection(
    account: Path, env: dict[str, str], token: bool
) -> None:
    if not token:
        (account / "token").unlink()
    assert kube.in_cluster(env, account) is None


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        pytest.param("ca.crt", "the service account has no CA at", id="no-ca"),
        pytest.param("token", "is empty", id="empty-token"),
    ],
)
def test_a_broken_service_account_is_one_clear_error(
    account: Path, broken: str, message: str
) -> None:
    if broken == "ca.crt":
        (account / "ca.crt").unlink()
    else:
        (account / "token").write_text("\n")
    with pytest.raises(ConfigError, match=message):
        kube.in_cluster(POD_ENV, account)


def test_the_token_is_read_again_once_a_minute_old(account: Path) -> None:
    now = [1000.0]
    token = TokenFile(account / "token", clock=lambda: now[0])
    (account / "token").write_text("rotated")
    now[0] += 59
    assert token() == "Bearer first-token"  # not yet read again
    now[0] += 1
    assert token() == "Bearer rotated"
    (account / "token").unlink()  # a failed read keeps the last token
    now[0] += 60
    assert token() == "Bearer rotated"


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def _config(
    user: dict[str, Any], cluster: dict[str, Any] | None = None, context: str = "dev"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://api.example:6443"}}],
        "users": [{"name": "u", "user": user}],
    }


def test_data_fields_are_written_to_private_files(tmp_path: Path) -> None:
    pem = {n: f"-----BEGIN {n}-----\n".encode() for n in ("CA", "CERT", "KEY")}
    encoded = {n: base64.b64encode(v).decode() for n, v in pem.items()}
    config = _config(
        {"client-certificate-data": encoded["CERT"], "client-key-data": encoded["KEY"]},
        {"server": "https://api.example:6443", "certificate-authority-data": encoded["CA"]},
    )
    found = kube.from_kubeconfig([_write(tmp_path / "config", config)])
    written = [Path(str(f)) for f in (found.ca_file, found.cert_file, found.key_file)]
    assert [p.read_bytes() for p in written] == [pem["CA"], pem["CERT"], pem["KEY"]]
    assert stat.S_IMODE(written[0].parent.stat().st_mode) == 0o700
    assert (found.authorization(), found.verify) == (None, True)


def test_relative_paths_are_relative_to_the_file_that_holds_them(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    config = _config(
        {"client-certificate": "certs/me.crt", "client-key": "/abs/me.key"},
        {"server": "https://api.example:6443", "certificate-authority": "certs/ca.crt"},
    )
    found = kube.from_kubeconfig([_write(tmp_path / "config", config)])
    assert (found.ca_file, found.cert_file, found.key_file) == (
        str(tmp_path / "certs" / "ca.crt"),
        str(tmp_path / "certs" / "me.crt"),
        "/abs/me.key",
    )


@pytest.mark.parametrize(
    ("user", "header"),
    [
        pytest.param({"token": "abc"}, "Bearer abc", id="token"),
        pytest.param(
            {"username": "admin", "password": "s3cret"},
            "Basic " + base64.b64encode(b"admin:s3cret").decode(),
            id="basic",
        ),
        pytest.param({}, None, id="anonymous"),
    ],
)
def test_static_credentials(tmp_path: Path, user: dict[str, Any], header: str | None) -> None:
    found = kube.from_kubeconfig([_write(tmp_path / "config", _config(user))])
    assert found.authorization() == header


def test_a_token_file_is_read_from_beside_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    found = kube.from_kubeconfig([_write(tmp_path / "config", _config({"tokenFile": "token"}))])
    assert found.authorization() == "Bearer from-file"


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    cluster = {"server": "https://api.example:6443", "insecure-skip-tls-verify": True}
    found = kube.from_kubeconfig([_write(tmp_path / "config", _config({}, cluster))])
    assert found.verify is False


def test_files_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    # The first file to set current-context wins, and the first to name an entry.
    first = _config({"token": "first"}, {"server": "https://first:6443"}, context="one")
    first["contexts"].append({"name": "two", "context": {"cluster": "c", "user": "u"}})
    second = _config({"token": "second"}, {"server": "https://second:6443"}, context="two")
    second["current-context"] = "two"
    del first["current-context"]
    paths = [_write(tmp_path / "a", first), tmp_path / "missing", _write(tmp_path / "b", second)]
    found = kube.from_kubeconfig(paths)
    assert (found.server, found.authorization()) == ("https://first:6443", "Bearer first")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param({"current-context": ""}, "sets no current-context", id="no-context"),
        pytest.param(
            {"current-context": "dev", "contexts": []}, "no context named 'dev'", id="no-entry"
        ),
        pytest.param(
            _config({}, {"server": ""}), "cluster for context 'dev' has no server", id="no-server"
        ),
        pytest.param(
            _config({}, {"server": "https://a:1", "proxy-url": "http://proxy:3128"}),
            "sets proxy-url, which the operator does not support",
            id="proxy",
        ),
        pytest.param(
            _config({"token": "t", "as": "someone"}), "sets as, which", id="impersonation"
        ),
        pytest.param(
            _config({"client-key-data": "not base64!"}), "client-key-data is not base64", id="data"
        ),
    ],
)
def test_a_kubeconfig_the_operator_cannot_use_is_one_clear_error(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        kube.from_kubeconfig([_write(tmp_path / "config", config)])


def test_no_kubeconfig_names_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set KUBECONFIG or run it in the cluster"):
        kube.from_kubeconfig([tmp_path / "absent"])


def test_kubeconfig_paths_are_kubectls() -> None:
    assert kube.kubeconfig_paths({"KUBECONFIG": f"/a{os.pathsep}{os.pathsep}/b"}) == [
        Path("/a"),
        Path("/b"),
    ]
    assert kube.kubeconfig_paths({}) == [Path.home() / ".kube" / "config"]


def test_no_home_directory_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A numeric user without a passwd entry and no HOME: Path.home() raises RuntimeError.
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with pytest.raises(ConfigError, match="no KUBECONFIG and no home directory"):
        kube.load({})


def _exec_user(tmp_path: Path) -> dict[str, Any]:
    """A user whose token an exec plugin prints, as client-go's credential plugins do."""
    plugin = tmp_path / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-plugin"},
    }
    plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }


def test_an_exec_plugin_goes_through_the_kubernetes_client(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")  # the 'operator' extra, which the tests install
    config = _write(tmp_path / "config", _config(_exec_user(tmp_path)))
    found = kube.from_kubeconfig([config])
    assert (found.server, found.authorization()) == (
        "https://api.example:6443",
        "Bearer from-plugin",
    )


def test_an_exec_plugin_without_the_client_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # as in the image: not installed
    config = _write(tmp_path / "config", _config(_exec_user(tmp_path)))
    with pytest.raises(ConfigError, match=r"pip install 'dask-gpu-parity\[operator\]'"):
        kube.from_kubeconfig([config])


def test_load_prefers_the_pod(
    account: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT", account)
    config = _write(tmp_path / "config", _config({"token": "t"}))
    assert kube.load({**POD_ENV, "KUBECONFIG": str(config)}).server == "https://10.96.0.1:443"
    assert kube.load({"KUBECONFIG": str(config)}).server == "https://api.example:6443"

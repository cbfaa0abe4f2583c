"""Assertions on `helm template` output for every ci/*-values.yaml (no cluster needed)."""

from __future__ import annotations

import base64
import copy
import json
import re
import tomllib
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from dask_gpu_parity.admission.decide.configurations import (
    WebhookValues,
    configurations,
    match_conditions,
)
from dask_gpu_parity.core.policy import Delivery, Mode
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.core.verifier import default_probe_image

from .helpers import (
    CHART,
    CI_VALUES,
    DRIFT_VERBS,
    MUTATING,
    NAMESPACE,
    RELEASE,
    REPAIR_VERBS,
    REPO,
    REPORT_VERBS,
    VALIDATING,
    VERBS_USED,
    find,
    one,
    rbac_rows,
)

CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "DaskGPUPolicy",
}


def _values(name: str) -> dict[str, Any]:
    """The chart's values.yaml with one ci file merged over it (maps merge, the rest replaces)."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
        return copy.deepcopy(over)

    base = yaml.safe_load((CHART / "values.yaml").read_text())
    return merge(base, yaml.safe_load((CHART / "ci" / name).read_text()) or {})


def _deployments(objects: list[dict]) -> list[dict]:
    return find(objects, "Deployment")


def _pod(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(params=CI_VALUES)
def case(request, renders) -> tuple[str, list[dict], dict]:
    """(values file, rendered objects, merged values) for each ci values file."""
    return request.param, renders[request.param], _values(request.param)


def test_ci_matrix_is_complete():
    assert set(CI_VALUES) == {
        "default-values.yaml",
        "cert-manager-values.yaml",
        "self-signed-values.yaml",
        "audit-values.yaml",
        "one-replica-values.yaml",
        "monitoring-values.yaml",
    }


def test_every_object_is_labelled_and_namespaced(case):
    _, objects, _ = case
    for obj in objects:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/instance"] == RELEASE, obj["kind"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in meta, obj["kind"]
        else:
            assert meta["namespace"] == NAMESPACE, obj["kind"]


def test_never_ships_dask_crds_or_peering_objects(case):
    _, objects, _ = case
    kinds = {o["kind"] for o in objects}
    assert "CustomResourceDefinition" not in kinds  # ours is in crds/, the Dask ones never
    assert not {"ClusterKopfPeering", "KopfPeering"} & kinds
    assert not [
        o for o in objects if "dask.org" in o["apiVersion"] and o["kind"] != "DaskGPUPolicy"
    ]


def test_pods_meet_the_restricted_pod_security_standard(case):
    _, objects, _ = case
    for deployment in _deployments(objects):
        pod = _pod(deployment)
        psc = pod["securityContext"]
        assert psc["runAsNonRoot"] is True
        assert isinstance(psc["runAsUser"], int)
        assert psc["runAsUser"] > 0
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
        for volume in pod["volumes"]:
            assert set(volume) - {"name"} <= {"secret", "emptyDir", "projected", "configMap"}
        for container in pod["containers"] + pod.get("initContainers", []):
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["privileged"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["runAsNonRoot"] is True
            assert "ports" in container
            assert not [p for p in container["ports"] if "hostPort" in p]


def test_probes_match_what_kopf_serves(case):
    _, objects, values = case
    for deployment in _deployments(objects):
        (container,) = _pod(deployment)["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["https-webhook"] == values["operator"]["webhookPort"]
        # The webhook server routes POST only: readiness is a TCP connect, not an HTTP GET.
        assert container["readinessProbe"]["tcpSocket"] == {"port": "https-webhook"}
        for probe in ("livenessProbe", "startupProbe"):
            assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http-health"}
        assert ports["http-health"] == values["operator"]["healthPort"]


def test_operator_arguments(case):
    _, objects, values = case
    by_component = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in _deployments(objects)
    }
    assert set(by_component) == (
        {"webhook", "drift"} if values["drift"]["enabled"] else {"webhook"}
    )
    for component, deployment in by_component.items():
        (container,) = _pod(deployment)["containers"]
        args = container["args"]
        assert args[0] == "run"  # the image's entrypoint is the CLI
        assert "--tls-cert=/certs/tls.crt" in args
        assert "--tls-key=/certs/tls.key" in args
        assert f"--port={values['operator']['webhookPort']}" in args
        assert ("--no-drift" in args) is (component == "webhook")
        assert not [a for a in args if a.startswith("--peering")]  # standalone: see README
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/certs"]["readOnly"] is True
        secret = next(v for v in _pod(deployment)["volumes"] if v["name"] == "tls")["secret"]
        assert secret["secretName"] == f"{RELEASE}-tls"
        assert _pod(deployment)["serviceAccountName"] == RELEASE


def test_operator_runs_as_a_user_without_a_passwd_entry(case):
    # uid 65532 has no passwd entry in the image and the root filesystem is read-only: started
    # that way (`setpriv --reuid 65532`, `/` remounted read-only), `dask-gpu-parity run` raised
    # "Could not determine home directory." importing the Kubernetes client, then
    # "getpwuid(): uid not found: 65532" in kopf's identity. With POD_ID and HOME (the /tmp
    # emptyDir) it serves.
    _, objects, values = case
    for deployment in _deployments(objects):
        pod = _pod(deployment)
        (container,) = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["POD_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert env["HOME"]["value"] == "/tmp"
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        tmp = next(v for v in pod["volumes"] if v["name"] == mounts["/tmp"])
        assert "emptyDir" in tmp
        assert [e["name"] for e in container["env"]][2:] == [
            e["name"] for e in values["operator"]["env"]
        ]


def test_replicas_pdb_and_spread(case):
    _, objects, values = case
    webhook = one(objects, "Deployment", RELEASE)
    replicas = values["replicaCount"]
    assert webhook["spec"]["replicas"] == replicas
    assert webhook["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    labels = webhook["spec"]["template"]["metadata"]["labels"]
    pdbs = find(objects, "PodDisruptionBudget")
    if replicas > 1:
        (pdb,) = pdbs
        assert pdb["spec"]["minAvailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    else:
        assert pdbs == []  # a PDB over one replica would block every drain
    for constraint in _pod(webhook)["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    if values["drift"]["enabled"]:
        drift = one(objects, "Deployment", f"{RELEASE}-drift")
        assert drift["spec"]["replicas"] == 1
        assert drift["spec"]["strategy"] == {"type": "Recreate"}


def test_services_select_the_right_pods(case):
    _, objects, values = case
    webhook_labels = one(objects, "Deployment", RELEASE)["spec"]["template"]["metadata"]["labels"]
    svc = one(objects, "Service", RELEASE)
    assert svc["spec"]["selector"].items() <= webhook_labels.items()
    assert svc["spec"]["ports"] == [
        {
            "name": "https-webhook",
            "port": values["webhook"]["servicePort"],
            "targetPort": "https-webhook",
            "protocol": "TCP",
        }
    ]
    metrics = one(objects, "Service", f"{RELEASE}-metrics")
    for deployment in _deployments(objects):
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert metrics["spec"]["selector"].items() <= pod_labels.items()
    if values["drift"]["enabled"]:
        drift_labels = one(objects, "Deployment", f"{RELEASE}-drift")["spec"]["template"]
        assert not svc["spec"]["selector"].items() <= drift_labels["metadata"]["labels"].items()


def test_network_policy_names_real_ports(case):
    _, objects, _ = case
    policy = one(objects, "NetworkPolicy")
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    for deployment in _deployments(objects):
        (container,) = _pod(deployment)["containers"]
        assert ports == {p["name"] for p in container["ports"]}
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_rbac_grants_exactly_the_verbs_used(case):
    _, objects, values = case
    expected = set(VERBS_USED)
    if values["drift"]["enabled"]:
        expected |= DRIFT_VERBS
    if values["drift"]["enabled"] and values["drift"]["repair"]:
        expected |= REPAIR_VERBS
    if values["drift"]["enabled"] and values["drift"]["policyReports"]:
        expected |= REPORT_VERBS
    assert rbac_rows(objects) == expected
    assert find(objects, "Role") == []
    assert find(objects, "RoleBinding") == []
    for binding in find(objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}
        ]
        assert one(objects, "ClusterRole", binding["roleRef"]["name"])


def test_readme_lists_the_rbac_verbs():
    readme = (CHART / "README.md").read_text()
    table = readme.split("<!-- rbac:begin -->")[1].split("<!-- rbac:end -->")[0]
    rows = set()
    for line in table.splitlines():
        cells = [c.strip(" `") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("API group", "") and not cells[0].startswith("-"):
            group = "" if cells[0] == "(core)" else cells[0]
            rows |= {(group, cells[1], verb.strip(" `")) for verb in cells[2].split(",")}
    assert rows == VERBS_USED | DRIFT_VERBS | REPAIR_VERBS | REPORT_VERBS


def _webhook_configs(objects: list[dict]) -> dict[str, dict]:
    return {
        kind: one(objects, f"{kind}WebhookConfiguration", RELEASE)
        for kind in ("Mutating", "Validating")
    }


def test_webhooks_are_create_only_side_effect_free_and_scoped(case):
    _, objects, values = case
    configs = _webhook_configs(objects)
    names = {k: [w["name"] for w in c["webhooks"]] for k, c in configs.items()}
    assert names == {
        "Mutating": [f"{h}.gpuparity.dask.org" for h in MUTATING],
        "Validating": [f"{h}.gpuparity.dask.org" for h in VALIDATING],
    }
    excluded = [*values["webhook"]["excludedNamespaces"], NAMESPACE]
    for kind, config in configs.items():
        for hook in config["webhooks"]:
            (rule,) = hook["rules"]
            assert rule["operations"] == ["CREATE"]
            gateway = "gateway" in hook["name"]  # dask-gateway's DaskCluster
            assert rule["apiGroups"] == ["gateway.dask.org" if gateway else "kubernetes.dask.org"]
            assert rule["apiVersions"] == ["v1alpha1" if gateway else "v1"]
            assert hook["sideEffects"] == "None"
            assert hook["admissionReviewVersions"] == ["v1"]
            assert hook["failurePolicy"] == values["webhook"]["failurePolicy"]
            assert hook["timeoutSeconds"] == values["webhook"]["timeoutSeconds"]
            handler = hook["name"].split(".", 1)[0]
            assert hook["clientConfig"]["service"] == {
                "name": RELEASE,
                "namespace": NAMESPACE,
                "path": f"/{handler}",
                "port": 443,
            }
            ns_terms = hook["namespaceSelector"]["matchExpressions"]
            assert {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": excluded,
            } in ns_terms
            assert {
                "key": "gpuparity.dask.org/skip",
                "operator": "NotIn",
                "values": ["true"],
            } in ns_terms
            assert "kube-system" in excluded
            plural = rule["resources"][0] + (".gateway.dask.org" if gateway else "")
            assert hook["matchConditions"] == [
                # CPU-only Dask resources never reach the operator, nor what mutation answered for
                *match_conditions(plural, validating=kind == "Validating"),
                *values["webhook"]["matchConditions"],
            ]
            assert ("reinvocationPolicy" in hook) is (kind == "Mutating")


def _pem(b64: str) -> bytes:
    return base64.b64decode(b64)


def test_tls_self_signed_or_cert_manager(case):
    _, objects, values = case
    configs = _webhook_configs(objects).values()
    dns = [
        RELEASE,
        f"{RELEASE}.{NAMESPACE}",
        f"{RELEASE}.{NAMESPACE}.svc",
        f"{RELEASE}.{NAMESPACE}.svc.cluster.local",
    ]
    if values["tls"]["mode"] == "self-signed":
        secret = one(objects, "Secret", f"{RELEASE}-tls")
        assert secret["type"] == "kubernetes.io/tls"
        ca = x509.load_pem_x509_certificate(_pem(secret["data"]["ca.crt"]))
        cert = x509.load_pem_x509_certificate(_pem(secret["data"]["tls.crt"]))
        key = serialization.load_pem_private_key(_pem(secret["data"]["tls.key"]), None)
        cert.verify_directly_issued_by(ca)
        assert cert.public_key().public_numbers() == key.public_key().public_numbers()
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == dns
        days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
        assert days == values["tls"]["selfSigned"]["validityDays"]
        for config in configs:
            assert "annotations" not in config["metadata"]
            for hook in config["webhooks"]:
                assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert find(objects, "Certificate") == []
    else:
        assert find(objects, "Secret") == []  # cert-manager writes it
        serving = one(objects, "Certificate", f"{RELEASE}-serving")
        assert serving["spec"]["secretName"] == f"{RELEASE}-tls"
        assert serving["spec"]["dnsNames"] == dns
        assert serving["spec"]["privateKey"]["rotationPolicy"] == "Always"
        issuer = serving["spec"]["issuerRef"]
        assert one(objects, issuer["kind"], issuer["name"])["spec"]["ca"]
        for config in configs:
            annotation = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            assert annotation == f"{NAMESPACE}/{RELEASE}-serving"
            for hook in config["webhooks"]:
                assert "caBundle" not in hook["clientConfig"]


@pytest.mark.parametrize("where", ["service", "url"])
def test_webhooks_match_the_python_builder(helm, where):
    """The chart and operator/dask_gpu_parity/webhooks.py build the same webhooks."""
    sets: dict[str, Any] = {}
    if where == "url":
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
        sets = {"webhook.url": "https://127.0.0.1:9443", "webhook.caBundle": ca.decode()}
    objects = helm.template(sets=sets)
    chart = {c["kind"]: c for c in objects if c["kind"].endswith("WebhookConfiguration")}
    if where == "url":
        bundle = base64.b64decode(sets["webhook.caBundle"])
        values = WebhookValues(bundle, url=sets["webhook.url"])
    else:
        secret = one(objects, "Secret", f"{RELEASE}-tls")
        values = WebhookValues(
            base64.b64decode(secret["data"]["ca.crt"]),
            service_name=RELEASE,
            service_namespace=NAMESPACE,
        )
    values = WebhookValues(**{**values.__dict__, "excluded_namespaces": ("kube-system", NAMESPACE)})
    for built in configurations(values):
        ours = chart[built["kind"]]
        assert ours["metadata"]["name"] == built["metadata"]["name"] == RELEASE
        assert ours["webhooks"] == built["webhooks"]


def test_default_policy_is_valid_and_follows_values(case):
    _, objects, values = case
    manifest = one(objects, "DaskGPUPolicy", RELEASE)
    policy = load(manifest)  # what the operator does with it: raises on anything invalid
    assert policy.mode is Mode(values["policy"]["spec"]["mode"])
    assert policy.drift.repair is bool(values["drift"]["enabled"] and values["drift"]["repair"])
    assert policy.priority < 0  # any policy a user writes (priority 0) wins over the baseline


def test_service_monitor_scrapes_the_metrics_service(case):
    _, objects, values = case
    monitors = find(objects, "ServiceMonitor")
    if not values["metrics"]["serviceMonitor"]["enabled"]:
        assert monitors == []
        return
    (monitor,) = monitors
    metrics = one(objects, "Service", f"{RELEASE}-metrics")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == metrics["spec"]["ports"][0]["name"]


def test_image_defaults_to_app_version_and_takes_a_digest(helm):
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    (container,) = _pod(one(helm.template(), "Deployment", RELEASE))["containers"]
    assert container["image"] == f"ghcr.io/dask-gpu-parity/dask-gpu-parity:{chart['appVersion']}"
    digest = "sha256:" + "a" * 64
    objects = helm.template(sets={"image.digest": digest})
    (container,) = _pod(one(objects, "Deployment", RELEASE))["containers"]
    assert container["image"].endswith(f":{chart['appVersion']}@{digest}")


def test_probe_image_is_the_releases_as_the_cli_names_it(helm):
    """One source of truth: the chart's appVersion is the package's version (below), and the
    default policy names the probe image exactly as the CLI's built-in default does."""
    policy = load(one(helm.template(), "DaskGPUPolicy", RELEASE))
    assert policy.verifier.image == default_probe_image()
    assert policy.verifier.delivery is Delivery.REFERENCE
    digest = "sha256:" + "b" * 64
    mirror = "registry.example.com/mirror/dask-gpu-parity-probe"
    objects = helm.template(sets={"probeImage.digest": digest, "probeImage.repository": mirror})
    image = load(one(objects, "DaskGPUPolicy", RELEASE)).verifier.image
    assert image == f"{mirror}:{default_probe_image().rpartition(':')[2]}@{digest}"
    objects = helm.template(sets={"policy.spec.verifier.registry": "registry.example.com"})
    policy = load(one(objects, "DaskGPUPolicy", RELEASE))
    assert (policy.verifier.image, policy.verifier.registry) == (None, "registry.example.com")
    objects = helm.template(sets={"policy.spec.verifier.delivery": "inline"})
    assert load(one(objects, "DaskGPUPolicy", RELEASE)).verifier.delivery is Delivery.INLINE


def test_chart_versions():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == project["version"]
    assert chart["kubeVersion"].startswith(">=1.27")


def test_crds_are_a_byte_identical_copy():
    top = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    ours = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert top == ours
    for name in top:
        assert (CHART / "crds" / name).read_bytes() == (REPO / "crds" / name).read_bytes(), name


# -- values.yaml and values.schema.json ------------------------------------------------------


def _schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    """A CRD schema node as values.schema.json holds it: no defaults, closed objects."""
    node = copy.deepcopy(node)
    node.pop("default", None)
    node.pop("x-kubernetes-validations", None)  # CEL; the operator's policy loader checks it too
    if node.get("type") == "object" and "properties" in node:
        node["additionalProperties"] = False
        node["properties"] = {k: _strict(v) for k, v in node["properties"].items()}
    elif node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _strict(node["additionalProperties"])
    if node.get("type") == "array":
        node["items"] = _strict(node["items"])
    return node


def test_schema_policy_spec_follows_the_crd():
    crd = yaml.safe_load((REPO / "crds" / "gpuparity.dask.org_daskgpupolicies.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    expected = _strict(spec)
    del expected["properties"]["drift"]  # set from drift.repair, with the RBAC it needs
    ours = copy.deepcopy(_schema()["properties"]["policy"]["properties"]["spec"])
    ours.pop("description")
    expected.pop("description", None)
    assert ours == expected


def _objects(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)] if "properties" in node else []
    for key, child in node.get("properties", {}).items():
        found += _objects(child, f"{path}.{key}")
    return found


def test_schema_is_strict_and_documented():
    for path, node in _objects(_schema()):
        assert node.get("additionalProperties") is False, path or "(root)"
        for key, child in node["properties"].items():
            if not path.startswith(".policy.spec"):  # the CRD's own descriptions are partial
                assert child.get("description"), f"{path}.{key} has no description"


def test_every_value_is_commented():
    """Every key values.schema.json declares has a comment right above it in values.yaml."""
    schema = _schema()
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str, dict[str, Any] | None]] = [(-1, "", schema)]
    checked = 0
    for i, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][\w-]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack[-1][0] >= indent:
            stack.pop()
        parent_key, parent = stack[-1][1], stack[-1][2]
        node = (parent or {}).get("properties", {}).get(key)
        stack.append((indent, key, node))
        if node is None or parent_key == "resources":
            continue  # Kubernetes data (requests, securityContext, ...), not a chart key
        above = lines[i - 1].strip() if i else ""
        assert above.startswith("#"), f"values.yaml:{i + 1}: {key!r} has no comment above it"
        checked += 1
    assert checked > 60

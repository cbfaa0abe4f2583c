"""`helm lint` over the ci matrix, and values.schema.json rejecting what it should."""

from __future__ import annotations

import pytest

from .helpers import CHART, CI_VALUES


@pytest.mark.parametrize("values", CI_VALUES)
def test_helm_lint_strict(helm, values):
    proc = helm.run("lint", "--strict", str(CHART), "--values", str(CHART / "ci" / values))
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param("replicas", "2", "additional properties 'replicas'", id="unknown-top-level"),
        pytest.param("image.name", "x", "additional properties 'name'", id="unknown-nested"),
        pytest.param(
            "policy.spec.bogus", "1", "additional properties 'bogus'", id="unknown-policy"
        ),
        pytest.param("webhook.failurePolicy", "Maybe", "failurePolicy", id="failure-policy"),
        pytest.param("webhook.timeoutSeconds", 31, "timeoutSeconds", id="timeout-over-30"),
        pytest.param("tls.mode", "vault", "mode", id="tls-mode"),
        pytest.param("policy.spec.mode", "loud", "mode", id="policy-mode"),
        pytest.param("replicaCount", 0, "replicaCount", id="zero-replicas"),
        pytest.param("webhook.url", "http://10.0.0.1", "url", id="plain-http-url"),
        pytest.param("image.digest", "latest", "digest", id="bad-digest"),
    ],
)
def test_schema_rejects(helm, key, value, message):
    args = helm.template_args(sets={key: value})
    proc = helm.run("template", *args, check=False)
    assert proc.returncode != 0, f"{key}={value} was accepted"
    assert "schema" in proc.stderr, proc.stderr
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        pytest.param(
            {"webhook.url": "https://127.0.0.1:9443"},
            "webhook.caBundle is required",
            id="url-without-ca",
        ),
        pytest.param(
            {"serviceAccount.create": False},
            "serviceAccount.name is required",
            id="no-service-account",
        ),
    ],
)
def test_template_requires(helm, sets, message):
    proc = helm.run("template", *helm.template_args(sets=sets), check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("values", "present", "absent"),
    [
        pytest.param(
            "default-values.yaml",
            ["rollout status deployment/dask-gpu-parity-drift", "fails (failurePolicy Fail)"],
            ["WARNING"],
            id="default",
        ),
        pytest.param(
            "one-replica-values.yaml",
            ["WARNING: replicaCount is 1"],
            ["-drift"],
            id="one-replica",
        ),
        pytest.param(
            "audit-values.yaml",
            ["is admitted unchecked (failurePolicy Ignore)", "is in mode audit"],
            [],
            id="audit",
        ),
        pytest.param(
            "cert-manager-values.yaml",
            ["get certificate dask-gpu-parity-serving"],
            ["delete secret"],
            id="cert-manager",
        ),
    ],
)
def test_notes_tell_what_to_do_next(helm, values, present, absent):
    """NOTES.txt as `helm install` prints it (a client-side dry run: lookups find nothing)."""
    args = helm.template_args([values])
    out = helm.run("install", *args, "--dry-run=client").stdout
    notes = out.split("NOTES:", 1)[1]
    assert "kubectl apply --server-side -f dask-gpu-parity/crds/" in notes
    for text in present:
        assert text in notes
    for text in absent:
        assert text not in notes

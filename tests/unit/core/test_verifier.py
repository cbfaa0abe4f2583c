"""The injected verifier: ``gpu-parity-probe`` + ``gpu-parity-check`` (or inline), and DGP018."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity import __version__, probe
from dask_gpu_parity.admission.decide.drift import Tracker
from dask_gpu_parity.core import schema, verifier
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.plain import copy_json, get_in
from dask_gpu_parity.core.policy import Delivery, Policy, PolicyError, VerifierSettings
from dask_gpu_parity.core.policy_manifest import load, with_verifier
from dask_gpu_parity.names import PROBE_IMAGE_REPOSITORY
from tests.unit.helpers import cluster, example, nodes

SCHED = ("spec", "scheduler", "spec")
RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
INLINE = Policy(verifier=VerifierSettings(delivery=Delivery.INLINE))
IMAGE = f"{PROBE_IMAGE_REPOSITORY}:{__version__}"


def fixed(doc: dict[str, Any], policy: Policy | None = None, **kw: Any) -> dict[str, Any]:
    patched: dict[str, Any] = evaluate(doc, policy or Policy(), **kw).patched
    return patched


def inits(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in get_in(doc, (*SCHED, "initContainers"))}


def init_of(doc: dict[str, Any], policy: Policy | None = None, **kw: Any) -> dict[str, Any]:
    return inits(fixed(doc, policy, **kw))["gpu-parity-check"]


def codes(doc: dict[str, Any], policy: Policy | None = None) -> list[str]:
    return [f.code for f in evaluate(doc, policy or Policy()).findings]


# --- the by-reference form (the default) --------------------------------------------------------


def test_by_reference_copy_step_then_check_in_the_schedulers_image() -> None:
    doc = fixed(cluster(scheduler_container={"image": "rapids:26.10"}))
    spec = get_in(doc, SCHED)
    copy, check = spec["initContainers"]
    assert (copy["name"], check["name"]) == ("gpu-parity-probe", "gpu-parity-check")
    assert copy["image"] == IMAGE  # this release's probe image, by its exact tag
    assert copy["command"] == ["cp", "/probe.py", "/gpu-parity/probe.py"]
    assert copy["volumeMounts"] == [{"name": "gpu-parity-probe", "mountPath": "/gpu-parity"}]
    assert check["image"] == "rapids:26.10"  # the probe proves the scheduler's own image
    assert check["command"] == ["python", "-I", "/gpu-parity/probe.py"]
    assert check["volumeMounts"] == [
        {"name": "gpu-parity-probe", "mountPath": "/gpu-parity", "readOnly": True}
    ]
    assert spec["volumes"] == [{"name": "gpu-parity-probe", "emptyDir": {"sizeLimit": "1Mi"}}]


def test_default_image_is_the_release_tag() -> None:
    assert verifier.default_probe_image() == IMAGE
    assert verifier.release_tag("0.2.0") == "0.2.0"
    assert verifier.release_tag("0.2.0+local") == "0.2.0-local"  # '+' is not allowed in a tag


@pytest.mark.parametrize(
    ("policy", "image"),
    [
        pytest.param(
            Policy(verifier=VerifierSettings(registry="registry.example.com/mirror")),
            f"registry.example.com/mirror/dask-gpu-parity/dask-gpu-parity-probe:{__version__}",
            id="mirror-keeps-path-and-tag",
        ),
        pytest.param(
            Policy(verifier=VerifierSettings(registry="registry.example.com:5000/")),
            f"registry.example.com:5000/dask-gpu-parity/dask-gpu-parity-probe:{__version__}",
            id="mirror-with-port",
        ),
        pytest.param(
            Policy(
                verifier=VerifierSettings(image="registry.example.com/probe@sha256:" + "a" * 64)
            ),
            "registry.example.com/probe@sha256:" + "a" * 64,
            id="policy-image-by-digest",
        ),
    ],
)
def test_probe_image_from_the_policy(policy: Policy, image: str) -> None:
    assert inits(fixed(cluster(), policy))["gpu-parity-probe"]["image"] == image


def test_copy_step_requests_no_gpu_and_sees_none() -> None:
    copy = inits(fixed(cluster()))["gpu-parity-probe"]
    requested = {**copy["resources"].get("limits", {}), **copy["resources"].get("requests", {})}
    assert not [r for r in requested if r.startswith("nvidia.com/")]
    # void: the legacy runtime treats it as no GPU container at all (none would mount the driver)
    assert copy["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]


def test_copy_step_is_restricted_on_its_own() -> None:
    """Restricted Pod Security, whatever the pod or the scheduler container say."""
    security = inits(fixed(cluster()))["gpu-parity-probe"]["securityContext"]
    assert {k: security[k] for k in RESTRICTED} == RESTRICTED
    assert security["runAsUser"] == 65532  # also where the pod runs as root


def test_check_mirrors_the_scheduler() -> None:
    doc = cluster(
        scheduler_container={
            "image": "rapids:26.10",
            "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}],
            "envFrom": [{"configMapRef": {"name": "dask-env"}}],
            "securityContext": RESTRICTED,
            "imagePullPolicy": "Always",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        },
        worker_container={"image": "rapids:26.10"},
        scheduler_extra={"volumes": [{"name": "data", "emptyDir": {}}]},
    )
    check = init_of(doc)
    assert check["image"] == "rapids:26.10"
    assert check["env"] == [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    assert check["envFrom"] == [{"configMapRef": {"name": "dask-env"}}]
    assert check["securityContext"] == RESTRICTED
    assert check["imagePullPolicy"] == "Always"
    assert check["volumeMounts"][0] == {"name": "data", "mountPath": "/data"}
    assert check["terminationMessagePolicy"] == "FallbackToLogsOnError"
    # requests default to limits for the GPU and memory: the pod still asks for one GPU
    assert check["resources"] == {
        "limits": {"nvidia.com/gpu": "1", "memory": "256Mi"},
        "requests": {"cpu": "100m"},
    }
    assert "restartPolicy" not in check  # a native sidecar field the 1.21 CRD schema would prune
    volumes = get_in(fixed(doc), (*SCHED, "volumes"))
    assert [v["name"] for v in volumes] == ["data", "gpu-parity-probe"]


def test_same_gpu_resource_as_the_scheduler() -> None:
    doc = cluster(worker_resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})
    assert init_of(doc)["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"


def test_expectations_from_policy_and_inventory() -> None:
    policy = Policy(verifier=VerifierSettings(min_compute_capability="8.0"))
    init = init_of(example("gpu-cluster-tcp.yaml"), policy, inventory=Inventory.from_nodes(nodes()))
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env[probe.ENV_EXPECT_DRIVER] == "580.95.05"
    assert env[probe.ENV_MIN_COMPUTE_CAPABILITY] == "8.0"
    assert env["EXTRA_PIP_PACKAGES"] == "xgboost==3.1.0"  # the scheduler's env, copied from workers


def test_expect_driver_can_be_turned_off() -> None:
    policy = Policy(verifier=VerifierSettings(expect_driver=False))
    init = init_of(example("gpu-cluster-tcp.yaml"), policy, inventory=Inventory.from_nodes(nodes()))
    assert probe.ENV_EXPECT_DRIVER not in {e["name"] for e in init.get("env", [])}


def test_disabled_verifier_injects_nothing() -> None:
    result = evaluate(cluster(), Policy(verifier=VerifierSettings(enabled=False)))
    assert get_in(result.patched, (*SCHED, "initContainers")) is None
    assert get_in(result.patched, (*SCHED, "volumes")) is None


def test_user_init_containers_are_kept_and_the_check_runs_last() -> None:
    doc = cluster(scheduler_extra={"initContainers": [{"name": "download", "image": "busybox"}]})
    names = list(inits(fixed(doc)))
    assert names == ["download", "gpu-parity-probe", "gpu-parity-check"]


# --- the inline form ------------------------------------------------------------------------------


def test_inline_embeds_probe_py_byte_for_byte() -> None:
    doc = fixed(cluster(), INLINE)
    check = inits(doc)["gpu-parity-check"]
    source = Path(probe.__file__).read_text(encoding="utf-8")
    assert check["command"] == ["python", "-I", "-c", source]
    assert list(inits(doc)) == ["gpu-parity-check"]  # no copy step, no volume
    assert "volumeMounts" not in check
    assert get_in(doc, (*SCHED, "volumes")) is None


@pytest.mark.parametrize("kind", ["DaskCluster", "DaskJob"])
@pytest.mark.parametrize("policy", [Policy(), INLINE], ids=["reference", "inline"])
def test_injected_containers_are_schema_valid(kind: str, policy: Policy) -> None:
    doc = example("gpu-cluster-tcp.yaml" if kind == "DaskCluster" else "gpu-daskjob.yaml")
    result = evaluate(doc, policy, Inventory.from_nodes(nodes()))
    assert schema.validate(result.patched, kind) == []


def test_env_names_are_the_probes() -> None:
    assert verifier.EXPECT_DRIVER in probe.ENV_VARS
    assert verifier.MIN_COMPUTE_CAPABILITY in probe.ENV_VARS


# --- what the NVIDIA runtime needs: both shapes of env ----------------------------------------


@pytest.mark.parametrize(
    ("env", "scheduler_after", "fixed_7"),
    [
        # legacy nvidia-container-runtime: the variable decides which libraries are mounted
        pytest.param(
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}],
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility,compute"}],
            True,
            id="legacy-utility-only-gets-compute",
        ),
        pytest.param(
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "graphics, video"}],
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "graphics, video,compute"}],
            True,
            id="legacy-other-capabilities-get-compute",
        ),
        pytest.param(
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
            False,
            id="legacy-compute-utility-as-cuda-images-set-it",
        ),
        pytest.param(
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}],
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}],
            False,
            id="legacy-all",
        ),
        pytest.param(
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "valueFrom": {"configMapKeyRef": {}}}],
            [{"name": "NVIDIA_DRIVER_CAPABILITIES", "valueFrom": {"configMapKeyRef": {}}}],
            False,
            id="value-from-is-not-ours-to-judge",
        ),
        # CDI (GPU Operator default since v25.10): the device brings every library; the CDI spec
        # sets NVIDIA_VISIBLE_DEVICES=void at run time, nothing in the manifest
        pytest.param(None, None, False, id="cdi-or-image-default-unset"),
    ],
)
def test_compute_libraries_under_both_runtimes(
    env: list[dict[str, Any]] | None, scheduler_after: list[Any] | None, fixed_7: bool
) -> None:
    doc = cluster(scheduler_container={"env": env} if env is not None else None)
    patched = fixed(doc)
    scheduler = get_in(patched, (*SCHED, "containers", 0))
    copy, check = get_in(patched, (*SCHED, "initContainers"))
    assert scheduler.get("env") == scheduler_after
    assert check.get("env") == scheduler_after  # the check sees the libraries the scheduler will
    assert ("DGP007" in codes(doc)) is fixed_7
    # the check asks for a device only through its GPU request: nothing in its env overrides the
    # device plugin's NVIDIA_VISIBLE_DEVICES (legacy) or the CDI spec's
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in check.get("env", [])}
    assert check["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert copy["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]


# --- DGP018: a verifier from another release converges ------------------------------------------


def previous_release(doc: dict[str, Any], source: str = "import probe\nprobe.main()\n") -> Any:
    """``doc`` as release 0.1.0 (main e209ac6) fixed it: the probe inline, GPU in requests."""
    out = fixed(doc, Policy(verifier=VerifierSettings(enabled=False)))
    scheduler = get_in(out, (*SCHED, "containers", 0))
    get_in(out, SCHED)["initContainers"] = [
        {
            "name": "gpu-parity-check",
            "image": scheduler["image"],
            "command": ["python", "-I", "-c", source],
            "resources": {
                "limits": {"nvidia.com/gpu": "1", "memory": "256Mi"},
                "requests": {"nvidia.com/gpu": "1", "cpu": "100m", "memory": "256Mi"},
            },
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }
    ]
    return out


def converges(doc: dict[str, Any], policy: Policy | None = None) -> dict[str, Any]:
    """Fix ``doc`` (one DGP018, fixable) and check the result needs nothing more."""
    policy = policy or Policy()
    result = evaluate(doc, policy)
    assert [(f.code, f.fixable) for f in result.findings] == [("DGP018", True)]
    again = evaluate(result.patched, policy)
    assert again.findings == ()
    assert not again.changed
    patched: dict[str, Any] = result.patched
    return patched


def test_previous_release_inline_becomes_by_reference() -> None:
    out = converges(previous_release(cluster()))
    assert out == fixed(cluster())  # exactly what this release injects into the original


def test_older_probe_image_changes_one_reference() -> None:
    old = fixed(cluster())
    inits(old)["gpu-parity-probe"]["image"] = f"{PROBE_IMAGE_REPOSITORY}:0.0.9"
    result = evaluate(old, Policy())
    (finding,) = result.findings
    assert finding.path == "/spec/scheduler/spec/initContainers/0/image"
    assert "0.0.9" in finding.message
    assert result.patch == [
        {"op": "replace", "path": finding.path, "value": IMAGE}
    ]  # an upgrade rewrites one image reference, nothing else
    converges(old)


def test_a_mirror_set_later_is_converged_to() -> None:
    policy = Policy(verifier=VerifierSettings(registry="registry.example.com"))
    out = converges(fixed(cluster()), policy)
    assert inits(out)["gpu-parity-probe"]["image"].startswith("registry.example.com/")


def test_operator_image_verify_gpu_of_the_first_release_becomes_by_reference() -> None:
    doc = previous_release(cluster())
    check = get_in(doc, (*SCHED, "initContainers", 0))
    check.update(image="ghcr.io/dask-gpu-parity/dask-gpu-parity:0.1.0")
    check["command"] = ["dask-gpu-parity", "verify-gpu"]
    out = converges(doc)
    assert inits(out)["gpu-parity-check"]["image"] == "rapids:1"  # the scheduler's image again


def test_inline_policy_replaces_a_stale_source_only() -> None:
    doc = previous_release(cluster(), source="print('an older probe')\n")
    result = evaluate(doc, INLINE)
    assert [op["path"] for op in result.patch] == [
        "/spec/scheduler/spec/initContainers/0/command/3"
    ]
    converges(doc, INLINE)


def test_inline_policy_turns_by_reference_back_into_inline() -> None:
    out = converges(fixed(cluster()), INLINE)
    assert list(inits(out)) == ["gpu-parity-check"]
    assert get_in(out, (*SCHED, "volumes")) is None


def test_user_init_containers_and_volumes_survive_the_conversion() -> None:
    doc = previous_release(cluster(scheduler_extra={"volumes": [{"name": "data", "emptyDir": {}}]}))
    spec = get_in(doc, SCHED)
    spec["initContainers"][:0] = [{"name": "download", "image": "busybox"}]
    spec["initContainers"].append({"name": "after", "image": "busybox"})
    out = converges(doc)
    assert list(inits(out)) == ["download", "gpu-parity-probe", "gpu-parity-check", "after"]
    assert [v["name"] for v in get_in(out, (*SCHED, "volumes"))] == ["data", "gpu-parity-probe"]


def test_hand_written_gpu_parity_check_is_left_alone() -> None:
    doc = cluster(
        scheduler_extra={
            "initContainers": [
                {"name": "gpu-parity-check", "image": "mine", "command": ["nvidia-smi"]}
            ]
        }
    )
    result = evaluate(doc, Policy())
    assert "DGP018" not in [f.code for f in result.findings]
    assert get_in(result.patched, (*SCHED, "initContainers")) == get_in(
        doc, (*SCHED, "initContainers")
    )


def test_daskjob_converges_too() -> None:
    doc = example("gpu-daskjob.yaml")
    old = evaluate(doc, Policy()).patched
    spec = get_in(old, ("spec", "cluster", "spec", "scheduler", "spec"))
    spec["initContainers"][0]["image"] = f"{PROBE_IMAGE_REPOSITORY}:0.0.9"
    result = evaluate(old, Policy())
    assert [f.code for f in result.findings] == ["DGP018"]
    assert result.patched == evaluate(doc, Policy()).patched


def test_fixing_twice_changes_nothing_in_either_form() -> None:
    for policy in (Policy(), INLINE):
        once = fixed(example("gpu-cluster-ucx.yaml"), policy, inventory=None)
        twice = evaluate(copy_json(once), policy)
        assert not twice.changed


# --- policy ---------------------------------------------------------------------------------------


def _policy(verifier_spec: dict[str, Any]) -> Policy:
    return load(
        {
            "apiVersion": "gpuparity.dask.org/v1alpha1",
            "kind": "DaskGPUPolicy",
            "metadata": {"name": "p"},
            "spec": {"verifier": verifier_spec},
        }
    )


def test_policy_reads_delivery_image_and_registry() -> None:
    assert _policy({}).verifier.delivery is Delivery.REFERENCE
    assert _policy({"delivery": "inline"}).verifier.delivery is Delivery.INLINE
    assert _policy({"image": "r.example/p:1.0"}).verifier.image == "r.example/p:1.0"
    assert _policy({"registry": "r.example/m"}).verifier.registry == "r.example/m"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"delivery": "volume"}, "spec.verifier.delivery: expected one of reference, inline"),
        ({"image": "r.example/probe"}, "spec.verifier.image: expected an image reference with a"),
        ({"image": "r.example/p:1", "registry": "r"}, "spec.verifier.registry: set either image"),
        ({"registry": "https://r.example"}, "spec.verifier.registry: expected a registry host"),
    ],
)
def test_policy_rejects_bad_verifier_settings(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace(".", r"\.")):
        _policy(spec)


def test_with_verifier_overrides_image_and_registry_together() -> None:
    policy = with_verifier(
        Policy(verifier=VerifierSettings(registry="r.example")), image="x.example/p:2"
    )
    assert (policy.verifier.image, policy.verifier.registry) == ("x.example/p:2", None)
    assert with_verifier(policy, delivery="inline").verifier.image == "x.example/p:2"


def test_an_earlier_releases_verifier_in_a_running_scheduler_is_not_drift() -> None:
    """An upgrade must not report (or, with repair on, restart) every running scheduler."""
    cluster_doc = cluster()
    old = previous_release(cluster_doc)
    deployment = {
        "metadata": {"name": "c-scheduler", "namespace": "ns", "generation": 1, "uid": "u"},
        "spec": {"template": {"spec": get_in(old, SCHED)}},
    }
    assert Tracker().check(cluster_doc, deployment, Policy(), None) is None
    get_in(deployment, ("spec", "template", "spec", "containers", 0))["resources"] = {}
    report = Tracker().check(cluster_doc, deployment, Policy(), None)
    assert report is not None
    assert [f.code for f in report.findings] == ["DGP001"]  # a real drift still is


def _one_gpu_check(container: dict[str, Any]) -> dict[str, Any]:
    """The check for ``container``, which asks for one ``nvidia.com/gpu``."""
    return verifier.init_container(
        container,
        inline=False,
        gpu_resource="nvidia.com/gpu",
        gpu_count="1",
        expect_driver=None,
        min_compute_capability=None,
        cpu="100m",
        memory="256Mi",
    )


def test_check_shares_the_schedulers_dra_claims() -> None:
    """A container with native claims (tests/fixtures/dra/pod-claims.yaml, pod1: NVIDIA's
    demo/specs/quickstart/v1/gpu-test1.yaml) gives the check the same claims, so it proves the
    device the container gets, not another."""
    docs = yaml.safe_load_all(
        (Path(__file__).parents[2] / "fixtures/dra/pod-claims.yaml").read_text()
    )
    [pod] = [d for d in docs if d and d["kind"] == "Pod" and d["metadata"]["name"] == "pod1"]
    container = {**pod["spec"]["containers"][0], "image": "rapidsai/base:25.10-cuda13.0-py3.12"}
    check = _one_gpu_check(container)
    assert check["resources"]["claims"] == [{"name": "gpu"}]
    assert check["resources"]["claims"] is not container["resources"]["claims"]  # a copy
    plain = _one_gpu_check({"name": "scheduler", "image": "x:1"})
    assert "claims" not in plain["resources"]

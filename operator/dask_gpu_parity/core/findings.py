"""Findings: what a parity rule has to say about one Dask resource.

The rule table below is the single source of truth for finding codes: the engine, the reports and
``docs/findings.md`` (checked by a test) all read it. Codes are stable forever; a retired rule keeps
its number.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["RULES", "Finding", "Rule", "Severity"]


class Severity(enum.IntEnum):
    """How bad a finding is; ordered so that ``max()`` picks the worst."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Read ``error``/``warning``/``info`` in any case."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            choices = ", ".join(str(s) for s in cls)
            raise ValueError(f"unknown severity {text!r}: expected one of {choices}") from None


@dataclass(frozen=True)
class Rule:
    """One parity rule: its stable code, a short name and what it is about."""

    code: str
    name: str
    title: str
    severity: Severity
    fixable: bool


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule("DGP001", "scheduler-gpu", "Scheduler has no GPU", Severity.ERROR, True),
        Rule(
            "DGP002",
            "scheduler-gpu-resource",
            "Scheduler requests another GPU resource",
            Severity.WARNING,
            False,
        ),
        Rule("DGP003", "scheduler-image", "Scheduler image differs", Severity.ERROR, True),
        Rule("DGP004", "placement", "Scheduler placement differs", Severity.ERROR, True),
        Rule("DGP005", "gpu-toleration", "Scheduler lacks GPU tolerations", Severity.ERROR, True),
        Rule("DGP006", "runtime-class", "Scheduler runtimeClassName differs", Severity.ERROR, True),
        Rule("DGP007", "environment", "Scheduler environment differs", Severity.WARNING, True),
        Rule(
            "DGP008",
            "ucx-cuda-context",
            "UCX scheduler creates no CUDA context",
            Severity.ERROR,
            True,
        ),
        Rule("DGP009", "verifier", "Scheduler GPU is not verified", Severity.WARNING, True),
        Rule(
            "DGP010", "integer-quantity", "Resource quantity is not a string", Severity.ERROR, True
        ),
        Rule("DGP011", "schema", "Rejected by the Dask CRD schema", Severity.ERROR, False),
        Rule(
            "DGP012",
            "pruned-field",
            "Field dropped by the Dask CRD schema",
            Severity.WARNING,
            False,
        ),
        Rule("DGP013", "unschedulable", "No node can take the scheduler", Severity.ERROR, False),
        Rule(
            "DGP014", "driver-class", "Workers allow several driver classes", Severity.WARNING, True
        ),
        Rule(
            "DGP015",
            "worker-group-scheduler",
            "GPU worker group joins a scheduler without GPU",
            Severity.ERROR,
            False,
        ),
        Rule("DGP016", "job-runner-image", "Job runner image differs", Severity.WARNING, False),
        Rule("DGP017", "malformed", "Dask resource is malformed", Severity.ERROR, False),
        Rule(
            "DGP018",
            "verifier-outdated",
            "Scheduler verifier is from another release",
            Severity.WARNING,
            True,
        ),
        Rule(
            "DGP020", "cuda-driver", "No driver class runs the image's CUDA", Severity.ERROR, False
        ),
        Rule(
            "DGP021",
            "cuda-minor",
            "Driver supports an older CUDA minor than the image",
            Severity.WARNING,
            False,
        ),
        Rule(
            "DGP022", "workers-unschedulable", "No node can take the workers", Severity.ERROR, False
        ),
        Rule(
            "DGP023",
            "no-driver-labels",
            "GPU nodes carry no driver labels",
            Severity.WARNING,
            False,
        ),
        Rule(
            "DGP024",
            "refused-gpu-request",
            "GPU request is refused by the API server",
            Severity.ERROR,
            False,
        ),
        Rule(
            "DGP025",
            "cuda-worker-without-gpu",
            "dask-cuda workers request no GPU",
            Severity.ERROR,
            False,
        ),
        Rule(
            "DGP026",
            "gpu-capacity",
            "Not enough GPUs for the workers",
            Severity.WARNING,
            False,
        ),
        Rule(
            "DGP027",
            "unknown-device-class",
            "Workers ask for an unknown DeviceClass",
            Severity.WARNING,
            False,
        ),
        Rule(
            "DGP028",
            "driver-sources-disagree",
            "GPU node labels and DRA devices disagree",
            Severity.WARNING,
            False,
        ),
        Rule(
            "DGP029",
            "cpu-container-sees-gpus",
            "CPU-only container of a CUDA image sees the node's GPUs",
            Severity.WARNING,
            True,
        ),
        Rule(
            "DGP030",
            "unjudged-config",
            "Deployer configuration cannot be judged offline",
            Severity.INFO,
            False,
        ),
        # Input files, not resources (the CLI): the other files are still checked.
        Rule("DGP900", "unreadable-file", "File cannot be read", Severity.ERROR, False),
        Rule("DGP901", "invalid-file", "File is not valid YAML or JSON", Severity.ERROR, False),
        Rule("DGP902", "skipped-file", "File in a folder is no manifest", Severity.INFO, False),
        Rule("DGP903", "partial-kustomization", "Kustomization read in part", Severity.INFO, False),
    )
}


@dataclass(frozen=True)
class Finding:
    """One thing a rule found, with where it is and whether ``fix`` resolves it.

    ``path`` is a JSON Pointer (RFC 6901) into the resource, e.g.
    ``/spec/scheduler/spec/containers/0/resources/limits``.
    """

    code: str
    severity: Severity
    path: str
    message: str
    fixable: bool

    @property
    def rule(self) -> Rule:
        """The rule that produced this finding."""
        return RULES[self.code]

    @classmethod
    def of(
        cls,
        code: str,
        path: str,
        message: str,
        *,
        severity: Severity | None = None,
        fixable: bool | None = None,
    ) -> Finding:
        """Build a finding with the rule's default severity and fixability."""
        rule = RULES[code]
        return cls(
            code=code,
            severity=rule.severity if severity is None else severity,
            path=path,
            message=message,
            fixable=rule.fixable if fixable is None else fixable,
        )

"""JUnit XML, as GitLab's ``artifacts:reports:junit`` and Jenkins read it.

One test case per Dask resource (failed when it has an error), one per file that could not be
checked (an ``<error>``). Every name and message goes through :func:`printable`, so a control
character in the input never makes the XML ill-formed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from xml.etree import ElementTree as ET

from dask_gpu_parity.core.findings import Severity

from .model import FILE_CODES, Located, printable, relative_path

__all__ = ["junit"]


def junit(items: Sequence[Located], checked: Sequence[tuple[str, str]]) -> str:
    """The report; ``checked`` is (file, resource) of every Dask resource, for passing cases."""
    cwd = os.getcwd()
    cases: dict[tuple[str, str], list[Located]] = {key: [] for key in checked}
    paths: dict[str, str | None] = {}
    for item in items:
        key = (item.file, item.resource or f"{item.finding.code} {item.finding.rule.title}")
        cases.setdefault(key, []).append(item)
        paths[item.file] = item.path
    failures = errors = 0
    suites = ET.Element("testsuites", name="dask-gpu-parity")
    suite = ET.SubElement(suites, "testsuite", name="dask-gpu-parity")
    for (file, resource), group in cases.items():
        path = paths.get(file, file)
        shown = (relative_path(path, cwd) if path else None) or file
        case = ET.SubElement(
            suite,
            "testcase",
            classname=printable(shown),
            name=printable(resource),
            file=printable(shown),
            time="0",
        )
        text = "\n".join(
            printable(f"{i.finding.severity} {i.finding.code} {i.subject}{i.finding.message}")
            for i in group
        )
        broken = [i for i in group if i.finding.code in FILE_CODES]
        failed = [i for i in group if i.finding.severity is Severity.ERROR]
        if broken or failed:
            first = (broken or failed)[0].finding
            tag = "error" if broken else "failure"
            errors, failures = errors + bool(broken), failures + (not broken)
            element = ET.SubElement(case, tag, message=printable(first.message), type=first.code)
            element.text = text
        elif text:
            ET.SubElement(case, "system-out").text = text
    for element in (suites, suite):
        element.set("tests", str(len(cases)))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
    suite.set("skipped", "0")
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'

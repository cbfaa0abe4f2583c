"""Which files a command reads: paths and folders, minus what is excluded.

The rules follow ruff's: a folder is searched recursively for ``*.yaml``, ``*.yml`` and
``*.json`` (any case), leaving out the default excludes, ``--exclude`` patterns (gitignore
syntax, relative to the current folder) and what ``.gitignore`` files ignore. A file named on
the command line is read whatever its name, unless ``force_exclude`` is set (what pre-commit
hooks pass, because pre-commit names every file). Two kinds of files are no manifests and are
skipped by default: Helm templates (``templates/`` beside a ``Chart.yaml``) and kustomize
patches (files a ``kustomization.yaml`` in the same folder names as patches).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec
import yaml

from .sources import FileError, InputError

__all__ = ["DEFAULT_EXCLUDES", "STDIN", "Selection", "discover"]

STDIN = "-"
SUFFIXES = (".yaml", ".yml", ".json")
# Tools' and version control's folders, as ruff's default excludes (gitignore syntax).
DEFAULT_EXCLUDES = (
    ".git/",
    ".hg/",
    ".svn/",
    ".bzr/",
    ".venv/",
    "venv/",
    ".tox/",
    ".nox/",
    ".direnv/",
    "node_modules/",
    "site-packages/",
    "__pycache__/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
)
_KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")


@dataclass(frozen=True)
class Selection:
    """How paths become files; the CLI's flags of the same names."""

    exclude: tuple[str, ...] = ()
    default_excludes: bool = True
    respect_gitignore: bool = True
    force_exclude: bool = False
    stdin_filename: str = ""


def discover(paths: Sequence[str], selection: Selection) -> Iterator[str | FileError]:
    """The files to read, in order (``-`` for stdin), and a FileError per unreadable folder.

    A file reached twice (named, and inside a named folder) is read once.

    Raises:
        InputError: an empty path, or one that does not exist (usage errors: the command is
            wrong, not the repository).
    """
    for name in paths:
        if not name:
            raise InputError('an empty path ("") names no file: drop it, or use . for this folder')
        if name != STDIN and not os.path.lexists(name):
            raise InputError(f"{name}: no such file or directory")
    matcher = _Matcher(selection)
    seen: set[str] = set()
    for found in _found(paths, selection, matcher):
        if isinstance(found, str) and found != STDIN:
            key = os.path.realpath(found)
            if key in seen:
                continue
            seen.add(key)
        yield found


def _found(
    paths: Sequence[str], selection: Selection, matcher: _Matcher
) -> Iterator[str | FileError]:
    for name in paths:
        if name == STDIN:
            shown = selection.stdin_filename
            if not (selection.force_exclude and shown and matcher.excluded(shown, folder=False)):
                yield STDIN
        elif os.path.isdir(name):
            if not (selection.force_exclude and matcher.excluded(name, folder=True)):
                yield from _walk(name, matcher)
        elif not (selection.force_exclude and matcher.excluded(name, folder=False)):
            yield name


def _walk(top: str, matcher: _Matcher) -> Iterator[str | FileError]:
    files: list[str] = []
    errors: list[FileError] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            errors.append(FileError(folder, f"cannot list folder: {exc.strerror or exc}"))
            continue
        for entry in entries:
            path = entry.name if folder == os.curdir else os.path.join(folder, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):  # no symlinked folders: no loops
                    if not matcher.excluded(path, folder=True):
                        stack.append(path)
                elif (
                    entry.name.lower().endswith(SUFFIXES)
                    and entry.is_file()  # regular files (or links to them): no FIFOs, devices
                    and not matcher.excluded(path, folder=False)
                ):
                    files.append(path)
            except OSError as exc:
                errors.append(FileError(path, f"cannot read: {exc.strerror or exc}"))
    found: list[str | FileError] = [*files, *errors]
    yield from sorted(found, key=lambda f: Path(f if isinstance(f, str) else f.file).parts)


class _Matcher:
    """Exclude patterns, default excludes, ``.gitignore`` files, Helm and kustomize rules.

    What depends on a folder only (its ``.gitignore`` chain, whether it is inside a Helm
    ``templates/``, its kustomize patches) is worked out once per folder.
    """

    def __init__(self, selection: Selection):
        self.selection = selection
        patterns = [*(DEFAULT_EXCLUDES if selection.default_excludes else ()), *selection.exclude]
        self.patterns = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
        self.cwd = os.path.abspath(os.curdir)
        self.prefix = self.cwd.rstrip(os.sep) + os.sep
        self._patches: dict[str, frozenset[str]] = {}
        self._ignores: dict[str, list[tuple[str, pathspec.GitIgnoreSpec]]] = {}
        self._helm: dict[str, bool] = {}

    def excluded(self, path: str, *, folder: bool) -> bool:
        """Whether ``path`` (a folder if ``folder``) is left out."""
        absolute = os.path.abspath(path)
        slash = "/" if folder else ""
        if absolute.startswith(self.prefix):
            rel = absolute[len(self.prefix) :]
        else:
            rel = "" if absolute == self.cwd else absolute.lstrip(os.sep)
        patterns = self.patterns
        if rel and patterns is not None and patterns.match_file(rel.replace(os.sep, "/") + slash):
            return True
        parent = os.path.dirname(absolute)
        if self.selection.respect_gitignore:
            for base, spec in self._ignore_chain(parent):
                below = absolute[len(base) :].lstrip(os.sep).replace(os.sep, "/")
                include = spec.check_file(below + slash).include
                if include is not None:
                    if include:
                        return True
                    break
        if not self.selection.default_excludes:
            return False
        if self._in_helm_templates(absolute if folder else parent):
            return True
        if folder:
            return False
        if parent not in self._patches:
            self._patches[parent] = _patches(parent)
        return absolute in self._patches[parent]

    def _ignore_chain(self, folder: str) -> list[tuple[str, pathspec.GitIgnoreSpec]]:
        """The ``.gitignore`` specs that apply in ``folder``, deepest first, up to the repo root."""
        chain = self._ignores.get(folder)
        if chain is None:
            spec = _gitignore(folder)
            chain = [(folder, spec)] if spec is not None else []
            parent = os.path.dirname(folder)
            if parent != folder and not os.path.exists(os.path.join(folder, ".git")):
                chain = chain + self._ignore_chain(parent)
            self._ignores[folder] = chain
        return chain

    def _in_helm_templates(self, folder: str) -> bool:
        inside = self._helm.get(folder)
        if inside is None:
            parent = os.path.dirname(folder)
            inside = _helm_templates(folder) or (
                parent != folder and self._in_helm_templates(parent)
            )
            self._helm[folder] = inside
        return inside


def _ancestors(folder: str) -> Iterator[str]:
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _helm_templates(folder: str) -> bool:
    """Whether ``folder`` is a Helm chart's ``templates/``: no manifests until rendered."""
    return os.path.basename(folder) == "templates" and os.path.isfile(
        os.path.join(os.path.dirname(folder), "Chart.yaml")
    )


def _patches(folder: str) -> frozenset[str]:
    """The files a kustomization in ``folder`` names as patches (fragments, no manifests)."""
    for name in _KUSTOMIZATIONS:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as handle:
                data: Any = yaml.safe_load(handle.read(2**20))
        except (OSError, yaml.YAMLError, ValueError, RecursionError):  # 2024-02-30 is no date
            continue
        if not isinstance(data, dict):
            return frozenset()
        named: list[Any] = list(data.get("patchesStrategicMerge") or [])
        for key in ("patches", "patchesJson6902"):
            named += [p.get("path") for p in data.get(key) or [] if isinstance(p, dict)]
        return frozenset(
            os.path.normpath(os.path.join(folder, p)) for p in named if isinstance(p, str)
        )
    return frozenset()


def _gitignore(folder: str) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in (".gitignore", os.path.join(".git", "info", "exclude")):
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
                lines += handle.read(2**20).splitlines()
        except OSError:
            continue
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

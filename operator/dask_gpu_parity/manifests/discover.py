"""Which files a command reads: paths and folders, minus what is excluded.

The rules follow ruff's: a folder is searched recursively for ``*.yaml``, ``*.yml`` and
``*.json`` (any case), leaving out the default excludes, ``--exclude`` patterns (gitignore
syntax, relative to the current folder) and what ``.gitignore`` files ignore. A file named on
the command line is read whatever its name, unless ``force_exclude`` is set (what pre-commit
hooks pass, because pre-commit names every file). Two kinds of files are no manifests and are
skipped by default: Helm templates (``templates/`` beside a ``Chart.yaml``) and kustomize
patches (files a ``kustomization.yaml`` in the same folder names as patches).

Patterns are matched as git matches them (``gitignore.py``): a ``.gitignore`` line git accepts
never fails a walk, and an ``--exclude`` pattern that could match nothing is a usage error. A
``.json`` file a walk finds that is neither JSON nor YAML and names no ``apiVersion`` (a tool's
config with comments, such as ``tsconfig.json``) is no manifest: it is skipped with a notice
(DGP902); named on the command line, it is an error like any other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .gitignore import Spec, pattern_problem
from .kustomize import patch_files, read_regular
from .sources import INVALID, FileError, InputError, Source

__all__ = ["DEFAULT_EXCLUDES", "NOTICES", "STDIN", "Selection", "Walked", "discover", "skipped"]

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
SKIPPED = "DGP902"  # a file a walk found is no manifest (docs/findings.md)
NOTICES = frozenset({SKIPPED, "DGP903"})  # info findings about the walk, not failures
_GITIGNORE_LIMIT = 2**20


class Walked(str):
    """A file found by walking a folder, not named on the command line."""

    __slots__ = ()


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
        InputError: an empty path, one that does not exist, or an ``--exclude`` pattern that
            could match nothing (usage errors: the command is wrong, not the repository).
    """
    for pattern in selection.exclude:
        problem = pattern_problem(pattern)
        if problem:
            raise InputError(f'--exclude "{pattern}" cannot be used: {problem}')
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
            if not (selection.force_exclude and shown and matcher.named_excluded(shown, False)):
                yield STDIN
        elif os.path.isdir(name):
            if not (selection.force_exclude and matcher.named_excluded(name, True)):
                yield from _walk(name, matcher)
        elif not (selection.force_exclude and matcher.named_excluded(name, False)):
            yield name
        yield from matcher.drain()


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
                    files.append(Walked(path))
            except OSError as exc:
                errors.append(FileError(path, f"cannot read: {exc.strerror or exc}"))
    found: list[str | FileError] = [*files, *errors]
    yield from sorted(found, key=lambda f: Path(f if isinstance(f, str) else f.file).parts)


def skipped(name: str, source: Source, error: FileError) -> FileError | None:
    """The notice that replaces ``error`` when a walk found a file that is no manifest, or None.

    A ``.json`` file (any case) found by a walk that is neither JSON nor YAML and names no
    ``apiVersion`` is a tool's config (JSON with comments: ``tsconfig.json``,
    ``.vscode/settings.json``, ``devcontainer.json``), which ``kubectl apply -f`` could not apply
    either. Named on the command line, or with an ``apiVersion`` in it, it stays an error.
    """
    if not (
        isinstance(name, Walked)
        and error.code == INVALID
        and name.lower().endswith(".json")
        and "apiVersion" not in source.text
    ):
        return None
    message = (
        f"skipped: neither JSON nor YAML ({error.detail}) and no apiVersion, so no Kubernetes "
        "manifest (JSON with comments, as tools' configs are): name the file to check it anyway"
    )
    return FileError(error.file, message, code=SKIPPED, line=error.line)


class _Matcher:
    """Exclude patterns, default excludes, ``.gitignore`` files, Helm and kustomize rules.

    What depends on a folder only (its ``.gitignore`` chain, whether it is inside a Helm
    ``templates/``, its kustomize patches) is worked out once per folder.
    """

    def __init__(self, selection: Selection):
        self.selection = selection
        patterns = [*(DEFAULT_EXCLUDES if selection.default_excludes else ()), *selection.exclude]
        self.patterns = Spec.from_lines(patterns)
        self.cwd = os.path.abspath(os.curdir)
        self.prefix = self.cwd.rstrip(os.sep) + os.sep
        self._patches: dict[str, frozenset[str]] = {}
        self._ignores: dict[str, list[tuple[str, Spec]]] = {}
        self._helm: dict[str, bool] = {}
        self._notices: list[FileError] = []

    def drain(self) -> list[FileError]:
        """The notices gathered since the last call (kustomizations read in part)."""
        notices, self._notices = self._notices, []
        return notices

    def named_excluded(self, path: str, folder: bool) -> bool:
        """Whether a path named on the command line is left out: it, or a folder above it.

        A walk never enters a folder it leaves out; a named path needs its folders checked,
        those below the current folder.
        """
        absolute = os.path.abspath(path)
        if absolute.startswith(self.prefix):
            parts = absolute[len(self.prefix) :].split(os.sep)
            for depth in range(1, len(parts)):
                above = os.path.join(self.cwd, *parts[:depth])
                if self.excluded(above, folder=True):
                    return True
        return self.excluded(path, folder=folder)

    def excluded(self, path: str, *, folder: bool) -> bool:
        """Whether ``path`` (a folder if ``folder``) is left out, its folders being kept."""
        absolute = os.path.abspath(path)
        if absolute.startswith(self.prefix):
            rel = absolute[len(self.prefix) :]
        else:
            rel = "" if absolute == self.cwd else absolute.lstrip(os.sep)
        if rel and self.patterns.decide(_bytes(rel), folder=folder):
            return True
        parent = os.path.dirname(absolute)
        if self.selection.respect_gitignore:
            for base, spec in self._ignore_chain(parent):
                below = absolute[len(base) :].lstrip(os.sep)
                decided = spec.decide(_bytes(below), folder=folder)
                if decided is not None:
                    if decided:
                        return True
                    break
        if not self.selection.default_excludes:
            return False
        if self._in_helm_templates(absolute if folder else parent):
            return True
        if folder:
            return False
        if parent not in self._patches:
            found, notice = patch_files(parent, os.path.dirname(path))
            self._patches[parent] = found
            self._notices += [notice] if notice else []
        return absolute in self._patches[parent]

    def _ignore_chain(self, folder: str) -> list[tuple[str, Spec]]:
        """The ignore files that apply in ``folder``, deepest first, up to the repository root.

        At the root, ``.git/info/exclude`` comes after the root's ``.gitignore``, as in git.
        """
        chain = self._ignores.get(folder)
        if chain is None:
            chain = [(folder, s) for s in _gitignores(folder)]
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


def _bytes(rel: str) -> bytes:
    return os.fsencode(rel.replace(os.sep, "/"))


def _helm_templates(folder: str) -> bool:
    """Whether ``folder`` is a Helm chart's ``templates/``: no manifests until rendered."""
    return os.path.basename(folder) == "templates" and os.path.isfile(
        os.path.join(os.path.dirname(folder), "Chart.yaml")
    )


def _gitignores(folder: str) -> list[Spec]:
    """The folder's ``.gitignore`` and, at a repository's root, ``.git/info/exclude``.

    Read as git reads them: a ``.gitignore`` not through a symbolic link (git opens it
    ``O_NOFOLLOW``), neither ever blocking on a FIFO; a file that cannot be read counts as absent.
    """
    specs = []
    for name in (".gitignore", os.path.join(".git", "info", "exclude")):
        try:
            path = os.path.join(folder, name)
            data = read_regular(path, _GITIGNORE_LIMIT, follow=name != ".gitignore")
        except OSError:
            continue
        specs.append(Spec.from_bytes(data))
    return specs

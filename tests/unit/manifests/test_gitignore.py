"""A folder walk leaves out exactly what git ignores, whatever a .gitignore holds.

The oracle is git itself: `git check-ignore` (and `git ls-files --others --exclude-standard`) in
a temporary repository. The patterns are the hostile corners of git's rules
(https://git-scm.com/docs/gitignore, "PATTERN FORMAT"; git's wildmatch.c): git accepts every
line, and a line that cannot match (a lone `\\` or `!`, an unclosed `[`, an unknown
`[[:class:]]`) matches nothing, while `[z-a]` matches `z`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dask_gpu_parity.manifests import Selection, discover
from dask_gpu_parity.manifests.gitignore import Spec

# Names of folders (each holds m.yaml) and of files (NAME.yaml) in the test repository.
NAMES = [
    "a", "b", "z", "A", "ab", "ba", "1", "-", "!a", "#a", "a ", " a", "[", "]", "[a]", "*", "?",
    "\\", "!", "a[b", "x]", "[]", "a:]", "a-b", "é", "\x0b", "\x7f", "a\tb", "\\a", "a\\b",
]  # fmt: skip
PATTERNS = [
    # git accepts these; pattern libraries that compile to regular expressions often raise
    "[z-a]", "[z-a]*", "[b-a]*", "\\", "a\\", "!", "!!a", "[", "a[", "**/[", "[]", "[!]", "[^]",
    "[[:bogus:]]", "[[:alpha:]", "[[:]]", "a[[:]]", "[\\", "a[!", "/", "//", " ", "\\ ",
    # brackets as wildmatch reads them
    "[]]", "[]a]", "[!]a]", "[a-]", "[-a]", "[!a-]", "[\\]]", "[a-\\]]", "[a-c-e]", "[!-]",
    "[--0]", "[*]", "[?]", "[/]", "[!a]", "[^a]", "[é]",
    "[[:alpha:]]", "[[:digit:]]*", "[[:space:]]", "[[:cntrl:]]", "[[:punct:]]", "[[:graph:]]",
    "[[:print:]]*", "[[:upper:]]", "[[:lower:]]", "[[:blank:]]*", "[[:xdigit:]]", "[[:alnum:]]",
    # escapes, comments, negation, trailing spaces
    "\\!a", "\\#a", "#a", "!a", "a ", "a\\ ", "\\\\", "\\[a]", "\\*", "\\?", "\\a",
    # stars and slashes
    "*", "?", "a?", "**", "***", "**/", "a/**", "**/a/**", "!**", "a**", "**a", "a**/m.yaml",
    "*/m.yaml", "?/m.yaml", "/a", "a/", "/a/", "a/m.yaml", "a//", "*.yaml", "*.YAML", "é",
]  # fmt: skip
# Several lines: git's precedence (the last matching line wins; a folder left out cannot have
# files brought back; a deeper .gitignore wins over a higher one; .git/info/exclude comes last).
STACKS = [
    ("negation", {".gitignore": "*.yaml\n!a.yaml\n"}),
    ("negated-folder-contents", {".gitignore": "a/\n!a/m.yaml\n"}),
    ("negated-then-hostile", {".gitignore": "*.yaml\n![z-a].yaml\n!\\\n[\n"}),
    ("deeper-wins", {".gitignore": "m.yaml\n", "b/.gitignore": "!m.yaml\n"}),
    ("deeper-hostile", {".gitignore": "z/\n", "a/.gitignore": "[z-a]\n\\\n!\n"}),
    ("info-exclude-is-lowest", {".git/info/exclude": "*.yaml\n", ".gitignore": "!b.yaml\n"}),
    ("crlf", {".gitignore": "a.yaml\r\nb/\r\n"}),
    ("bom", {".gitignore": "\ufeffa.yaml\n"}),
    ("no-final-newline", {".gitignore": "a.yaml\nb.yaml"}),
    ("nul-ends-a-line", {".gitignore": "a.yaml\0junk\nb.yaml\n"}),
]


def _git(root: Path, *args: str, stdin: bytes = b"") -> bytes:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),  # no user's core.excludesFile
        "XDG_CONFIG_HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], input=stdin, env=env, capture_output=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    for name in NAMES:
        (root / name).mkdir()
        (root / name / "m.yaml").write_text("{}\n")
        (root / f"{name}.yaml").write_text("{}\n")
    monkeypatch.chdir(root)
    return root


def _compare(root: Path, ignores: dict[str, str]) -> None:
    for name, text in ignores.items():
        (root / name).write_bytes(text.encode())
    candidates = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.yaml") if ".git" not in p.parts
    )
    listing = b"".join(os.fsencode(c) + b"\0" for c in candidates)
    ignored = {
        os.fsdecode(p)
        for p in _git(root, "check-ignore", "-z", "--stdin", stdin=listing).split(b"\0")
    }
    untracked = {
        os.fsdecode(p)
        for p in _git(root, "ls-files", "-z", "--others", "--exclude-standard").split(b"\0")
    }
    expected = sorted(c for c in candidates if c not in ignored)
    assert expected == sorted(c for c in untracked if c.endswith(".yaml"))
    ours = sorted(str(f) for f in discover(["."], Selection(default_excludes=False)))
    assert ours == expected


@pytest.mark.parametrize("pattern", PATTERNS, ids=ascii)
def test_a_gitignore_line_selects_what_git_selects(repo: Path, pattern: str) -> None:
    _compare(repo, {".gitignore": pattern + "\n"})


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if "/" not in p.rstrip("/")], ids=ascii)
def test_a_gitignore_line_in_a_subfolder_selects_what_git_selects(repo: Path, pattern: str) -> None:
    _compare(repo, {"a/.gitignore": pattern + "\n", ".gitignore": "b.yaml\n"})


@pytest.mark.parametrize(("ignores"), [s[1] for s in STACKS], ids=[s[0] for s in STACKS])
def test_gitignore_precedence_is_gits(repo: Path, ignores: dict[str, str]) -> None:
    _compare(repo, ignores)


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("[z-a]", b"z", True),  # wildmatch reads the z before the reversed range
        ("[z-a]", b"a", False),
        ("?", "é".encode(), False),  # ? is one byte; é is two in UTF-8
        ("??", "é".encode(), True),
        ("\\", b"\\", False),  # a trailing backslash matches nothing
        ("[[:bogus:]]", b"b", False),
        ("a**/b", b"ab", True),  # git compares the literal "a" first, then matches "**/b"
    ],
)
def test_wildmatch_corners(pattern: str, name: bytes, matches: bool) -> None:
    assert Spec.from_lines([pattern]).decide(name, folder=False) is (True if matches else None)

"""The fast YAML path reads exactly what the exact reader (kubectl's reading) reads.

``manifests.parse`` sends a document to ``yaml-rs`` only when ``yaml11`` finds nothing in it
that go-yaml v2 (YAML 1.1, kubectl's reader) and YAML 1.2 read differently. Every test compares
the whole result (documents, their numbers and lines, the data, or the error message) with the
exact reader (libyaml's parser, go-yaml's decoding) reading the same text.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.manifests import InputError, Source, parse, yaml11
from tests.unit.helpers import EXAMPLES

pytestmark = pytest.mark.skipif(yaml11.yaml_rs is None, reason="yaml-rs is not installed")


def outcome(text: str, *, exact: bool) -> Any:
    source = Source("in.yaml", text)
    with pytest.MonkeyPatch.context() as patch:
        if exact:  # without yaml-rs, every piece takes the exact path
            patch.setattr(yaml11, "yaml_rs", None)
        try:
            docs = parse(source)
        except InputError as exc:
            return f"InputError: {exc}"
    return [(d.index, d.line, d.end, d.prefix, d.data) for d in docs]


def same(text: str) -> None:
    assert outcome(text, exact=False) == outcome(text, exact=True), text


def fast(text: str) -> bool:
    pieces = yaml11.split(text)
    assert pieces is not None
    return all(p.fast for p in pieces)


# Plain scalars that go-yaml v2 (YAML 1.1) and YAML 1.2 (yaml-rs) read differently, or that
# the exact reader refuses: each must keep its document off the fast path.
DIFFERENT = [
    "yes", "No", "ON", "off", "y", "Y", "n", "N", "0755", "012", "0o17", "1e3", "1E3", "1.0e3",
    "1:30",
    "2001-12-14", "2001-12-14 21:59:43.10 -5", "=", "<<", "-012", "+0755", "1_0:3",
    "+.5", "-.5", "-0o7", "+1e3", ".5e3", "-1E+3", "_1", "+_1", "._1", "_.5", "-__0",
]  # fmt: skip
# Scalars both read the same: common in manifests, they must stay on the fast path.
ALIKE = [
    "8786", "-1", "+12", "0", "0.5", "25.06", "1.10", "16Gi", "500m", "2k", "true", "False",
    "null", "~", "inf", "1.0", "-0", ".inf", "-.inf", ".nan", "yesterday", "no-op",
    "ghcr.io/x:25.06-cuda12.8",
    "tcp://scheduler:8786", "--port=8786", "dask-cuda-worker", "nvidia.com/gpu",
]  # fmt: skip


@pytest.mark.parametrize("scalar", DIFFERENT)
@pytest.mark.parametrize("form", ["k: {}\n", "- {}\n", "k: [a, {}]\n", "{}: v\n", "k: {{a: {}}}\n"])
def test_scalars_read_differently_take_the_exact_path(scalar: str, form: str) -> None:
    text = "apiVersion: v1\nspec:\n  " + form.format(scalar).replace("\n", "\n  ")
    assert not fast(text)
    same(text)


@pytest.mark.parametrize("scalar", ALIKE)
def test_scalars_read_alike_take_the_fast_path(scalar: str) -> None:
    text = f"apiVersion: v1\nspec:\n  k: {scalar}\n  l:\n  - {scalar}\n"
    assert fast(text)
    same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchors and aliases: the bomb check is PyYAML's
        "a: !!str 1\n",  # tags
        'a: "\\N\\_\\e"\n',  # escapes
        "a:\tb\n",  # tabs
        "a: b\r\nc: d\r\n",  # CRLF
        "a: x\u2028y\n",  # a YAML 1.1 line break
        "a: x\x85y\n",
        "a: \x01\n",  # not printable
        "a: \ufeffb\n",
        "? a\n: 1\n",  # complex key
        "- :\n",  # an empty key: PyYAML refuses it
        "k: [:]\n",  # indicators opening a flow scalar
        "k: [|, >]\n",
        "k: {?: 1}\n",
        "k: [a:]\n",  # a flow key with nothing after its colon
        "k: [a:?]\n",
        "k: |\nn: 1\n",  # empty block scalars: "" in YAML 1.1, a line break in 1.2 loaders
        "- >+\n",
        "k: |2\n\n",
        "[a]: 1\n",  # a flow collection as a key
        "{a: 1}: 2\n",
        "%YAML 1.1\n---\na: 1\n",  # directives
        "a: 1\n...\nb: 2\n",  # document end
    ],
)
def test_unusual_syntax_takes_the_exact_path(text: str) -> None:
    pieces = yaml11.split(text)
    assert pieces is None or not all(p.fast for p in pieces)
    same(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "# only a comment\n",
        "---\n",
        "---\n---\n",
        "a: 1\n---\n",
        "# c\n---\na: 1\n",
        "a: 1\n---\nb: 2\n---\n\n# trailing\n",
        "---\n# lead\n\napiVersion: v1\nkind: X\n",
        "--- # c\na: 1\n",
        "a: 1",  # no final line break
        "a: 1\nb:\n  - x\n  - y: 2\n    z: [1, 2, 'q']\n",
        "a: |\n  x\n\n  ---x\nb: >-\n  folded\n  text\n",
        "a: 'it''s'\nb: \"q\"\n'c': 1\n",
        "- a\n- b\n",  # a list: an error, the same one
        "just a string\n",
        "a: 1\nb: [\n",  # invalid YAML: the same message and line
        "a: 1\n---\nb: {\n",
        "a: 1\na: 2\n",  # duplicate keys: the last wins in both
        "kind: List\nitems:\n- kind: A\n- kind: B\n",
        '{"apiVersion": "v1", "kind": "X"}\n',  # JSON
        "a: \u00e9\u4e2d\U0001f600\n",  # beyond ASCII
        "true: a\n1: b\n1.0: c\n",  # yaml-rs makes one key of them: the exact path
        "a: 1\n---\n---\nb: 2\n",  # an empty document between two
        "\n\n---\na: 1\n",  # blank lines before the first marker: no document
        "a: 1\n--- # c\nb: 2\n",
        "a: 1\n---#c\nb: 2\n",  # kubectl cuts here too
        "a: 1\n--- b: 2\n",  # kubectl refuses the separator
        "a: 1\n----\n",
    ],
)
def test_documents_lines_and_errors_match(text: str) -> None:
    same(text)


def test_examples_and_their_stream_read_fast_and_alike() -> None:
    texts = [p.read_text() for p in sorted(EXAMPLES.glob("*.yaml"))]
    for text in [*texts, "---\n".join(texts)]:
        same(text)
    dask = [t for t in texts if "kind: Dask" in t]  # nodes.yaml quotes nothing, has a "*"
    assert len(dask) >= 5
    assert fast("---\n".join(dask))


# Generated: documents PyYAML writes in every style, and raw lines with risky plain scalars.
# A fifth of the profile's examples each, at least 100 (20,000 nightly): each reads its text twice.
_examples = settings(max_examples=max(100, settings.default.max_examples // 5))

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.sampled_from(DIFFERENT + ALIKE),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)
_keys = st.one_of(st.sampled_from(DIFFERENT + ALIKE), st.text(max_size=8))
_data = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@_examples
@given(
    docs=st.lists(st.dictionaries(_keys, _data, max_size=5), min_size=1, max_size=3),
    flow=st.sampled_from([None, False, True]),
    style=st.sampled_from([None, '"', "'", "|", ">"]),
    unicode=st.booleans(),
    start=st.booleans(),
    width=st.sampled_from([8, 80]),
)
def test_dumped_documents_read_alike(  # noqa: PLR0917 - one argument per strategy
    docs: list[dict[Any, Any]],
    flow: bool | None,
    style: str | None,
    unicode: bool,
    start: bool,
    width: int,
) -> None:
    text = yaml.safe_dump_all(
        docs,
        default_flow_style=flow,
        default_style=style,
        allow_unicode=unicode,
        explicit_start=start,
        width=width,
    )
    same(text)


_plain = st.sampled_from([
    *DIFFERENT, *ALIKE, "12.4.1", "1,000", "0x", "a", "a b", "a: b", "-", "- x", "#", "a #c",
    "'q'", '"q"', "[x]", "{x: 1}", "", "|", ">-", "[:]", "[a:]", "{?: 1}", "[a, |]",
])  # fmt: skip
_line = st.tuples(st.integers(0, 3), st.sampled_from(["", "- ", "k: ", "- k: ", "? "]), _plain)


@_examples
@given(st.lists(_line | st.sampled_from([(0, "---", ""), (0, "# c", "")]), max_size=12))
def test_raw_lines_read_alike(lines: list[tuple[int, str, str]]) -> None:
    same("".join(" " * (2 * indent) + lead + plain + "\n" for indent, lead, plain in lines))

"""Cases for the differential test of the manifest reader against kubectl.

Every case is one file whose objects are ConfigMaps named after the case (``c00042``, items
``c00042-0`` ...) in namespace ``default``, so that kubectl maps them (``--dry-run=client`` still
asks the API server for the REST mapping) and prints them unchanged.
"""

from __future__ import annotations

import json

import yaml
from hypothesis import strategies as st

__all__ = ["HAND_PICKED", "case", "hand_picked", "header"]


def header(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"


# Plain scalars kubectl (go-yaml v2) and YAML 1.2 or PyYAML read differently, numbers at the
# edges of int64, uint64 and float64, and strings that merely look like them.
TOKENS = [
    "y", "Y", "n", "N", "yes", "No", "ON", "off", "true", "False", "null", "~", "", "0o1", "0O17",
    "0o-17", "0755", "08", "0x1F", "-0x1f", "0b101", "0b", "0x", "1_000", "_1", "+_1", "1__0",
    "1_", "1e3", "1E0", "1.0", "1.", ".5", "+.5", "-.5", ".5_0", "._5", "1e21", "1e20", "-0",
    "+0", "0.1", "1e-7", "123456789.0", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
    "18446744073709551616", "1" * 25, "1" * 400, "1e400", ".inf", "-.Inf", ".nan", "+.nan",
    "NaN", "inf", "1:30", "2026-01-15", "2024-02-30", "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10", "=", "<<", "16Gi", "500m", "1.10", "12.4.1", "0.30000000000000004",
]  # fmt: skip
_TAGS = ["!!int", "!!float", "!!bool", "!!null", "!!str", "!!timestamp", "!custom", "!"]

_scalar = st.one_of(
    st.sampled_from(TOKENS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
)
_key = st.one_of(st.sampled_from(TOKENS), st.text(min_size=1, max_size=6), st.integers(-9, 99))
_tree = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_key, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _dumped(draw: st.DrawFn, name: str) -> str:
    """An object PyYAML writes in some style: it leaves plain what PyYAML reads as a string."""
    obj = yaml.safe_load(header(name))
    obj["spec"] = draw(_tree)
    return str(
        yaml.safe_dump(
            obj,
            default_flow_style=draw(st.sampled_from([None, False, True])),
            default_style=draw(st.sampled_from([None, None, '"', "'"])),
            allow_unicode=draw(st.booleans()),
            width=draw(st.sampled_from([12, 80])),
        )
    )


@st.composite
def _lines(draw: st.DrawFn, name: str) -> str:
    """Raw lines under ``spec``: plain, quoted, tagged, flow and block, often invalid."""
    token = st.sampled_from(TOKENS).map(lambda t: t or "''")
    tagged = st.tuples(st.sampled_from(_TAGS), st.sampled_from(TOKENS)).map(
        lambda p: f"{p[0]} '{p[1]}'" if p[1] and p[1][0] in "-?:" else f"{p[0]} {p[1]}"
    )
    value = st.one_of(
        token,
        tagged,
        token.map(lambda t: f'"{t}"'),
        st.lists(token, max_size=3).map(lambda x: f"[{', '.join(x)}]"),
        st.lists(st.tuples(token, token), max_size=2).map(
            lambda x: "{" + ", ".join(f"{k}: {v}" for k, v in x) + "}"
        ),
    )
    lines = draw(
        st.lists(
            st.tuples(st.integers(1, 2), st.sampled_from(["k: ", "- ", "- k: "]), token, value),
            min_size=1,
            max_size=6,
        )
    )
    body = "".join(
        f"{'  ' * indent}{lead.replace('k', key or 'k')}{val}\n" for indent, lead, key, val in lines
    )
    return header(name) + "spec:\n" + body


@st.composite
def _merged(draw: st.DrawFn, name: str) -> str:
    """Anchors, aliases and merge keys in go-yaml's order of precedence."""
    a = draw(st.dictionaries(st.sampled_from("abc"), st.sampled_from(TOKENS[:20]), max_size=3))
    b = draw(st.dictionaries(st.sampled_from("abc"), st.sampled_from(TOKENS[:20]), max_size=3))
    own = draw(st.dictionaries(st.sampled_from("abc"), st.sampled_from(TOKENS[:20]), max_size=2))

    def flow(d: dict[str, str]) -> str:
        return "{" + ", ".join(f"{k}: {v or '~'}" for k, v in d.items()) + "}"

    merge = draw(st.sampled_from(["*a", "[*a, *b]", "[*b, *a]", flow(b), "*s", "[*a, 1]"]))
    before = draw(st.booleans())
    keys = [f"  <<: {merge}\n", *(f"  {k}: {v or '~'}\n" for k, v in own.items())]
    if not before:
        keys.reverse()
    return (
        header(name) + f"base: &a {flow(a)}\nother: &b {flow(b)}\nlist: &s [1]\n"
        "spec:\n" + "".join(keys)
    )


@st.composite
def _json(draw: st.DrawFn, name: str) -> str:
    """A JSON object whose numbers are written in JSON's every form, and some that are none."""
    numbers = st.sampled_from(
        ["1E0", "1e0", "-0", "0.0", "1.5", "1e21", "1e400", "12345678901234567890", "01", "-1e-7"]
    )
    picked = draw(st.lists(numbers, min_size=1, max_size=4))
    obj = yaml.safe_load(header(name))
    obj["spec"] = {f"n{i}": f"@{i}@" for i in range(len(picked))}
    text = json.dumps(obj, indent=draw(st.sampled_from([None, 2])))
    for i, number in enumerate(picked):
        text = text.replace(f'"@{i}@"', number)
    return text


def case(index: int) -> st.SearchStrategy[tuple[str, str]]:
    """One generated case: (file name, text); ``index`` names it."""
    name = f"c{index:05d}"
    kind = st.sampled_from([_dumped, _dumped, _lines, _lines, _merged, _json])
    return kind.flatmap(lambda k: k(name)).map(
        lambda text: (name + (".json" if text.startswith("{") else ".yaml"), text)
    )


# (what it is, text with {h} for the header of case {n})
HAND_PICKED: list[tuple[str, str]] = [
    ("env value shaped like a date", "{h}data:\n  value: 2026-01-15\n"),
    ("date that is no date", "{h}data:\n  value: 2024-02-30\n"),
    ("integer over 4,300 digits", "{h}spec:\n  v: " + "1" * 4301 + "\n"),
    ("tagged int kubectl cannot decode", "{h}spec:\n  v: !!int '0o-17'\n"),
    ("octal GPU count", "{h}spec:\n  nvidia.com/gpu: 0o1\n"),
    ("JSON exponent", '{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{n}", '
     '"namespace": "default"}}, "spec": {{"gpu": 1E0, "big": 12345678901234567890}}}}'),
    ("JSON overflow", '{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{n}", '
     '"namespace": "default"}}, "spec": {{"x": 1e400}}}}'),
    ("JSON overflow, then no JSON", '{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": '
     '{{"name": "{n}", "namespace": "default"}}, "spec": {{"x": 1e400, "y": 01}}}}'),
    ("JSON stream", '{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{n}", '
     '"namespace": "default"}}}}\n{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": '
     '{{"name": "{n}-1", "namespace": "default"}}}}\n'),
    ("JSON that is YAML (leading zero)", '{{"apiVersion": "v1", "kind": "ConfigMap", '
     '"metadata": {{"name": "{n}", "namespace": "default"}}, "spec": {{"x": 010}}}}'),
    ("JSON then YAML", '{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "{n}", '
     '"namespace": "default"}}}}\n---\n' + header("{n}-1")),
    ("typed list, items without kind", "apiVersion: v1\nkind: ConfigMapList\nitems:\n"
     "- metadata: {{name: {n}-0, namespace: default}}\n  data: {{a: b}}\n"),
    ("List", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n"
     "  metadata: {{name: {n}-0, namespace: default}}\n"),
    ("list with items null", "apiVersion: v1\nkind: List\nitems:\n"),
    ("list with items not a list", "apiVersion: v1\nkind: List\nitems: 5\n"),
    ("list item null",
     "apiVersion: v1\nkind: ConfigMapList\nitems: [null, {{metadata: {{name: {n}-1}}}}]\n"),
    ("list inside a list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n"
     "  items:\n  - apiVersion: v1\n    kind: ConfigMap\n"
     "    metadata: {{name: {n}-0, namespace: default}}\n"),
    ("separator with a comment", "--- # first\n{h}---   #x\n" + header("{n}-1")),
    ("separator glued to a comment", "---#x\n{h}"),
    ("four dashes", "{h}----\n" + header("{n}-1")),
    ("separator with content", "{h}--- a: 1\n"),
    ("document end then more", "{h}...\nignored: [\n---\n" + header("{n}-1")),
    ("directive", "%YAML 1.1\n---\n{h}"),
    ("CRLF", "{h}spec:\n  a: yes\n".replace("\n", "\r\n")),
    ("CR only", "{h}spec:\n  a: yes\n---\n".replace("\n", "\r") + header("{n}-1")),
    ("tab in value", "{h}spec:\n  a:\tb\n"),
    ("escaped slash", '{h}spec:\n  a: "\\/"\n'),
    ("escaped single quote", "{h}spec:\n  a: \"\\'\"\n"),
    ("float keys", "{h}spec:\n  1.5: a\n  123456789.0: b\n  1e3: c\n  .inf: d\n  0.1: e\n"),
    ("null key", "{h}spec:\n  ~: a\n"),
    ("uint64 key", "{h}spec:\n  18446744073709551615: a\n"),
    ("bool and int keys", "{h}spec:\n  yes: a\n  1: b\n  0x10: c\n  y: d\n"),
    ("duplicate keys", "{h}spec:\n  a: 1\n  a: 2\n"),
    ("merge after keys", "{h}base: &b {{a: 1, b: 1}}\nspec:\n  a: 0\n  <<: *b\n  b: 2\n"),
    ("merge list precedence", "{h}x: &x {{a: 1}}\ny: &y {{a: 2, b: 2}}\nspec:\n  <<: [*x, *y]\n"),
    ("merge of a scalar", "{h}spec:\n  <<: 5\n"),
    ("quoted merge key", "{h}spec:\n  '<<': {{a: 1}}\n"),
    ("tagged merge key", "{h}spec:\n  !!merge <<: {{a: 1}}\n"),
    ("redefined anchor", "{h}a: &x 1\nb: &x 2\nspec: *x\n"),
    ("recursive alias", "{h}spec: &x [*x]\n"),
    ("unknown alias", "{h}spec: *nowhere\n"),
    ("excessive aliasing", "{h}x: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
     + "".join(f"y{i}: *x\n" for i in range(120))),
    ("aliases under go-yaml's ratio", "{h}x: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
     + "".join(f"y{i}: *x\n" for i in range(60))),
    ("binary", "{h}spec:\n  a: !!binary aGVsbG8=\n  b: !!binary /w==\n"),
    ("timestamps", "{h}spec:\n  a: !!timestamp 2024-02-29\n  b: !!timestamp 2001-12-14 21:59:43\n"),
    ("bad timestamp", "{h}spec:\n  a: !!timestamp 2024-02-30\n"),
    ("float tag on int", "{h}spec:\n  a: !!float 1\n  b: !!float 0x10\n"),
    ("collection tags", "{h}spec:\n  a: !!str {{b: 1}}\n  c: !!map [1]\n  d: !foo {{e: 1}}\n"),
    ("non-specific tag", "{h}spec:\n  a: ! 12\n  b: ! '12'\n"),
    ("empty block scalars", "{h}spec:\n  a: |\n  b: >-\n"),
    ("NaN value", "{h}spec:\n  a: .nan\n"),
    ("huge and tiny floats", "{h}spec:\n  a: 1e308\n  b: 1e-320\n  c: 4.9e-324\n"),
]  # fmt: skip


def hand_picked() -> list[tuple[str, str, str]]:
    """(file name, text, description) of every hand-picked case."""
    out = []
    for i, (what, text) in enumerate(HAND_PICKED):
        name = f"h{i:05d}"
        filled = text.format(h=header(name), n=name)
        out.append((name + (".json" if filled.lstrip().startswith("{") else ".yaml"), filled, what))
    return out

"""DNS-1123 names and qualified names: the one rule flags, admission, pod validation and
the downward API's subscripts read."""

from __future__ import annotations

import pytest

from kubelet.api import is_qualified_name, qualified_name_errors


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("app", True),
        ("example.com/MyName", True),
        ("my.name", True),
        ("-app", False),
        ("app\n", False),  # a trailing newline is no part of a name ($ would have let it by)
        ("Example.com/name", False),  # the prefix is a lowercase subdomain
        ("a/b/c", False),
        ("/name", False),
        ("x" * 63, True),
        ("x" * 64, False),
    ],
)
def test_qualified_names(value: str, ok: bool) -> None:
    assert is_qualified_name(value) is ok
    assert (qualified_name_errors(value) == []) is ok


def test_qualified_name_messages_are_upstreams() -> None:
    assert qualified_name_errors("/x") == ["prefix part must be non-empty"]
    assert qualified_name_errors("a/") == [
        "name part must be non-empty",
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
        "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]

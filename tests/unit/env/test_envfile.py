"""The env file format of ``fileKeyRef``: upstream's ParseEnv cases, and bash agreeing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kubelet.env import MAX_ENV_FILE_BYTES
from kubelet.env.envfile import EnvFileFormatError, env_file_value, file_key_path_error

# (content, key, value): files upstream's parser reads, and what it gives for the key
VALID = [
    ("   KEY1='val1'\n\t\tKEY2='val2'\nKEY3='val3'\n", "KEY2", "val2"),
    ("# comment\n\nKEY1='foo'\n   # another comment\n\nKEY2='bar'\n", "KEY2", "bar"),
    ("KEY1='foo'\nKEY2='bar'\n", "KEY3", ""),
    ("KEY1='foo#notcomment'\n", "KEY1", "foo#notcomment"),
    ("KEY1='   foo bar   '\n", "KEY1", "   foo bar   "),
    ("KEY1='foo'\nKEY2=''\nKEY3='bar'\n", "KEY2", ""),
    ("KEY1='foo=bar=baz'\n", "KEY1", "foo=bar=baz"),
    ("KEY1='foo'\nKEY2='bar' # comment\n", "KEY2", "bar"),
    ("KEY1='bar'   \t\n", "KEY1", "bar"),
    ("KEY1='$VAR ${HOME} $(X) `id`'\n", "KEY1", "$VAR ${HOME} $(X) `id`"),
    ("KEY1='value with \"nested\" quotes'\n", "KEY1", 'value with "nested" quotes'),
    ("KEY1='path\\\\to\\\\file\\n'\n", "KEY1", "path\\\\to\\\\file\\n"),
    (
        "KEY1='line one\n  line two\n\nline four'\nKEY2='x'\n",
        "KEY1",
        "line one\n  line two\n\nline four",
    ),
    ("KEY1='a\n# not a comment\nb'\n", "KEY1", "a\n# not a comment\nb"),
    ("KEY1='中文 Español 🌍'\n", "KEY1", "中文 Español 🌍"),
    ("KEY1= 'val1'\nKEY2='b'\n", "KEY1", ""),  # a blank after '=' assigns ""
    ("KEY1= 'val1'\nKEY2='b'\n", "KEY2", "b"),
    ("KEY1='no newline at the end'", "KEY1", "no newline at the end"),
    ("", "KEY1", ""),
]

# where upstream's parser and bash part ways, upstream's answer
UPSTREAM_ONLY = [
    ("KEY1='first'\nKEY1='second'\n", "KEY1", "first"),  # it stops at the first
    ("KEY1='crlf'\r\nKEY2='two'\r\n", "KEY2", "two"),  # Go's scanner drops the \r
    ("export KEY1='x'\n", "KEY1", ""),  # the name is "export KEY1"
]


@pytest.mark.parametrize(("content", "key", "value"), VALID + UPSTREAM_ONLY)
def test_valid_files(content: str, key: str, value: str) -> None:
    assert env_file_value(content.encode(), key) == value


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize(("content", "key", "value"), VALID)
def test_bash_reads_the_same_value(tmp_path: Path, content: str, key: str, value: str) -> None:
    """The format's promise: ``set -a; . file`` in POSIX bash gives the same value."""
    env = tmp_path / "file.env"
    env.write_text(content)
    script = f'set -a && . "{env}" && printf %s "${{{key}}}"'
    shown = subprocess.run(
        ["bash", "--posix", "-c", script], capture_output=True, check=True, timeout=10, env={}
    )
    assert shown.stdout.decode() == value


@pytest.mark.parametrize(
    ("content", "key", "message"),
    [
        ("KEY1='foo'\nINVALID_LINE\nKEY2='bar'\n", "KEY2", "at line 2: missing '='"),
        ("='foo'\nKEY2='bar'\n", "KEY2", "at line 1: empty variable name"),
        ("KEY1 = 'val1'\nKEY2='val2'\n", "KEY2", "at line 1: whitespace before '=' is not allowed"),
        ("KEY1='foo'\nKEY2=bar\n", "KEY2", "at line 2: value must be enclosed in single quotes"),
        ('KEY2="bar"\n', "KEY2", "at line 1: value must be enclosed in single quotes"),
        ("KEY2=\n", "KEY2", "at line 1: value must be enclosed in single quotes"),
        ("KEY1='foo''bar'\n", "KEY1", "at line 1: unexpected content after closing quote"),
        ("KEY1='foo'baz\n", "KEY1", "at line 1: unexpected content after closing quote"),
        ("KEY1='it\\'s'\n", "KEY1", "at line 1: unexpected content after closing quote"),
        ("KEY1='a\nb' c\n", "KEY1", "at line 2: unexpected content after closing quote"),
        ("KEY1='foo'\nKEY2='bar\nKEY3='baz'\n", "KEY2", "at line 3: unexpected content"),
        ("KEY1='open\nno close\n", "KEY1", "starting at line 1: unclosed single quote"),
    ],
)
def test_invalid_files(content: str, key: str, message: str) -> None:
    with pytest.raises(EnvFileFormatError, match=r"^invalid environment variable format") as info:
        env_file_value(content.encode(), key)
    assert message in str(info.value)


def test_errors_after_the_key_are_not_seen() -> None:
    """Upstream stops reading at the key's assignment."""
    assert env_file_value(b"KEY1='x'\nthis is not an env file\n", "KEY1") == "x"
    with pytest.raises(EnvFileFormatError):
        env_file_value(b"KEY1='x'\nthis is not an env file\n", "KEY2")


def test_size_limits() -> None:
    line = b"KEY1='" + b"v" * (MAX_ENV_FILE_BYTES - 8) + b"'\n"
    assert len(line) == MAX_ENV_FILE_BYTES
    assert env_file_value(line, "KEY1") == "v" * (MAX_ENV_FILE_BYTES - 8)
    with pytest.raises(EnvFileFormatError, match="larger than 65536 bytes"):
        env_file_value(line + b"#", "KEY1")
    with pytest.raises(EnvFileFormatError, match="token too long"):  # Go's line limit
        env_file_value(line[:-1] + b"#", "KEY1")


def test_invalid_utf8_is_replaced() -> None:
    assert env_file_value(b"K='a\xffb'\n", "K") == "a\ufffdb"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("config.env", None),
        ("dir/./config.env", None),
        ("..config", None),
        ("/etc/shadow", 'invalid path "/etc/shadow" in FileKeyRef: must be a relative path'),
        ("../x", "invalid path \"../x\" in FileKeyRef: must not contain '..'"),
        ("a/../../x", "invalid path \"a/../../x\" in FileKeyRef: must not contain '..'"),
    ],
)
def test_path_checks(path: str, message: str | None) -> None:
    assert file_key_path_error(path) == message

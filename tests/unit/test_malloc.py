"""glibc's allocator as the kubelet tunes it: one arena, free pages handed back."""

from __future__ import annotations

from kubelet import malloc


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad, None))
        return 1


def test_one_malloc_arena_unless_the_operator_chose() -> None:
    libc = _Libc()
    assert malloc.limit_malloc_arenas(libc, environ={})
    assert libc.calls == [("mallopt", malloc.M_ARENA_MAX, 1)]
    assert not malloc.limit_malloc_arenas(libc, environ={"MALLOC_ARENA_MAX": "4"})
    assert len(libc.calls) == 1
    assert not malloc.limit_malloc_arenas(object(), environ={})  # not glibc


def test_the_arena_limit_reaches_glibc() -> None:
    """The real call: glibc accepts the parameter (mallopt answers 1)."""
    assert malloc.limit_malloc_arenas(environ={})


def test_the_heap_trim_reaches_glibc_where_there_is_one() -> None:
    libc = _Libc()
    trim = malloc.heap_trimmer(libc)
    assert trim is not None
    assert trim() == 1
    assert libc.calls == [("malloc_trim", 0, None)]
    assert malloc.heap_trimmer(object()) is None  # not glibc: nothing to call
    real = malloc.heap_trimmer()
    assert real is not None and real() in (0, 1)

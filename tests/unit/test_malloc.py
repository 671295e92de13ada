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


async def test_the_heap_is_trimmed_in_a_worker_thread() -> None:
    libc = _Libc()
    trim = malloc.heap_trim_in_thread(libc)
    assert trim is not None
    assert await trim() == 1
    assert libc.calls == [("malloc_trim", 0, None)]
    assert malloc.heap_trimmer(object()) is None  # not glibc: nothing to call
    assert malloc.heap_trim_in_thread(object()) is None


async def test_the_real_trim_reaches_glibc() -> None:
    trim = malloc.heap_trim_in_thread()
    assert trim is not None
    assert await trim() in (0, 1)

"""Set an ``SSLContext``'s whole list of key-exchange groups (Python 3.11 sets only one).

``ssl.SSLContext.set_ecdh_curve`` narrows a context to a single curve; upstream's
``tlsCurvePreferences`` is a list. OpenSSL's ``SSL_CTX_set1_groups_list`` takes one, so it
is called through ctypes on the context's ``SSL_CTX``, looked up in the very ``_ssl``
module (and so the very libssl) Python uses. The pointer is CPython's first field after
the object header; before using it, :func:`ssl_ctx_pointer` checks that OpenSSL reads the
same options from it as Python does, and refuses (None) otherwise, so a Python whose
layout differs gets a clear start-up error rather than a write to the wrong place.
"""

from __future__ import annotations

import ctypes
import ssl
from collections.abc import Sequence

_SSL_CTRL_SET_GROUPS_LIST = 92
"""``SSL_CTRL_SET_GROUPS_LIST`` (ssl.h, stable since OpenSSL 1.1.0)."""


class GroupsUnsupported(Exception):
    """This Python or OpenSSL cannot set the list asked for."""


def _libssl() -> ctypes.CDLL | None:
    try:
        import _ssl

        lib = ctypes.CDLL(_ssl.__file__)
        lib.SSL_CTX_get_options.restype = ctypes.c_uint64
        lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_ctrl.restype = ctypes.c_long
        lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p]
    except (OSError, AttributeError, ImportError):
        return None
    return lib


def ssl_ctx_pointer(context: ssl.SSLContext, lib: ctypes.CDLL) -> int | None:
    """The context's ``SSL_CTX *``, or None when it cannot be confirmed to be one."""
    address = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not address:
        return None
    if lib.SSL_CTX_get_options(address) != context.options:
        return None
    return int(address)


def set_groups(context: ssl.SSLContext, groups: Sequence[str]) -> None:
    """Offer and accept exactly ``groups`` (OpenSSL's names, in preference order), in
    TLS 1.2 and TLS 1.3. Raises :class:`GroupsUnsupported` when it cannot."""
    if not groups:
        return
    lib = _libssl()
    pointer = ssl_ctx_pointer(context, lib) if lib is not None else None
    if lib is None or pointer is None:
        if len(groups) == 1:
            context.set_ecdh_curve(_ECDH_NAMES.get(groups[0], groups[0]))
            return
        raise GroupsUnsupported("this Python's ssl module can set only one curve")
    if lib.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_GROUPS_LIST, 0, ":".join(groups).encode()) != 1:
        raise GroupsUnsupported(f"{ssl.OPENSSL_VERSION} refused the groups {':'.join(groups)}")


def supported(group: str) -> bool:
    """Whether this OpenSSL knows ``group`` (tried on a throwaway context)."""
    try:
        set_groups(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), [group])
    except (GroupsUnsupported, ValueError, ssl.SSLError):
        return False
    return True


_ECDH_NAMES = {"P-256": "prime256v1", "P-384": "secp384r1", "P-521": "secp521r1"}
"""``set_ecdh_curve`` takes OpenSSL's object names, not the TLS group aliases."""

"""``/logs/``: the node's log files and the node log query, as upstream's kubelet serves them.

With ``enableSystemLogHandler`` (and the debugging handlers) ``/logs/<path>`` serves the
files and directory listings under ``/var/log`` like Go's ``http.FileServer``, except that
a symlink is followed only while it stays inside ``/var/log`` (upstream's file server
follows any). With ``enableSystemLogQuery`` and the NodeLogQuery gate, ``/logs/?query=``
is the node log query: ``query`` (a service, or a file when it holds a ``/``), ``sinceTime``,
``untilTime``, ``tailLines``/``tail``, ``boot``, ``pattern``/``grep``, validated with
upstream's messages. A service is read from the journal (``journalctl``) when journald
knows it, else from ``/var/log/<svc>``, ``/var/log/<svc>.log`` or
``/var/log/<svc>/<svc>.log``, whichever exists first (no options allowed then).
"""

from __future__ import annotations

import datetime
import functools
import mimetypes
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from urllib.parse import quote

import attrs
import trio

from kubelet.boundedio import in_thread
from kubelet.volumes import UnsafeSubPath, open_in_volume

from .asgi import NOT_FOUND, Request, Response, StreamResponse, Write, http_error, text

__all__ = ["NodeLogs"]

NODE_LOG_DIR = "/var/log"
MAX_TAIL_LINES = 100_000
MAX_SERVICE_LENGTH = 256
MAX_SERVICES = 4
QUERY_DEADLINE = 30.0
"""Seconds one query may run (upstream's deadline across the journal and the files)."""
CHUNK = 64 * 1024
_UNSAFE = re.compile(r"[^a-zA-Z\-_.:0-9@]+")


@attrs.frozen
class Query:
    """One node log query (upstream's nodeLogQuery)."""

    services: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    tail_lines: int | None = None
    boot: int | None = None
    pattern: str = ""

    def has_options(self) -> bool:
        return any(
            (
                self.since,
                self.until,
                self.tail_lines is not None,
                self.boot is not None,
                self.pattern,
            )
        )


def _go_value(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[]string{" + ", ".join(f'"{v}"' for v in value) + "}"
    return str(value)


def invalid(field: str, value: object, detail: str) -> str:
    """apimachinery's field.Invalid, as printed."""
    return f"{field}: Invalid value: {_go_value(value)}: {detail}"


def aggregate(errors: Sequence[str]) -> str:
    """field.ErrorList.ToAggregate().Error()."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _rfc3339(value: str) -> datetime.datetime | None:
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _int(name: str, value: str, errors: list[str]) -> int | None:
    try:
        return int(value)
    except ValueError:
        errors.append(invalid(name, value, f'strconv.Atoi: parsing "{value}": invalid syntax'))
        return None


def parse_query(query: Mapping[str, list[str]]) -> tuple[Query | None, list[str]]:
    """The query of ``/logs/?...`` (None: no query parameter at all) and its errors."""
    errors: list[str] = []
    files: list[str] = []
    services: list[str] = []
    for q in query.get("query", []):
        if "/" in q or "\\" in q:
            files.append(q)
        elif q.strip():
            services.append(q)
    if "query" in query and not files and not services:
        errors.append(invalid("query", query["query"], "query cannot be empty"))

    def one(*names: str) -> str:
        for name in names:
            values = query.get(name)
            if values and values[0]:
                return values[0]
        return ""

    since = until = None
    if value := one("sinceTime"):
        since = _rfc3339(value)
        if since is None:
            errors.append(invalid("sinceTime", value, "invalid time format"))
    if value := one("untilTime"):
        until = _rfc3339(value)
        if until is None:
            errors.append(invalid("untilTime", value, "invalid time format"))
    boot = _int("boot", value, errors) if (value := one("boot")) else None
    tail = _int("tailLines", value, errors) if (value := one("tailLines", "tail")) else None
    parsed = Query(tuple(services), tuple(files), since, until, tail, boot, one("pattern", "grep"))
    if errors:
        return None, errors
    return (None if parsed == Query() else parsed), []


def validate(q: Query, log_dir: str) -> list[str]:
    """upstream's nodeLogQuery.validate."""
    errors = [
        invalid("query", s, "length must be less than 100")
        if len(s) > MAX_SERVICE_LENGTH
        else invalid("query", s, "input contains unsafe characters")
        for s in q.services
        if len(s) > MAX_SERVICE_LENGTH or _UNSAFE.search(s)
    ]
    if len(q.services) > MAX_SERVICES:
        errors.append(f"query: Too many: {len(q.services)}: must have at most {MAX_SERVICES} items")
    if not q.files and not q.services:
        errors.append("query: Required value: cannot be empty with options")
    elif q.files and q.services:
        value = f"[{' '.join(q.files)}], [{' '.join(q.services)}]"
        errors.append(invalid("query", value, "cannot specify a file and service"))
    elif len(q.files) > 1:
        errors.append(invalid("query", list(q.files), "cannot specify more than one file"))
    elif q.files and q.has_options():
        errors.append(invalid("query", list(q.files), "cannot specify file with options"))
    elif q.files:
        problem = _stat_problem(log_dir, q.files[0])
        if problem:
            errors.append(invalid("query", list(q.files), problem))
    if q.since and q.until and q.since > q.until:
        errors.append(invalid("untilTime", q.until.isoformat(), "must be after `sinceTime`"))
    if q.boot is not None and q.boot > 0:
        errors.append(invalid("boot", q.boot, "must be less than 1"))
    if q.tail_lines is not None and not 0 <= q.tail_lines <= MAX_TAIL_LINES:
        detail = f"must be between 0 and {MAX_TAIL_LINES}, inclusive"
        errors.append(invalid("tailLines", q.tail_lines, detail))
    if q.pattern:
        try:
            re.compile(q.pattern)
        except re.error as exc:
            errors.append(invalid("pattern", q.pattern, f"error parsing regexp: {exc}"))
    return errors


def _stat_problem(log_dir: str, name: str) -> str:
    try:
        os.close(open_in_volume(log_dir, name, create=False))
    except (UnsafeSubPath, OSError) as exc:
        return f"stat {os.path.join(log_dir, name.lstrip('/'))}: {exc}"
    return ""


def journal_args(q: Query, services: Sequence[str]) -> list[str]:
    """upstream's journalctl command line for a query (dateLayout "2006-1-2 15:4:5")."""

    def stamp(t: datetime.datetime) -> str:
        t = t.astimezone(datetime.UTC)
        return f"{t.year}-{t.month}-{t.day} {t.hour}:{t.minute}:{t.second}"

    args = ["journalctl", "--utc", "--no-pager", "--output=short-precise"]
    if q.since is not None:
        args.append(f"--since={stamp(q.since)}")
    if q.until is not None:
        args.append(f"--until={stamp(q.until)}")
    if q.tail_lines is not None:
        args += ["--pager-end", f"--lines={q.tail_lines}"]
    args += [f"--unit={s}" for s in services if s]
    if q.pattern:
        args.append(f"--grep={q.pattern}")
    if q.boot is not None:
        args += ["--boot", str(q.boot)]
    return args


@attrs.define
class NodeLogs:
    """The ``/logs/`` handler of one server."""

    log_dir: str = attrs.field(factory=lambda: NODE_LOG_DIR)
    query_enabled: bool = False
    """enableSystemLogQuery and the NodeLogQuery gate."""
    journalctl: str | None = attrs.field(factory=lambda: shutil.which("journalctl"))

    async def handle(self, request: Request) -> Response | StreamResponse:
        rel = request.path.removeprefix("/logs")
        if self.query_enabled:
            q, errors = parse_query(request.query)
            if errors:
                return http_error(400, aggregate(errors))
            if q is not None:
                if rel not in ("", "/"):
                    return http_error(406, "path not allowed in query mode")
                errors = await in_thread(lambda: validate(q, self.log_dir))
                if errors:
                    return http_error(406, aggregate(errors))
                if q.services:
                    return StreamResponse(200, lambda write: self._services(q, write))
                rel = "/" + q.files[0].lstrip("/")
        return await self._file_server(rel)

    # -- files --

    async def _file_server(self, rel: str) -> Response | StreamResponse:
        """Go's http.FileServer over the log directory, symlinks kept inside it."""
        if rel.endswith("/index.html"):
            return Response(301, b"", headers=(("Location", "./"),))
        try:
            fd = await in_thread(lambda: open_in_volume(self.log_dir, rel, create=False))
        except (UnsafeSubPath, OSError):
            return http_error(404, NOT_FOUND)
        try:
            info = os.fstat(fd)
            is_dir = stat.S_ISDIR(info.st_mode)
            name = rel.rstrip("/").rsplit("/", 1)[-1]
            if is_dir and not rel.endswith("/"):
                return Response(301, b"", headers=(("Location", f"{name}/"),))
            if not is_dir and rel.endswith("/"):
                return Response(301, b"", headers=(("Location", f"../{name}"),))
            if is_dir:
                listing = await in_thread(lambda: _dir_list(fd))
                return Response(200, listing, "text/html; charset=utf-8")
            if not stat.S_ISREG(info.st_mode):
                return http_error(404, NOT_FOUND)
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(fd)
        kind = mimetypes.guess_type(rel)[0] or "text/plain; charset=utf-8"
        return StreamResponse(200, lambda write: _copy_fd(reader, write), kind)

    # -- services --

    async def _services(self, q: Query, write: Write) -> None:
        with trio.move_on_after(QUERY_DEADLINE):
            native: list[str] = []
            files: list[str] = []
            for service in q.services:
                (native if await self._in_journal(service) else files).append(service)
            if native:
                await self._journal(journal_args(q, native), write)
            if files and q.has_options():
                await write(
                    f"\noptions present and query resolved to log files for [{' '.join(files)}]"
                    "\ntry without specifying options\n".encode()
                )
                return
            for service in files:
                await self._service_file(service, write)

    async def _in_journal(self, service: str) -> bool:
        if self.journalctl is None:
            return False
        try:
            result = await trio.run_process(
                [self.journalctl, "--field", "_SYSTEMD_UNIT"],
                capture_stdout=True,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        except OSError:
            return False
        unit = service if "." in service else f"{service}.service"
        return result.returncode == 0 and unit.encode() in result.stdout

    async def _journal(self, args: list[str], write: Write) -> None:
        assert self.journalctl is not None
        try:
            process = await trio.lowlevel.open_process(
                [self.journalctl, *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError:
            await write(b"\nerror: journal output not available\n")
            return
        try:
            assert process.stdout is not None
            async for chunk in process.stdout:
                await write(bytes(chunk))
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()

    async def _service_file(self, service: str, write: Write) -> None:
        for candidate in (service, f"{service}.log", f"{service}/{service}.log"):
            try:
                fd = await in_thread(
                    functools.partial(open_in_volume, self.log_dir, candidate, create=False)
                )
            except UnsafeSubPath as exc:
                if "does not exist" in str(exc):
                    continue
                await write(f"\nerror getting log for {service}: {exc}\n".encode())
                return
            except OSError as exc:
                await write(f"\nerror getting log for {service}: {exc}\n".encode())
                return
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue  # /var/log/<svc> may be its directory
                reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
            finally:
                os.close(fd)
            await _copy_fd(reader, write)
            return
        await write(f"\nlog not found for {service}\n".encode())


async def _copy_fd(fd: int, write: Write) -> None:
    """The file to its end as it is now, read in a worker thread chunk by chunk."""
    try:
        while True:
            chunk = await in_thread(lambda: os.read(fd, CHUNK))
            if not chunk:
                return
            await write(chunk)
    finally:
        os.close(fd)


_GO_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
"""Go's FileServer escapes names in a listing with these five (its ``htmlReplacer``)."""


def _dir_list(fd: int) -> bytes:
    """Go's FileServer directory listing (sorted, directories with a trailing slash)."""
    reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        names = sorted(os.listdir(reader))
        lines = ['<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n']
        for name in names:
            try:
                mode = os.stat(name, dir_fd=reader, follow_symlinks=False).st_mode
            except OSError:
                continue
            shown = name + "/" if stat.S_ISDIR(mode) else name
            href, text = quote(shown).translate(_GO_HTML), shown.translate(_GO_HTML)
            lines.append(f'<a href="{href}">{text}</a>\n')
        lines.append("</pre>\n")
        return "".join(lines).encode()
    finally:
        os.close(reader)


def disabled(message: str) -> Response:
    """upstream's getHandlerForDisabledEndpoint: 405 with the message."""
    return text(405, message)

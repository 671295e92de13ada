"""Static pod manifests: decode (YAML or JSON), default and validate, with line numbers.

A manifest someone wrote by hand deserves an error that points at the line:
``/etc/kubernetes/manifests/web.yaml:12: spec.containers[0].ports[0].containerPort:
expected an integer, got str 'x'``. So the YAML is composed into nodes first (they keep
their marks) and every error's field path is looked up in that tree.

YAML 1.1 traps are closed here rather than passed on: plain ``yes``/``no``/``on``/``off``
and timestamps stay strings, and so do plain floats (``1.10`` stays ``"1.10"``, quantities
like ``0.5`` stay exact; an integer field given ``1.5`` is an error, as upstream's JSON
decoder would say). Integers keep YAML 1.1's ``0755`` octal, which is what file modes mean.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import Any

import attrs
import yaml
import yaml.nodes

from kubelet.api import (
    Container,
    HTTPGetAction,
    LifecycleHandler,
    Pod,
    Probe,
    Toleration,
    WireError,
    converter,
    from_wire,
    to_wire,
)
from kubelet.cri import imageref, labels

from .errors import ManifestError
from .limits import (
    MAX_CONFIG_LENGTH,
    Budget,
    check_json_cost,
    measure_json,
    measure_yaml,
    too_deep,
    too_large,
)
from .validation import (
    DEFAULT_VALIDATION,
    PodValidationOptions,
    UnknownVolumeError,
    api_object_reference,
    static_pod_priority_warning,
    validate_pod,
)

__all__ = ["MAX_CONFIG_LENGTH", "Loaded", "ManifestError", "load_manifest", "load_pod", "too_large"]

DEFAULT_NAMESPACE = "default"


@attrs.frozen
class Loaded:
    """What one manifest gave: its pods (defaulted, validated) and warnings to show."""

    pods: tuple[Pod, ...]
    warnings: tuple[str, ...] = ()


# -- YAML without the 1.1 surprises -----------------------------------------------------------


class _Loader(yaml.CSafeLoader):
    """LibYAML's fast parser and the safe constructor, with only these plain-scalar types:
    null, true/false and integers; everything else stays a string."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class registry


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(
        r"^(?:[-+]?0b[01_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|0o[0-7]+)$"
    ),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


@attrs.frozen
class _Document:
    data: Any
    root: yaml.nodes.Node | None
    warnings: tuple[str, ...] = ()


def _line(mark: Any) -> int | None:
    return int(mark.line) + 1 if mark is not None else None


def _compose(data: bytes, path: str, budget: Budget) -> _Document:
    """Decode the first document; JSON that LibYAML will not take falls back to ``json``.

    The events are counted first (see :mod:`.limits`): nothing is built for a manifest
    past the bounds, and what follows the first document is never built at all.
    """
    warnings: list[str] = []
    loader = _Loader(data)
    try:
        shape = measure_yaml(loader, path, budget)
        loader.dispose()
        loader = _Loader(data)
        root = loader.get_node() if loader.check_node() else None
        if root is None:
            raise ManifestError(path, None, "empty manifest")
        budget.check("composing the YAML")
        if shape.extra_document_line is not None:
            warnings.append(
                f"{path}:{shape.extra_document_line}: only the first YAML document is used "
                "(one pod per manifest)"
            )
        elif shape.unparsable_rest:
            warnings.append(f"{path}: ignoring unparsable YAML after the first document")
        warnings.extend(_duplicate_keys(root, path))
        value = loader.construct_document(root)
        budget.check("constructing the YAML")
    except yaml.MarkedYAMLError as exc:
        fallback = _try_json(data, path, budget)
        if fallback is not None:
            return fallback
        reason = f"YAML syntax error: {exc.problem}"
        if exc.context:
            reason += f" ({exc.context}, line {_line(exc.context_mark)})"
        raise ManifestError(path, _line(exc.problem_mark), reason) from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, None, f"YAML error: {exc}") from None
    except RecursionError:
        raise ManifestError(path, None, too_deep()) from None
    finally:
        loader.dispose()
    return _Document(value, root, tuple(warnings))


def _try_json(data: bytes, path: str, budget: Budget) -> _Document | None:
    if data.lstrip()[:1] not in (b"{", b"["):
        return None
    check_json_cost(data, path)
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ManifestError(path, exc.lineno, f"JSON syntax error: {exc.msg}") from None
    except UnicodeDecodeError:
        return None
    measure_json(value, path)
    budget.check("decoding the JSON")
    return _Document(value, None)


def _duplicate_keys(root: yaml.nodes.Node, path: str) -> list[str]:
    """Warn about duplicate keys: upstream silently takes the last; so do we, but say so.

    Each node is visited once, in document order (an alias shares its anchor's node); the
    counting pass already refused alias cycles, bombs and nesting deeper than the stack.
    """
    warnings: list[str] = []
    visited: set[int] = set()

    def visit(node: yaml.nodes.Node) -> None:
        if id(node) in visited:
            return
        visited.add(id(node))
        if isinstance(node, yaml.nodes.MappingNode):
            keys: set[str] = set()
            for k, v in node.value:
                if isinstance(k, yaml.nodes.ScalarNode) and k.value != "<<":
                    if k.value in keys:
                        warnings.append(
                            f"{path}:{_line(k.start_mark)}: duplicate key {k.value!r}; "
                            "the last one is used"
                        )
                    keys.add(k.value)
                visit(k)
                visit(v)
        elif isinstance(node, yaml.nodes.SequenceNode):
            for item in node.value:
                visit(item)

    visit(root)
    return warnings


_PATH_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")


def line_of(root: yaml.nodes.Node | None, field_path: str) -> int | None:
    """The line of ``field_path`` (``spec.containers[0].image``) or of its nearest parent."""
    if root is None:
        return None
    node: yaml.nodes.Node = root
    line = _line(root.start_mark)
    for match in _PATH_TOKEN.finditer(field_path):
        token = match.group(1) if match.group(1) is not None else match.group(2)
        if isinstance(node, yaml.nodes.MappingNode):
            found = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, yaml.nodes.ScalarNode) and k.value == token
                ),
                None,
            )
            if found is None:
                break
            line, node = _line(found[0].start_mark), found[1]
        elif (
            isinstance(node, yaml.nodes.SequenceNode)
            and token.isdigit()
            and int(token) < len(node.value)
        ):
            node = node.value[int(token)]
            line = _line(node.start_mark)
        else:
            break
    return line


# -- decoding ---------------------------------------------------------------------------------


def _check_kind(doc: _Document, path: str, allowed: tuple[str, ...]) -> str:
    data = doc.data
    if not isinstance(data, Mapping):
        raise ManifestError(
            path,
            line_of(doc.root, ""),
            f"expected an object (a Pod manifest), got {type(data).__name__}",
        )
    kind, version = data.get("kind"), data.get("apiVersion")
    if not kind:
        raise ManifestError(path, line_of(doc.root, ""), "kind: Object 'Kind' is missing")
    if not version:
        raise ManifestError(
            path, line_of(doc.root, ""), "apiVersion: Object 'apiVersion' is missing"
        )
    if version != "v1":
        raise ManifestError(
            path,
            line_of(doc.root, "apiVersion"),
            f"apiVersion: no kind {json.dumps(str(kind))} is registered for version "
            f"{json.dumps(str(version))}",
        )
    if kind not in allowed:
        wanted = " or ".join(allowed)
        hint = (
            " (one pod per file; a PodList is read only from a manifest URL)"
            if kind == "PodList"
            else ""
        )
        raise ManifestError(
            path, line_of(doc.root, "kind"), f"kind: expected {wanted}, got {kind!r}{hint}"
        )
    return str(kind)


def _structure(cls: type[Any], data: Any, doc: _Document, path: str, prefix: str = "") -> Any:
    try:
        return from_wire(cls, data)
    except WireError as exc:
        field = f"{prefix}.{exc.path}" if prefix and exc.path else prefix or exc.path
        raise ManifestError(
            path, line_of(doc.root, field), str(WireError(field, exc.message))
        ) from None


def decode_pod(data: bytes, path: str) -> Pod:
    """One Pod, exactly as written (no defaults): for tests and tools."""
    doc = _compose(_checked_size(data, path), path, Budget(path))
    _check_kind(doc, path, ("Pod",))
    pod: Pod = _structure(Pod, doc.data, doc, path)
    return pod


def _checked_size(data: bytes, path: str) -> bytes:
    if len(data) > MAX_CONFIG_LENGTH:
        raise ManifestError(path, None, too_large(len(data)))
    return data


def load_manifest(
    data: bytes,
    source: str,
    *,
    node_name: str,
    is_file: bool,
    allow_list: bool = False,
    budget: Budget | None = None,
    validation: PodValidationOptions = DEFAULT_VALIDATION,
) -> Loaded:
    """Decode, default and validate the pods of one manifest (all-or-nothing for a list).

    ``source`` is the file path or the URL: it names the manifest in errors and salts
    the generated UIDs. A PodList is accepted only with ``allow_list`` (the URL source).
    ``validation``: what a pod may hold under the kubelet's gates.
    CPU-bound and bounded (see :mod:`.limits`): the sources call it off the event loop.
    """
    try:
        return _load_manifest(
            data, source, node_name, is_file, allow_list, budget or Budget(source), validation
        )
    except RecursionError:
        raise ManifestError(source, None, too_deep()) from None


def _load_manifest(
    data: bytes,
    source: str,
    node_name: str,
    is_file: bool,
    allow_list: bool,
    budget: Budget,
    validation: PodValidationOptions,
) -> Loaded:
    doc = _compose(_checked_size(data, source), source, budget)
    kind = _check_kind(doc, source, ("Pod", "PodList") if allow_list else ("Pod",))
    warnings = list(doc.warnings)
    if kind == "Pod":
        raws: list[tuple[str, Any]] = [("", doc.data)]
    else:
        items = doc.data.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(
                source,
                line_of(doc.root, "items"),
                f"items: expected a list, got {type(items).__name__}",
            )
        raws = [(f"items[{i}]", raw) for i, raw in enumerate(items)]
    pods = []
    for prefix, raw in raws:
        pod, warning = _load_one(
            raw, doc, source, prefix, node_name=node_name, is_file=is_file, validation=validation
        )
        budget.check(f"defaulting and validating {prefix or 'the pod'}")
        pods.append(pod)
        if warning:
            warnings.append(warning)
    return Loaded(tuple(pods), tuple(warnings))


def _load_one(
    raw: Any,
    doc: _Document,
    source: str,
    prefix: str,
    *,
    node_name: str,
    is_file: bool,
    validation: PodValidationOptions,
) -> tuple[Pod, str | None]:
    def at(field: str) -> str:
        return f"{prefix}.{field}" if prefix else field

    pod: Pod = _structure(Pod, raw, doc, source, prefix)
    if not pod.metadata.name:
        raise ManifestError(
            source, line_of(doc.root, at("metadata")), "invalid pod: name is needed for the pod"
        )
    pod = apply_api_defaults(apply_static_defaults(pod, source, node_name, is_file))
    errors = validate_pod(pod, validation)
    if errors:
        reason = "invalid pod: " + "; ".join(str(e) for e in errors)
        raise ManifestError(source, line_of(doc.root, at(errors[0].path)), reason)
    try:
        resource = api_object_reference(raw)
    except UnknownVolumeError as exc:
        raise ManifestError(source, line_of(doc.root, at("spec.volumes")), str(exc)) from None
    if resource:
        raise ManifestError(
            source, line_of(doc.root, at("spec")), f"static pods may not reference {resource}"
        )
    warning = static_pod_priority_warning(pod.spec)
    if warning:
        warning = f"{source}: {warning}"
    return pod, warning


_WARM_UP = b"""\
apiVersion: v1
kind: Pod
metadata: {name: warm-up}
spec:
  containers: [{name: c, image: "warm-up:1"}]
"""


def warm_up(conv: Any = converter) -> None:
    """Build, at start-up, what decoding a pod builds on first use (one small manifest
    through YAML, defaults and validation; the converter's code for every type a pod is
    made of, which ``cattrs`` generates lazily): about 10 ms that would otherwise fall on
    the first pod a user starts."""
    # twice: cattrs empties its cache of hooks each time it builds a mapping's (those
    # it keeps apart), so the second pass finds the rest again and keeps them all
    for _ in range(2):
        for plain in (list, dict, str, int, bool, float):  # free-form fields' values
            conv.get_unstructure_hook(plain)
        seen: set[Any] = set()
        todo: list[Any] = [Pod]
        while todo:
            tp = todo.pop()
            if tp in seen or tp is type(None) or tp is Ellipsis:
                continue
            seen.add(tp)
            conv.get_structure_hook(tp)
            if attrs.has(tp):
                todo += [f.type for f in attrs.fields(attrs.resolve_types(tp))]
                conv.get_unstructure_hook(tp)  # a tuple's items are looked up by class
            todo += typing.get_args(tp)
    if conv is converter:
        load_manifest(_WARM_UP, "warm-up", node_name="warm-up", is_file=True)


def load_pod(data: bytes, source: str, *, node_name: str, is_file: bool = True) -> Pod:
    """The one pod of a manifest file, defaulted and validated (warnings dropped)."""
    return load_manifest(data, source, node_name=node_name, is_file=is_file).pods[0]


# -- defaulting -------------------------------------------------------------------------------

_FNV128_OFFSET = 0x6C62272E07BB014262B821756295C58D
_FNV128_PRIME = 0x0000000001000000000000000000013B
_MASK128 = (1 << 128) - 1


def fnv1a_128(data: bytes) -> int:
    """FNV-1a, 128 bits (upstream's hash for static pod UIDs)."""
    h, prime, mask = _FNV128_OFFSET, _FNV128_PRIME, _MASK128  # locals: a fifth off per byte
    for byte in data:
        h = (h ^ byte) * prime & mask
    return h


def static_pod_uid(pod: Pod, source: str, node_name: str, is_file: bool) -> str:
    """Hex FNV-1a-128 over the pod as decoded (canonical JSON) and where it came from.

    The dump is of the pod *before* any defaulting and omits empty fields, so a kubelet
    upgrade that learns new defaults or fields does not change the UIDs (and so does not
    restart) pods whose manifests did not change.
    """
    dump = json.dumps(to_wire(pod), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    salt = f"host:{node_name}file:{source}" if is_file else f"url:{source}"
    return f"{fnv1a_128(dump.encode() + salt.encode()):032x}"


_STATIC_TOLERATION = Toleration(operator="Exists", effect="NoExecute")


def apply_static_defaults(pod: Pod, source: str, node_name: str, is_file: bool) -> Pod:
    """Upstream's applyDefaults for file/http pods (steps 1–7 of its defaulting)."""
    uid = pod.metadata.uid or static_pod_uid(pod, source, node_name, is_file)
    meta = attrs.evolve(
        pod.metadata,
        uid=uid,
        name=f"{pod.metadata.name}-{node_name.lower()}",
        namespace=pod.metadata.namespace or DEFAULT_NAMESPACE,
        annotations={**pod.metadata.annotations, labels.CONFIG_HASH: uid},
    )
    tolerations = pod.spec.tolerations
    if is_file:
        tolerations = _add_or_update_toleration(tolerations, _STATIC_TOLERATION)
    spec = attrs.evolve(pod.spec, node_name=node_name, tolerations=tolerations)
    status = attrs.evolve(pod.status, phase="Pending")
    return attrs.evolve(pod, metadata=meta, spec=spec, status=status)


def _add_or_update_toleration(
    existing: tuple[Toleration, ...], new: Toleration
) -> tuple[Toleration, ...]:
    def matches(t: Toleration) -> bool:
        return (t.key, t.operator, t.value, t.effect) == (
            new.key,
            new.operator,
            new.value,
            new.effect,
        )

    if any(matches(t) for t in existing):
        return tuple(new if matches(t) else t for t in existing)
    return (*existing, new)


def apply_api_defaults(pod: Pod) -> Pod:
    """The v1 API defaults a manifest relies on (what the API server would have filled in)."""
    spec = pod.spec
    containers = tuple(_container_defaults(c, bool(spec.host_network)) for c in spec.containers)
    inits = tuple(_container_defaults(c, bool(spec.host_network)) for c in spec.init_containers)
    volumes = tuple(v if _has_source(v) else attrs.evolve(v, empty_dir={}) for v in spec.volumes)
    spec = attrs.evolve(
        spec,
        containers=containers,
        init_containers=inits,
        volumes=volumes,
        restart_policy=spec.restart_policy or "Always",
        dns_policy=spec.dns_policy or "ClusterFirst",
        termination_grace_period_seconds=(
            30
            if spec.termination_grace_period_seconds is None
            else spec.termination_grace_period_seconds
        ),
        scheduler_name=spec.scheduler_name or "default-scheduler",
        enable_service_links=True
        if spec.enable_service_links is None
        else spec.enable_service_links,
    )
    return attrs.evolve(pod, spec=spec)


def _has_source(volume: Any) -> bool:
    return any(
        getattr(volume, f.name) is not None for f in attrs.fields(type(volume)) if f.name != "name"
    )


def default_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or untagged images, else ``IfNotPresent`` (upstream rule)."""
    try:
        _, _, tag, digest = imageref.split_reference(image)
    except ValueError:
        return "IfNotPresent"
    if not tag and not digest:
        tag = imageref.DEFAULT_TAG
    return "Always" if tag == imageref.DEFAULT_TAG else "IfNotPresent"


def _container_defaults(ctr: Container, host_network: bool) -> Container:
    ports = tuple(
        attrs.evolve(
            p,
            protocol=p.protocol or "TCP",
            host_port=p.container_port if host_network and not p.host_port else p.host_port,
        )
        for p in ctr.ports
    )
    resources = ctr.resources
    if resources is not None and resources.limits:
        requests = {**resources.limits, **resources.requests}
        resources = attrs.evolve(resources, requests=requests)
    lifecycle = ctr.lifecycle
    if lifecycle is not None:
        lifecycle = attrs.evolve(
            lifecycle,
            post_start=_handler_defaults(lifecycle.post_start),
            pre_stop=_handler_defaults(lifecycle.pre_stop),
        )
    return attrs.evolve(
        ctr,
        ports=ports,
        resources=resources,
        lifecycle=lifecycle,
        liveness_probe=_probe_defaults(ctr.liveness_probe),
        readiness_probe=_probe_defaults(ctr.readiness_probe),
        startup_probe=_probe_defaults(ctr.startup_probe),
        image_pull_policy=ctr.image_pull_policy or default_pull_policy(ctr.image),
        termination_message_path=ctr.termination_message_path or "/dev/termination-log",
        termination_message_policy=ctr.termination_message_policy or "File",
    )


def _http_defaults(action: HTTPGetAction | None) -> HTTPGetAction | None:
    if action is None:
        return None
    return attrs.evolve(action, path=action.path or "/", scheme=action.scheme or "HTTP")


def _handler_defaults(handler: LifecycleHandler | None) -> LifecycleHandler | None:
    if handler is None:
        return None
    return attrs.evolve(handler, http_get=_http_defaults(handler.http_get))


def _probe_defaults(probe: Probe | None) -> Probe | None:
    """Zero means "not set" for these probe fields upstream, so zero gets the default."""
    if probe is None:
        return None
    return attrs.evolve(
        probe,
        http_get=_http_defaults(probe.http_get),
        timeout_seconds=probe.timeout_seconds or 1,
        period_seconds=probe.period_seconds or 10,
        success_threshold=probe.success_threshold or 1,
        failure_threshold=probe.failure_threshold or 3,
    )

"""What each verb does to an object: the API server's registry strategies, in small.

The store (``apistore``) keeps and versions objects; this module decides what a create,
update, patch or delete means for a kind, the way upstream's ``pkg/registry`` does:

* create: the namespace must exist; ``generateName``; a name is required (422) and must
  be a DNS subdomain; ``resourceVersion`` must not be set (500, as upstream); pods get
  upstream's main defaults and ``status`` reset to Pending with a QoS class, and the
  service account's ``imagePullSecrets`` when the pod names none (ServiceAccount
  admission's part a kubelet sees); namespaces start Active.
* update/patch of the main resource keeps the old ``status`` (pods, nodes, namespaces,
  services); of ``/status`` changes only ``status``. A stale ``resourceVersion`` is 409
  "the object has been modified"; a ``metadata.uid`` that differs is a failed UID
  precondition (409). ``generation`` moves when ``spec`` changes. Deletion fields are
  the server's: an update cannot set or clear them.
* delete: preconditions (uid, resourceVersion) checked; a pod on a node with a grace
  period > 0 (from the options, else ``terminationGracePeriodSeconds``, default 30)
  only gets ``deletionTimestamp``/``deletionGracePeriodSeconds`` and stays until
  deleted with grace 0; a second delete can only shorten the grace. Unscheduled or
  finished pods go at once. Objects with finalizers stay (with a deletionTimestamp)
  until an update removes the last one. Deleting a namespace deletes what is in it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from kubelet.api import SUBDOMAIN_RE, parse_quantity
from kubelet.api.dnsname import LABEL_RE
from kubelet.goformat import rfc3339

from .apiauth import ISSUER, ApiAuth
from .apierrors import StatusError
from .apiresources import ResourceType, by_kind
from .apistore import ApiStore, Obj, clone, meta, rv_of
from .patching import PatchError, apply_patch

__all__ = ["Registry", "rfc3339"]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DELETION_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds")
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _precondition_failed(what: str, wanted: Any, have: Any) -> StatusError:
    return StatusError(
        409,
        f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {have}",
        reason="Conflict",
    )


class Registry:
    """Verb semantics over an ApiStore. ``now`` is the fake's wall clock in epoch seconds."""

    def __init__(self, store: ApiStore, auth: ApiAuth, now: Callable[[], float]) -> None:
        self.store = store
        self.auth = auth
        self.now = now
        self._generated = 0

    # -- create -----------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        keep_identity: bool = False,
    ) -> Obj:
        """POST. ``keep_identity`` (test helpers only): a given uid and creationTimestamp
        are kept and a resourceVersion ignored, so a test can set up known objects."""
        obj = self._body(rt, body)
        m = obj.setdefault("metadata", {})
        if rt.namespaced:
            if m.get("namespace") and namespace and m["namespace"] != namespace:
                raise StatusError.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            m["namespace"] = namespace or m.get("namespace") or "default"
            self._require_namespace(m["namespace"])
        if not m.get("name") and m.get("generateName"):
            m["name"] = self._generate_name(str(m["generateName"]))
        self._validate_name(rt, m)
        kept = {k: m[k] for k in ("uid", "creationTimestamp") if keep_identity and m.get(k)}
        if keep_identity:
            m.pop("resourceVersion", None)
        if m.get("resourceVersion"):
            raise StatusError(500, "resourceVersion should not be set on objects to be created")
        for field in ("uid", "creationTimestamp", "generation", *_DELETION_FIELDS):
            m.pop(field, None)
        m["creationTimestamp"] = rfc3339(self.now())
        m.update(kept)
        self._prepare_for_create(rt, obj)
        if dry_run:
            return obj
        return self.store.create(rt, obj)

    def _prepare_for_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.kind == "Pod":
            _default_pod(obj)
            self._service_account_pull_secrets(obj)
            obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj.get("spec") or {})}
        elif rt.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])

    def _service_account_pull_secrets(self, pod: Obj) -> None:
        """The one step of the ServiceAccount admission plugin a kubelet can see: a pod
        created without ``imagePullSecrets`` gets its service account's (mirror pods
        excepted). The rest of that plugin (defaulting ``serviceAccountName``, the token
        volume, refusing a missing account) is not modelled."""
        m = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        if _MIRROR_ANNOTATION in (m.get("annotations") or {}) or spec.get("imagePullSecrets"):
            return
        name = str(spec.get("serviceAccountName") or "default")
        account = self.store.get(by_kind("ServiceAccount"), str(m.get("namespace", "")), name)
        refs = (account or {}).get("imagePullSecrets") or []
        if refs:
            spec["imagePullSecrets"] = [{"name": str((r or {}).get("name", ""))} for r in refs]

    def _generate_name(self, prefix: str) -> str:
        self._generated += 1
        n, suffix = self._generated, ""
        for _ in range(5):
            n, digit = divmod(n * 7919 + 13, len(_GENERATE_ALPHABET))
            suffix += _GENERATE_ALPHABET[digit]
        return prefix + suffix

    def _validate_name(self, rt: ResourceType, m: Mapping[str, Any]) -> None:
        name = m.get("name")
        if not name:
            raise StatusError.invalid(
                rt.kind, "", "metadata.name", "Required value: name or generateName is required"
            )
        if rt.kind == "CertificateSigningRequest":
            # path-segment names (upstream's bootstrap names are base64url: upper case, _)
            if not isinstance(name, str) or name in (".", "..") or "/" in name or "%" in name:
                raise StatusError.invalid(
                    rt.kind, str(name), "metadata.name",
                    f'Invalid value: "{name}": may not contain \'/\' or \'%\'',
                )  # fmt: skip
            return
        pattern = LABEL_RE if rt.kind == "Namespace" else SUBDOMAIN_RE
        if not isinstance(name, str) or len(name) > 253 or not pattern.fullmatch(name):
            err = StatusError.invalid(
                rt.kind,
                str(name),
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
            err.details["causes"][0]["reason"] = "FieldValueInvalid"
            raise err

    def _require_namespace(self, namespace: str) -> None:
        ns = by_kind("Namespace")
        if self.store.get(ns, "", namespace) is None:
            raise StatusError.not_found("namespaces", namespace)

    def _body(self, rt: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise StatusError.bad_request(f"the body of the request is not a {rt.kind} object")
        kind, version = body.get("kind"), body.get("apiVersion")
        if kind and kind != rt.kind:
            raise StatusError.bad_request(
                f"the kind in the body ({kind}) does not match the resource ({rt.kind})"
            )
        if version and version != rt.api_version:
            raise StatusError.bad_request(
                f"the API version in the data ({version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        return clone(body)

    # -- update and patch -------------------------------------------------------------

    def update(
        self, rt: ResourceType, namespace: str, name: str, body: Any, *, subresource: str = ""
    ) -> tuple[int, Obj]:
        """PUT. Returns (200, object), or (201, object) for a create-on-update kind."""
        obj = self._body(rt, body)
        m = obj.setdefault("metadata", {})
        if m.get("name") and m["name"] != name:
            raise StatusError.bad_request(
                f"the name of the object ({m['name']}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and m.get("namespace") and m["namespace"] != namespace:
            raise StatusError.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        m["name"] = name
        if rt.namespaced:
            m["namespace"] = namespace
        old = self.store.get(rt, namespace, name)
        if old is None:
            if rt.create_on_update and not subresource:
                m.pop("resourceVersion", None)
                return 201, self.create(rt, namespace, obj)
            raise StatusError.not_found(rt.plural, name, rt.group)
        return 200, self._write(rt, old, obj, subresource)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        subresource: str = "",
    ) -> Obj:
        old = self.store.require(rt, namespace, name)
        try:
            patched = apply_patch(content_type, old, body, rt.schema)
        except PatchError as exc:
            text = str(exc)
            if text.startswith("unsupported patch type"):
                raise StatusError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json-patch+json, application/merge-patch+json, "
                    f"application/strategic-merge-patch+json ({content_type})",
                ) from exc
            code = 400 if text.startswith("error decoding patch") else 422
            raise StatusError(code, text) from exc
        patched.setdefault("metadata", {})
        meta(patched)["name"] = name
        if rt.namespaced:
            meta(patched)["namespace"] = namespace
        return self._write(rt, old, patched, subresource)

    def _write(self, rt: ResourceType, old: Obj, new: Obj, subresource: str) -> Obj:
        """The shared tail of update and patch: preconditions, strategy, store."""
        m, old_meta = meta(new), meta(old)
        name = str(old_meta.get("name", ""))
        if m.get("uid") and m["uid"] != old_meta.get("uid"):
            raise _precondition_failed("UID", m["uid"], old_meta.get("uid"))
        wanted_rv = m.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != str(old_meta.get("resourceVersion")):
            raise StatusError.stale(rt.plural, name, rt.group)
        if subresource == "status":
            result = clone(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        elif subresource == "ephemeralcontainers":
            result = _with_ephemeral_containers(old, new)
        elif subresource == "resize":
            result = _resized(old, new)
        elif subresource == "approval":
            # certificatesigningrequests/approval: only the conditions change
            result = clone(old)
            conditions = (new.get("status") or {}).get("conditions") or []
            result.setdefault("status", {})["conditions"] = conditions
        elif subresource:
            raise StatusError.method_not_allowed("PUT", f"{rt.plural}/{subresource}")
        else:
            result = new
            if rt.has_status:
                if "status" in old:
                    result["status"] = old["status"]
                else:
                    result.pop("status", None)
            for field in _DELETION_FIELDS:
                if field in old_meta:
                    m[field] = old_meta[field]
                else:
                    m.pop(field, None)
            m["generation"] = old_meta.get("generation", 1)
            if result.get("spec") != old.get("spec"):
                m["generation"] = int(old_meta.get("generation", 0) or 0) + 1
        meta(result)["resourceVersion"] = old_meta.get("resourceVersion")
        if self._finalized(rt, result):
            return self.store.delete(rt, str(old_meta.get("namespace", "")), name)
        return self.store.update(rt, result, expect_rv=rv_of(old))

    @staticmethod
    def _finalized(rt: ResourceType, obj: Obj) -> bool:
        """An object waiting on finalizers goes once the last is removed (grace 0 only)."""
        m = meta(obj)
        return bool(
            m.get("deletionTimestamp")
            and not m.get("finalizers")
            and not m.get("deletionGracePeriodSeconds")
        )

    # -- delete -----------------------------------------------------------------------

    def delete(
        self, rt: ResourceType, namespace: str, name: str, options: Mapping[str, Any]
    ) -> tuple[Obj, bool]:
        """DELETE. Returns (object, gone): the deleted object, or its pending state."""
        obj = self.store.require(rt, namespace, name)
        m = meta(obj)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != m.get("uid"):
            raise _precondition_failed("UID", pre["uid"], m.get("uid"))
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != m.get("resourceVersion"):
            raise _precondition_failed(
                "ResourceVersion", pre["resourceVersion"], m.get("resourceVersion")
            )
        grace = self._grace(rt, obj, options)
        if grace > 0 or m.get("finalizers"):
            pending = self._mark_deleted(rt, obj, grace)
            if pending is not None:
                return pending, False
        if rt.kind == "Namespace":
            self._empty_namespace(name)
        return self.store.delete(rt, namespace, name), True

    def _grace(self, rt: ResourceType, obj: Obj, options: Mapping[str, Any]) -> int:
        if not rt.graceful:
            return 0
        given = options.get("gracePeriodSeconds")
        if given is not None:
            grace = int(given)
        else:
            grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        if not (obj.get("spec") or {}).get("nodeName"):
            grace = 0
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0
        return max(grace, 0)

    def _mark_deleted(self, rt: ResourceType, obj: Obj, grace: int) -> Obj | None:
        """Set deletionTimestamp/GracePeriodSeconds (only ever shortening). None: delete now."""
        m = meta(obj)
        current = m.get("deletionGracePeriodSeconds")
        if m.get("deletionTimestamp") and current is not None and grace >= int(current):
            return obj
        if grace == 0 and not m.get("finalizers"):
            return None
        m["deletionTimestamp"] = rfc3339(self.now() + grace)
        m["deletionGracePeriodSeconds"] = grace
        if rt.graceful:
            m["generation"] = int(m.get("generation", 0) or 0) + 1
        return self.store.update(rt, obj, expect_rv=rv_of(obj))

    def _empty_namespace(self, namespace: str) -> None:
        for rt_key in list(self.store.resources()):
            rt = by_kind(rt_key)
            if not rt.namespaced:
                continue
            for ns, name in self.store.keys(rt):
                if ns == namespace:
                    self.store.delete(rt, ns, name)

    # -- subresources and reviews -----------------------------------------------------

    def token_request(self, namespace: str, account: str, body: Any) -> Obj:
        """serviceaccounts/{name}/token: a TokenRequest answered with a fake token."""
        sa = self.store.require(by_kind("ServiceAccount"), namespace, account)
        spec = dict((body or {}).get("spec") or {}) if isinstance(body, dict) else {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        if seconds < 600:
            raise StatusError.invalid(
                "TokenRequest",
                account,
                "spec.expirationSeconds",
                f"Invalid value: {seconds}: may not specify a duration less than 10 minutes",
                "authentication.k8s.io",
            )
        audiences = list(spec.get("audiences") or [ISSUER])
        bound = spec.get("boundObjectRef")
        if isinstance(bound, dict) and bound.get("kind") == "Pod":
            pod = self.store.require(by_kind("Pod"), namespace, str(bound.get("name", "")))
            if bound.get("uid") and bound["uid"] != meta(pod).get("uid"):
                raise StatusError(
                    409,
                    f"the UID in the bound object reference ({bound['uid']}) does not match the "
                    "UID in record. The object might have been deleted and then recreated",
                    reason="Conflict",
                )
        now = self.now()
        token = self.auth.issue(
            namespace,
            account,
            str(meta(sa).get("uid", "")),
            audiences,
            now,
            now + seconds,
            bound if isinstance(bound, dict) else None,
        )
        spec.update({"audiences": audiences, "expirationSeconds": seconds})
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {
                "name": account,
                "namespace": namespace,
                "creationTimestamp": rfc3339(now),
            },
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": rfc3339(now + seconds)},
        }

    def review(self, rt: ResourceType, body: Any) -> Obj:
        """tokenreviews / subjectaccessreviews: echo the spec with the scripted status."""
        obj = self._body(rt, body)
        spec = obj.get("spec") or {}
        if rt.kind == "TokenReview":
            status = self.auth.review_token(spec, self.now())
        else:
            status = self.auth.review_access(spec)
        obj.update(
            {
                "kind": rt.kind,
                "apiVersion": rt.api_version,
                "metadata": {"creationTimestamp": None},
                "spec": spec,
                "status": status,
            }
        )
        return obj


def _default_pod(pod: Obj) -> None:
    """The defaults upstream's API server gives every pod that the kubelet acts on."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            image = str(c.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            resources = c.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)
            for port in c.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def _qos_class(spec: Mapping[str, Any]) -> str:
    """Guaranteed, Burstable or BestEffort from cpu/memory requests and limits (upstream's
    GetPodQOS: sums over all containers; Guaranteed needs both limits everywhere and
    requests equal to limits)."""
    containers = [c for k in ("initContainers", "containers") for c in spec.get(k) or []]
    if _pod_level_set(spec):  # PodLevelResources: the pod's own resources decide
        containers = [{"resources": spec["resources"]}]
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for c in containers:
        res = (c or {}).get("resources") or {}
        for field, totals in (("requests", requests), ("limits", limits)):
            found = set()
            for name, value in (res.get(field) or {}).items():
                amount = parse_quantity(value).amount
                if name in ("cpu", "memory") and amount > 0:
                    totals[name] = totals.get(name, Fraction(0)) + amount
                    found.add(name)
            if field == "limits" and found != {"cpu", "memory"}:
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    matching = all(limits.get(k) == v for k, v in requests.items())
    if guaranteed and matching and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _pod_level_set(spec: Mapping[str, Any]) -> bool:
    res = spec.get("resources") or {}
    names = {*(res.get("requests") or {}), *(res.get("limits") or {})}
    return bool(names & {"cpu", "memory"})


_RESIZABLE = ("resources", "resizePolicy")


def _resized(old: Obj, new: Obj) -> Obj:
    """pods/resize: only the containers' (and init containers') resources and resize
    policies change, and the pod-level resources; anything else in the spec is refused.
    (kube-apiserver's further checks -- the QoS class stays, cpu and memory only -- are
    not modelled.) The spec changed, so the generation moves."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    result = clone(old)
    spec = result.setdefault("spec", {})
    for key in ("containers", "initContainers"):
        wanted = {c.get("name"): c for c in new_spec.get(key) or []}
        for container in spec.get(key) or []:
            given = wanted.get(container.get("name"), {})
            for field in _RESIZABLE:
                if field in given:
                    container[field] = given[field]
                else:
                    container.pop(field, None)
    if "resources" in new_spec:
        spec["resources"] = new_spec["resources"]
    else:
        spec.pop("resources", None)
    if clone(result).get("spec") != {**new_spec}:
        raise StatusError.invalid(
            "Pod", str(meta(old).get("name", "")), "spec",
            "Forbidden: only cpu and memory resources are mutable",
        )  # fmt: skip
    if spec != old_spec:
        m = meta(result)
        m["generation"] = int(m.get("generation", 0) or 0) + 1
    return result


def _with_ephemeral_containers(old: Obj, new: Obj) -> Obj:
    """pods/ephemeralcontainers: only ``spec.ephemeralContainers`` changes, existing
    ones may be neither removed nor changed, names are unique in the pod; the spec
    changed, so the generation moves (as for any spec change)."""
    name = str(meta(old).get("name", ""))
    old_spec = old.get("spec") or {}
    before = {c.get("name"): c for c in old_spec.get("ephemeralContainers") or []}
    wanted = list((new.get("spec") or {}).get("ephemeralContainers") or [])
    after = {c.get("name"): c for c in wanted}
    field = "spec.ephemeralContainers"
    for cname, container in before.items():
        if after.get(cname) != container:
            raise StatusError.invalid(
                "Pod",
                name,
                field,
                f"Forbidden: existing ephemeral containers may not be removed or changed ({cname})",
            )
    taken = {
        c.get("name") for key in ("containers", "initContainers") for c in old_spec.get(key) or []
    }
    for cname in after:
        if cname in taken or not cname:
            raise StatusError.invalid(
                "Pod", name, f"{field}[{cname}].name", f'Duplicate value: "{cname}"'
            )
    result = clone(old)
    result.setdefault("spec", {})["ephemeralContainers"] = wanted
    if wanted != list(before.values()):
        m = meta(result)
        m["generation"] = int(m.get("generation", 0) or 0) + 1
    return result

"""The certificate manager: keeps one certificate (client or serving) fresh through CSRs.

As client-go's util/certificate manager:

* the current pair comes from the store when it holds an unexpired one: rotation is due
  at a jittered 70-90 % of its lifetime (``deadline.rotation_deadline``), or at once if it
  does not satisfy the template. Otherwise the client certificate's manager takes the
  pair the kubeconfig embeds (``initial``), stores it and rotates it at once, as
  upstream does with kubeadm's first, shared credentials; with neither, rotation is due
  at once too;
* a rotation makes a new P-256 key and CSR (``generateName: csr-``), creates it with
  the API client ``client_for`` gives for the current pair (the bootstrap credentials
  while there is none), waits up to 15 minutes for it to be issued, stores the pair and
  makes it current; subscribers get the new pair (the API client's transport and the
  :10250 listener reload it);
* a failed attempt counts one renew error and is retried after 2, 4, 8, 16, 32 s, then
  every 32 s; errors say what failed, and the API's answers decide ``server_healthy``
  (401, 403, 404: the server is there; 5xx: it is not);
* ``current()`` is None once the certificate has expired;
* ``template_changed()`` wakes the manager when the node's addresses change, so a
  serving certificate missing a new address is replaced at once.

All time is ``now()`` (epoch seconds) and ``trio.sleep``, so tests run on autojump_clock
with the fake API server's clock.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import trio

from kubelet.api import ApiClient, ApiError, Forbidden, NotFound, ServerError, Unauthorized

from .csr import CertificateTemplate, PrivateKey, generate_key, key_pem, make_csr, satisfies
from .deadline import retry_delays, rotation_deadline
from .metrics import ManagerMetrics
from .request import CertificateRequestError, request_certificate, wait_for_certificate
from .store import CertKeyPair, FileStore, StoreError

__all__ = ["WAIT_TIMEOUT", "CertificateManager", "ClientFor"]

log = logging.getLogger(__name__)

WAIT_TIMEOUT = 15 * 60.0
"""How long one rotation waits for its CSR to be issued (certificateWaitTimeout)."""

ClientFor = Callable[[CertKeyPair | None], AbstractAsyncContextManager[ApiClient]]
"""An API client to request certificates with, given the current pair (None: none yet)."""


class CertificateManager:
    """Rotates one certificate; ``run`` in the node nursery, ``current`` from anywhere."""

    def __init__(
        self,
        *,
        name: str,
        store: FileStore,
        signer: str,
        template: Callable[[], CertificateTemplate | None],
        usages: Callable[[PrivateKey], tuple[str, ...]],
        client_for: ClientFor,
        now: Callable[[], float],
        metrics: ManagerMetrics | None = None,
        requested_lifetime: int | None = None,
        rng: random.Random | None = None,
        initial: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.name = name
        self.store = store
        self.signer = signer
        self.template = template
        self.usages = usages
        self.client_for = client_for
        self.now = now
        self.metrics = metrics
        self.requested_lifetime = requested_lifetime
        self.rng = rng or random.Random()
        self.server_healthy = False
        self.rotations = 0
        self._subscribers: list[trio.MemorySendChannel[CertKeyPair]] = []
        self._changed = trio.Event()
        self._current, self._force = self._load(initial)

    def _load(self, initial: tuple[bytes, bytes] | None) -> tuple[CertKeyPair | None, bool]:
        """The stored pair if still valid; else the initial one (stored, rotated at once)."""
        try:
            pair = self.store.current()
            if not pair.expired(self.now()):
                return pair, False
        except StoreError as exc:
            log.info("%s: %s", self.name, exc)
        if initial is None:
            return None, True
        try:
            return self.store.update(*initial, now=self.now()), True
        except StoreError as exc:
            log.error("%s: unable to set the cert/key pair to the bootstrap certificate: %s",
                      self.name, exc)  # fmt: skip
            return None, True

    # -- what others read -------------------------------------------------------------

    def current(self) -> CertKeyPair | None:
        """The pair in use; None without one, or once it has expired."""
        pair = self._current
        if pair is not None and pair.expired(self.now()):
            log.info("%s: Current certificate is expired", self.name)
            return None
        return pair

    def expiry(self) -> float | None:
        """NotAfter of the current pair (for the TTL gauge)."""
        pair = self.current()
        return pair.not_after if pair is not None else None

    def subscribe(self) -> trio.MemoryReceiveChannel[CertKeyPair]:
        """Every new pair from now on, in order."""
        send, receive = trio.open_memory_channel[CertKeyPair](math.inf)
        self._subscribers.append(send)
        return receive

    def template_changed(self) -> None:
        """The template may have changed (new node addresses): look again now."""
        self._changed.set()

    # -- decisions --------------------------------------------------------------------

    def satisfies_template(self) -> bool:
        template = self.template()
        if self._current is None:
            return False
        if template is None:
            return True
        if not satisfies(self._current.leaf, template):
            log.info("%s: the current certificate does not match the requested names", self.name)
            return False
        return True

    def next_deadline(self) -> float:
        """When to rotate next (now, if there is no good certificate)."""
        if self._force:
            self._force = False
            return self.now()
        if not self.satisfies_template():
            return self.now()
        assert self._current is not None
        pair = self._current
        deadline = rotation_deadline(pair.not_before, pair.not_after, self.rng.random())
        log.info("%s: Certificate expiration is %s, rotation deadline is %s",
                 self.name, _iso(pair.not_after), _iso(deadline))  # fmt: skip
        return deadline

    # -- the loop ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Rotate at every deadline until cancelled."""
        log.info("%s: Certificate rotation is enabled", self.name)
        task_status.started()
        while True:
            self._changed = trio.Event()
            wait = self.next_deadline() - self.now()
            if wait > 0:
                log.info("%s: Waiting %.0fs for next certificate rotation", self.name, wait)
                with trio.move_on_after(wait):
                    await self._changed.wait()
                    if self.satisfies_template():
                        continue
                    log.info("%s: Certificate template changed, rotating", self.name)
            if self.template() is None:
                await trio.sleep(1.0)
                continue
            delays = retry_delays(self.rng)
            attempts = 0
            while not await self.rotate():
                attempts += 1
                if attempts == 5:
                    log.error("%s: Reached backoff limit, still unable to rotate certs", self.name)
                await trio.sleep(next(delays))

    async def rotate(self) -> bool:
        """One attempt: True when a new certificate is stored and current."""
        log.info("%s: Rotating certificates", self.name)
        template = self.template()
        if template is None:
            return self._failed("unable to create a csr, no template available")
        key = generate_key()
        csr = make_csr(key, template)
        try:
            async with self.client_for(self.current()) as client:
                try:
                    name, uid = await request_certificate(
                        client, csr, "", self.signer, self.usages(key), key,
                        now=self.now(), expiration_seconds=self.requested_lifetime,
                    )  # fmt: skip
                except ApiError as exc:
                    self._server_answered(exc)
                    return self._failed(
                        f"Failed while requesting a signed certificate from the control plane: "
                        f"cannot create certificate signing request: {exc}"
                    )
                with trio.move_on_after(WAIT_TIMEOUT) as scope:
                    chain = await wait_for_certificate(client, name, uid)
                if scope.cancelled_caught:
                    return self._failed(
                        f"certificate request was not signed: timed out waiting for csr {name}"
                    )
        except (CertificateRequestError, ApiError) as exc:
            return self._failed(f"certificate request was not signed: {exc}")
        try:
            pair = self.store.update(chain, key_pem(key), now=self.now())
        except StoreError as exc:
            return self._failed(f"Unable to store the new cert/key pair: {exc}")
        old, self._current = self._current, pair
        self.server_healthy = True
        self.rotations += 1
        if old is not None and self.metrics is not None and self.metrics.rotation_age:
            self.metrics.rotation_age(self.now() - old.not_before)
        log.info("%s: new certificate (serial %x) valid until %s",
                 self.name, pair.serial, _iso(pair.not_after))  # fmt: skip
        for send in self._subscribers:
            send.send_nowait(pair)
        return True

    def _failed(self, message: str) -> bool:
        log.error("%s: %s", self.name, message)
        if self.metrics is not None:
            self.metrics.renew_errors()
        return False

    def _server_answered(self, exc: ApiError) -> None:
        """Whether the API server looks alive from this answer (updateServerError)."""
        if isinstance(exc, Unauthorized):
            self.server_healthy = True
        elif isinstance(exc, ServerError):
            self.server_healthy = False
        else:
            self.server_healthy = isinstance(exc, NotFound | Forbidden)


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

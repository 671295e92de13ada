"""``ReviewClient`` over the API: TokenReview and SubjectAccessReview for the TLS port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .backend import TokenReviewResult

if TYPE_CHECKING:
    from kubelet.api import ApiClient


class ApiReviews:
    """``ReviewClient`` for the server's webhook authentication and authorization."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def token_review(self, token: str) -> TokenReviewResult:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await self._client.create("/apis/authentication.k8s.io/v1/tokenreviews", body)
        status = answer.get("status") or {}
        user = status.get("user") or {}
        return TokenReviewResult(
            authenticated=bool(status.get("authenticated")),
            user=str(user.get("username", "")),
            groups=tuple(user.get("groups") or ()),
            uid=str(user.get("uid", "")),
            error=str(status.get("error", "")),
        )

    async def subject_access_review(
        self,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> bool:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": list(groups),
                "resourceAttributes": {
                    "verb": verb,
                    "group": "",
                    "version": "v1",
                    "resource": resource,
                    "subresource": subresource,
                    "name": name,
                },
            },
        }
        answer = await self._client.create(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews", body
        )
        return bool((answer.get("status") or {}).get("allowed"))

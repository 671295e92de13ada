"""ImageClient: the CRI ImageService as Trio-friendly async methods."""

from __future__ import annotations

from . import cri_api_pb2 as api
from .cri_api_grpc import ImageServiceStub
from .errors import CriError, DeadlineExceeded, ImagePullFailed, RuntimeUnavailable
from .service import ServiceClient


def image_spec(image: str | api.ImageSpec) -> api.ImageSpec:
    """Accept a plain reference where an ImageSpec is expected."""
    return api.ImageSpec(image=image) if isinstance(image, str) else image


class ImageClient(ServiceClient):
    """One method per ImageService RPC. PullImage has no deadline: only cancellation
    ends it, as upstream (a large image on a slow registry may take many minutes)."""

    _stub_type = ImageServiceStub

    async def list_images(self, image: str | api.ImageSpec | None = None) -> list[api.Image]:
        filt = api.ImageFilter(image=image_spec(image)) if image is not None else None
        resp: api.ListImagesResponse = await self._unary(
            "ListImages", api.ListImagesRequest(filter=filt)
        )
        return list(resp.images)

    async def image_status(
        self, image: str | api.ImageSpec, verbose: bool = False
    ) -> api.Image | None:
        """The stored image, or None when the node does not have it."""
        req = api.ImageStatusRequest(image=image_spec(image), verbose=verbose)
        resp: api.ImageStatusResponse = await self._unary("ImageStatus", req)
        if not resp.HasField("image") or not resp.image.id:
            return None
        return resp.image

    async def pull_image(
        self,
        image: str | api.ImageSpec,
        auth: api.AuthConfig | None = None,
        sandbox_config: api.PodSandboxConfig | None = None,
    ) -> str:
        """Pull ``image``; returns the image reference (id) the runtime stored.

        Failures the runtime reports (unknown image, registry unreachable, bad
        credentials) become ``ImagePullFailed``; unreachable runtime and deadlines keep
        their own classes.
        """
        req = api.PullImageRequest(
            image=image_spec(image), auth=auth, sandbox_config=sandbox_config
        )
        try:
            resp: api.PullImageResponse = await self._unary("PullImage", req, None)
        except (RuntimeUnavailable, DeadlineExceeded):
            raise
        except CriError as exc:
            raise ImagePullFailed(exc.rpc, exc.message, exc.code) from exc
        if not resp.image_ref:
            raise ImagePullFailed(
                "PullImage", f"runtime returned no image ref for {req.image.image}"
            )
        return resp.image_ref

    async def remove_image(self, image: str | api.ImageSpec) -> None:
        await self._unary("RemoveImage", api.RemoveImageRequest(image=image_spec(image)))

    async def image_fs_info(self) -> api.ImageFsInfoResponse:
        resp: api.ImageFsInfoResponse = await self._unary("ImageFsInfo", api.ImageFsInfoRequest())
        return resp

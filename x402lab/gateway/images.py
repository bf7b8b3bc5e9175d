"""Paid image routes: generate, edit, multi-edit, upscale and background removal.

Images in are a URL, base64 text, bytes or a file (``uploads.image_ref``); images out are an
``ImageResult`` that shows inline in Jupyter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from x402lab import routes
from x402lab.errors import ConfigError
from x402lab.gateway.paid import PaidRequests
from x402lab.gateway.replies import image_result
from x402lab.gateway.results import MediaResult
from x402lab.gateway.uploads import Binary, image_ref


class Images:
    """``generate_image``, ``edit_image``, ``multi_edit_image``, ``upscale_image`` and
    ``remove_background``."""

    def __init__(self, paid: PaidRequests) -> None:
        self._paid = paid

    async def generate_image(
        self,
        prompt: str,
        *,
        model: str,
        n: int = 1,
        openai: bool = False,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: ``n`` generated images. Returns an ImageResult (shows inline).

        Uses the native /image/generate (``params`` such as width, height, style_preset,
        negative_prompt, resolution); ``openai=True`` uses the OpenAI-compatible
        /images/generations (``size``, ``quality``...). ``params`` are checked against the
        route's published request schema before anything is signed (TypeError for an
        unknown one, ConfigError for a value it does not take); ``extra_body`` adds fields
        it does not list, unchecked.
        """
        if openai:
            path = routes.IMAGES_GENERATIONS
            body = {"model": model, "prompt": prompt, "n": n, "response_format": "b64_json"}
        else:
            path = routes.IMAGE_GENERATE
            body = {"model": model, "prompt": prompt}
            if n != 1:
                body["variants"] = n
        own = set(body)
        body.update(params)
        reply = await self._paid.post_json(
            path, body, own, max_usd, extra_body, model, caller="generate_image()", rebuy=rebuy
        )
        return image_result(path, reply, model)

    async def edit_image(
        self,
        image: Binary,
        prompt: str,
        *,
        model: str,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one image edit. ``image`` is a URL, base64 text, bytes or a file.

        ``params`` and ``extra_body`` as in ``generate_image``."""
        body = {"model": model, "prompt": prompt, "image": image_ref(image), **params}
        path = routes.IMAGE_EDIT
        reply = await self._paid.post_json(
            path, body, ("model", "prompt", "image"), max_usd, extra_body, model, rebuy=rebuy
        )
        return image_result(path, reply, model)

    async def multi_edit_image(
        self,
        images: Sequence[Binary],
        prompt: str,
        *,
        model: str,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one edit combining several images (URLs, base64, bytes or files).

        ``params`` and ``extra_body`` as in ``generate_image``."""
        body = {"model": model, "prompt": prompt, "images": [image_ref(i) for i in images]}
        body.update(params)
        path = routes.IMAGE_MULTI_EDIT
        reply = await self._paid.post_json(
            path, body, ("model", "prompt", "images"), max_usd, extra_body, model, rebuy=rebuy
        )
        return image_result(path, reply, model)

    async def upscale_image(
        self,
        image: Binary,
        *,
        scale: int = 2,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one image upscaled 2x or 4x. Returns the PNG as a MediaResult."""
        if scale not in (2, 4):
            raise ConfigError(f"scale must be 2 or 4, not {scale!r}")
        body = {"image": image_ref(image), "scale": scale, **params}
        path = routes.IMAGE_UPSCALE
        reply = await self._paid.post_json(
            path, body, ("image", "scale"), max_usd, extra_body, rebuy=rebuy
        )
        return image_result(path, reply, None)

    async def remove_background(
        self,
        image: Binary,
        *,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one image with its background removed (a PNG)."""
        ref = image_ref(image)
        field = "image_url" if ref.startswith(("http://", "https://")) else "image"
        body = {field: ref, **params}
        path = routes.IMAGE_BACKGROUND_REMOVE
        reply = await self._paid.post_json(path, body, (field,), max_usd, extra_body, rebuy=rebuy)
        return image_result(path, reply, None)

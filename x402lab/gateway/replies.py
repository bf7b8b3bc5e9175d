"""Reading a paid reply into a Result: JSON, text or media bytes, by its content type."""

from __future__ import annotations

from typing import Any

from x402lab.gateway.results import ImageResult, MediaResult, Result, TextResult
from x402lab.transport import Reply


def content_type_of(reply: Reply) -> str:
    """The reply's media type, lower case, without parameters ('' when absent)."""
    return reply.response.headers.get("content-type", "").split(";")[0].strip().lower()


def is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def media_result(path: str, reply: Reply, model: str | None) -> MediaResult:
    """A MediaResult holding the bytes (or the JSON, when the route answered JSON)."""
    content_type = content_type_of(reply)
    data: Any = reply.response.json() if is_json(content_type) else reply.response.content
    return MediaResult(path, data, reply.cost, model, content_type or None)


def image_result(path: str, reply: Reply, model: str | None) -> MediaResult:
    """An ImageResult from base64 JSON or PNG bytes; other media as a MediaResult."""
    if is_json(content_type_of(reply)):
        return ImageResult.from_json(path, reply.json(), reply.cost, model)
    content = reply.response.content
    if content_type_of(reply) == "image/png":
        return ImageResult(path, content, reply.cost, model, "image/png", images=[content])
    return media_result(path, reply, model)


def text_result(path: str, reply: Reply, model: str | None, key: str) -> TextResult:
    """A TextResult: the JSON body's ``key`` field, or the whole body when it is text."""
    content_type = content_type_of(reply)
    if is_json(content_type):
        data = reply.json()
        text = data.get(key) if isinstance(data, dict) else None
        return TextResult(path, data, reply.cost, model, content_type, text=str(text or ""))
    text = reply.response.text
    return TextResult(path, text, reply.cost, model, content_type or None, text=text)


def result_of(path: str, reply: Reply, model: str | None) -> Result:
    """Whatever a route answered: a Result of JSON, a MediaResult of media, else text."""
    content_type = content_type_of(reply)
    if is_json(content_type):
        return Result(path, reply.json(), reply.cost, model, content_type)
    if content_type.startswith(("image/", "audio/", "video/")):
        return MediaResult(path, reply.response.content, reply.cost, model, content_type)
    text = reply.response.text
    return TextResult(path, text, reply.cost, model, content_type or None, text=text)

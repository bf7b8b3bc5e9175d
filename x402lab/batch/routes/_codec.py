"""Route batches' requests and answers (``batch.kinds._codec``): ``RouteCodec``.

Each row's request is the one its route's method would send (``calls.Recorded``), kept by
its request key; the codec sends it as it is (JSON or a form with its file) and reads the
paid reply into the route's answer columns (``_schema.ANSWERS``) with the same reply
readers the single call uses (``gateway.replies``). Media answers are written to the lab's
media folder as ``<request key><extension>`` (private: 0600 in a 0700 folder) and stored as
their path, type and size; every other answer is stored as JSON of its columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from x402lab.batch.kinds import Answer, Reask, Request
from x402lab.batch.routes._schema import answer_names
from x402lab.gateway.replies import image_result, media_result, result_of, text_result
from x402lab.gateway.results import (
    ChatResult,
    MediaResult,
    ResponsesResult,
    RpcResult,
    SearchResult,
    TextResult,
    VoiceResult,
)
from x402lab.media.polling import media_extension
from x402lab.private import private_folder, write_private

if TYPE_CHECKING:
    from x402lab.batch.routes._calls import Recorded, RouteCall
    from x402lab.transport import Reply

#: The fields of one search hit kept in the ``hits`` column.
HIT_FIELDS = ("title", "url", "content", "date")


@dataclass(frozen=True)
class RouteCodec:
    """The requests of one route batch, by request key, and how its answers are read."""

    route: RouteCall
    path: str
    model: str | None
    requests: Mapping[str, Recorded]
    media_dir: Path
    columns: tuple[str, ...] = field(init=False)

    #: Every answer is kept as it came.
    reask: ClassVar[Reask | None] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", answer_names(self.route.answer))

    @property
    def kind(self) -> str:
        """The route's method name: claims in ``batch:<name>``, messages say ``batch_<name>``."""
        return self.route.name

    @property
    def unchecked(self) -> frozenset[str]:
        return frozenset()  # each request says its own (``Request.own``, ``Request.extra``)

    def body(self, items: Sequence[Any]) -> dict[str, Any]:
        (recorded,) = items  # one row's request per paid request
        return dict(recorded.key_body)

    def request(self, key: str, body: Mapping[str, Any]) -> Request:
        return self.requests[key].request

    def read(self, reply: Reply, key: str, n: int) -> list[Answer]:
        return [self._answer(reply, key)]

    def _answer(self, reply: Reply, key: str) -> Answer:
        route, path, model = self.route, self.path, self.requests[key].model
        kind = route.answer
        if kind == "hits":
            hits = SearchResult(path, reply.json(), None).results
            kept = [{name: _text(hit.get(name)) for name in HIT_FIELDS} for hit in hits]
            return (kept, len(kept))
        if kind == "text":
            return (_text_of(route.name, path, reply, model, route.text_field),)
        if kind == "media":
            readback = image_result if "image" in route.name else media_result
            return self._saved(readback(path, reply, model), key)
        if kind == "voice":
            return (VoiceResult(path, reply.json(), None).voice_id,)
        if kind == "rpc":
            answer = RpcResult(path, reply.json(), None)
            return (_json(answer.result), _json(answer.error))
        found = result_of(path, reply, model)  # lab.call: JSON, text or media
        if isinstance(found, MediaResult):
            return (None, *self._saved(found, key))
        if isinstance(found, TextResult):
            return (found.text, None, found.content_type, None)
        return (_json(found.data), None, found.content_type, None)

    def _saved(self, result: MediaResult, key: str) -> Answer:
        """Write the media of ``result`` as ``<key><extension>`` in the media folder."""
        data = result.bytes  # TypeError for a JSON answer: the row fails, its payment kept
        if not data:
            raise ValueError("the answer holds no media")
        media_type = _sniffed(data) or result.content_type or "application/octet-stream"
        target = private_folder(self.media_dir) / f"{key}{media_extension(media_type, 'media')}"
        write_private(target, data)
        return (str(target), media_type, len(data))

    def encode(self, answer: Answer) -> bytes:
        return json.dumps(answer, ensure_ascii=False).encode()

    def decode(self, blob: bytes) -> Answer:
        return tuple(json.loads(blob))

    def empty(self) -> Answer:
        return (None,) * len(self.columns)


def _text_of(name: str, path: str, reply: Reply, model: str | None, text_field: str) -> str:
    if name == "chat":
        return ChatResult.from_response(path, reply.json(), None).text or ""
    if name == "responses":
        return ResponsesResult.from_response(path, reply.json(), None).text
    return text_result(path, reply, model, text_field).text


def _sniffed(data: bytes) -> str | None:
    """The image type its first bytes say (an answer's base64 images are said to be PNG)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)

"""Paid audio routes: speech, transcription, voice cloning and video transcripts.

Audio samples go up as multipart forms keyed by their hash (``uploads.form_key``); a URL
goes in a JSON body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from x402lab import routes
from x402lab.gateway.paid import PaidRequests
from x402lab.gateway.replies import media_result, text_result
from x402lab.gateway.results import MediaResult, TextResult, VoiceResult
from x402lab.gateway.uploads import (
    Binary,
    form_key,
    form_value,
    is_file,
    read_binary,
    upload_name,
)


class Audio:
    """``speech``, ``transcribe``, ``clone_voice`` and ``transcribe_video``."""

    def __init__(self, paid: PaidRequests) -> None:
        self._paid = paid

    async def speech(
        self,
        input: str,
        *,
        model: str,
        voice: str | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: speech audio of ``input`` (plays inline; ``save(path)`` writes it).

        ``params`` are checked against the route's published request schema before anything
        is signed; ``extra_body`` adds fields it does not list, unchecked."""
        body: dict[str, Any] = {"model": model, "input": input, **params}
        if voice is not None:
            body["voice"] = voice
        path = routes.SPEECH
        reply = await self._paid.post_json(
            path, body, ("model", "input", "voice"), max_usd, extra_body, model, rebuy=rebuy
        )
        return media_result(path, reply, model)

    async def transcribe(
        self,
        audio: Binary | None = None,
        *,
        model: str,
        duration_seconds: float | None = None,
        filename: str | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> TextResult:
        """Spends money: speech to text, priced by ``duration_seconds``.

        ``audio`` as bytes or a file is uploaded (multipart); a URL (or base64 text) is sent
        as ``file`` in a JSON body, whose ``params`` are checked against the route's
        published schema (``extra_body`` adds unchecked fields; with an upload, they go in
        the form).
        Returns a TextResult (``.text``; ``.data`` holds timestamps when asked for).
        """
        path = routes.TRANSCRIPTIONS
        fields: dict[str, Any] = {"model": model, **params}
        if duration_seconds is not None:
            fields["duration_seconds"] = duration_seconds
        if audio is None or (isinstance(audio, str) and not is_file(audio)):
            if audio is not None:
                fields["file"] = audio
            reply = await self._paid.post_json(
                path,
                fields,
                ("model", "duration_seconds", "file"),
                max_usd,
                extra_body,
                model,
                rebuy=rebuy,
            )
        else:
            data = read_binary(audio)
            fields.update(extra_body or {})
            form = {k: form_value(v) for k, v in fields.items()}
            reply = await self._paid.send(
                "POST",
                path,
                model=model,
                max_usd=max_usd,
                key=form_key(path, form, data),
                data=form,
                files={"file": (upload_name(audio, filename, "audio.wav"), data)},
                rebuy=rebuy,
            )
        return text_result(path, reply, model, "text")

    async def clone_voice(
        self,
        sample: Binary,
        *,
        model: str,
        filename: str | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
    ) -> VoiceResult:
        """Spends money: a cloned voice from an audio sample (bytes or a file; multipart).

        Returns a VoiceResult whose ``voice_id`` goes to ``speech(..., voice=...)`` with the
        same ``model``.
        """
        data = read_binary(sample)
        name = upload_name(sample, filename, "sample.wav")
        path = routes.VOICES
        form = {"model": model}
        reply = await self._paid.send(
            "POST",
            path,
            model=model,
            max_usd=max_usd,
            key=form_key(path, form, data),
            data=form,
            files={"file": (name, data)},
            rebuy=rebuy,
        )
        return VoiceResult(path, reply.json(), reply.cost, model, "application/json")

    async def transcribe_video(
        self,
        url: str,
        *,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> TextResult:
        """Spends money: the transcript of a YouTube video's audio (synchronous)."""
        path = routes.VIDEO_TRANSCRIPTIONS
        reply = await self._paid.post_json(
            path, {"url": url, **params}, ("url",), max_usd, extra_body, rebuy=rebuy
        )
        return text_result(path, reply, None, "transcript")

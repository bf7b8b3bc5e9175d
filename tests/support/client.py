"""Constants and small builders of the gateway client tests."""

from __future__ import annotations

import io
import wave
from typing import Any

from x402lab.emulator.settings import EmulatorSettings

CHAT_MODEL = "zai-org-glm-4.7-flash"
THINKING_MODEL = "kimi-k3"
EXPENSIVE_MODEL = "openai-gpt-54-pro"
EMBED_MODEL = "text-embedding-bge-m3"
IMAGE_MODEL = "z-image-turbo"
EDIT_MODEL = "firered-image-edit"
TTS_MODEL = "tts-kokoro"
CLONE_MODEL = "tts-chatterbox-hd"
ASR_MODEL = "nvidia/parakeet-tdt-0.6b-v3"
IMAGE_URL = "https://example.org/photo.png"
YOUTUBE_URL = "https://www.youtube.com/watch?v=dQw4w9WgXcQ"


def settings(**changes: Any) -> EmulatorSettings:
    """Emulator settings with fast jobs (and ``changes``)."""
    return EmulatorSettings(job_seconds=0.2, **changes)


def wav_bytes(seconds: float = 2.0) -> bytes:
    """A silent 8 kHz mono WAV of ``seconds``."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(b"\0\0" * int(8000 * seconds))
    return buffer.getvalue()

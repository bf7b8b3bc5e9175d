"""Music and video jobs."""

from __future__ import annotations


class MediaMixin:
    """``quote_music``, ``music``, ``quote_video``, ``video`` and ``jobs``."""

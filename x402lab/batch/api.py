"""The batch methods of the Lab."""

from __future__ import annotations


class BatchMixin:
    """``batch_chat``, ``batch_embed`` and ``estimate`` (see issue: batch jobs)."""

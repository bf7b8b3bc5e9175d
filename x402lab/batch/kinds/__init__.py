"""The kinds of batch (plain chat, typed chat, embeddings), one codec each: its request bodies,
its answer parsing and its re-ask policy.

``_codec`` (the ``Codec`` protocol and ``Request``), ``_chat_codec``, ``_embed_codec`` and
``_typed_codec`` (packs of rows per typed request); ``_typed`` and ``_answer_schema`` (typed
answers: the ``OutputSpec``, its columns and the check of every answer against its schema).
"""

from x402lab.batch.kinds._chat_codec import ChatCodec
from x402lab.batch.kinds._codec import Answer, Codec, Reask, Request, request_fields
from x402lab.batch.kinds._embed_codec import EmbedCodec, texts_per_request
from x402lab.batch.kinds._typed import OutputSpec, output_spec
from x402lab.batch.kinds._typed_codec import TypedCodec, typed_frame

__all__ = [
    "Answer",
    "ChatCodec",
    "Codec",
    "EmbedCodec",
    "OutputSpec",
    "Reask",
    "Request",
    "TypedCodec",
    "output_spec",
    "request_fields",
    "texts_per_request",
    "typed_frame",
]

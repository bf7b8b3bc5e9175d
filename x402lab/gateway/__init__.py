"""The gateway's resources: free catalogs (``Catalog``), the paid routes by area (``Text``,
``Images``, ``Audio``, ``Tools``), any route by path (``Generic``), all sending paid requests
through one ``PaidRequests``."""

from x402lab.gateway.audio import Audio
from x402lab.gateway.catalog import Catalog, Discovery
from x402lab.gateway.generic import Generic, Quote
from x402lab.gateway.images import Images
from x402lab.gateway.paid import PaidRequests, request_key
from x402lab.gateway.text import Text, chat_body
from x402lab.gateway.tools import Tools

__all__ = [
    "Audio",
    "Catalog",
    "Discovery",
    "Generic",
    "Images",
    "PaidRequests",
    "Quote",
    "Text",
    "Tools",
    "chat_body",
    "request_key",
]

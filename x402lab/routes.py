"""Where things are: the two services' names and every route path the client sends to.

Written once here so a path is never spelled twice; what each route does is in
docs/services.md, "Free routes", "Paid synchronous routes" and "Shelf and menus".
"""

from __future__ import annotations

GATEWAY = "gateway"
REPORTS = "reports"

# The header each service reads a payment from: the gateway takes the standard x402 v2
# header; the report service names X-402-Payment first.
PAYMENT_HEADER = {GATEWAY: "PAYMENT-SIGNATURE", REPORTS: "X-402-Payment"}

# -- gateway: free -------------------------------------------------------------------------------
MODELS = "/api/v1/models"
TRAITS = "/api/v1/models/traits"
CHARACTERS = "/api/v1/characters"
IMAGE_STYLES = "/api/v1/image/styles"
RPC_NETWORKS = "/api/v1/crypto/rpc/networks"
OPENAPI = "/openapi.json"
LLMS_TXT = "/llms.txt"
WELL_KNOWN = "/.well-known/x402.json"

# -- gateway: paid -------------------------------------------------------------------------------
CHAT = "/api/v1/chat/completions"
RESPONSES = "/api/v1/responses"
EMBEDDINGS = "/api/v1/embeddings"
IMAGE_GENERATE = "/api/v1/image/generate"
IMAGES_GENERATIONS = "/api/v1/images/generations"
IMAGE_EDIT = "/api/v1/image/edit"
IMAGE_MULTI_EDIT = "/api/v1/image/multi-edit"
IMAGE_UPSCALE = "/api/v1/image/upscale"
IMAGE_BACKGROUND_REMOVE = "/api/v1/image/background-remove"
SPEECH = "/api/v1/audio/speech"
TRANSCRIPTIONS = "/api/v1/audio/transcriptions"
VOICES = "/api/v1/audio/voices"
VIDEO_TRANSCRIPTIONS = "/api/v1/video/transcriptions"
SEARCH = "/api/v1/augment/search"
SCRAPE = "/api/v1/augment/scrape"
TEXT_PARSER = "/api/v1/augment/text-parser"
RPC_PREFIX = "/api/v1/crypto/rpc/"

# -- gateway: media jobs (quote free, queue paid, retrieve and complete free) --------------
MEDIA_KINDS = ("music", "video")
_MEDIA_BASE = {"music": "/api/v1/audio", "video": "/api/v1/video"}


def media_route(kind: str, action: str) -> str:
    """The path of a media job ``action`` (quote, queue, retrieve, complete) for ``kind``."""
    return f"{_MEDIA_BASE[kind]}/{action}"


QUEUE_PATHS = {kind: media_route(kind, "queue") for kind in MEDIA_KINDS}

# The model types each route takes (the catalog says which ids are which).
MODEL_TYPES = ("text", "image", "video", "music", "tts", "asr", "embedding", "upscale", "inpaint")
ROUTE_MODEL_TYPES: dict[str, tuple[str, ...]] = {
    CHAT: ("text",),
    RESPONSES: ("text",),
    EMBEDDINGS: ("embedding",),
    IMAGE_GENERATE: ("image",),
    IMAGES_GENERATIONS: ("image",),
    IMAGE_EDIT: ("inpaint",),
    IMAGE_MULTI_EDIT: ("inpaint",),
    SPEECH: ("tts",),
    VOICES: ("tts",),
    TRANSCRIPTIONS: ("asr",),
    **{
        media_route("music", action): ("music",)
        for action in ("quote", "queue", "retrieve", "complete")
    },
    **{
        media_route("video", action): ("video",)
        for action in ("quote", "queue", "retrieve", "complete")
    },
}

# -- the report service --------------------------------------------------------------------------
REPORTS_LIST = "/api/intel/list"
REPORTS_BUY = "/api/intel/reports"

"""The pure x402 v2 protocol layer: wire models, header codec, EIP-712 hashing, signing,
verification and challenge checks. No HTTP, pandas or widgets here.
"""

from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.models import (
    Authorization,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    ResourceInfo,
    SettlementResponse,
    normalize_challenge,
)
from x402lab.x402.tokens import (
    BASE_SEPOLIA_USDC,
    BASE_USDC,
    DEFAULT_MAX_TIMEOUT_SECONDS,
    KNOWN_TOKENS,
    Token,
    token_for,
    usdc_for,
)

__all__ = [
    "BASE_SEPOLIA_USDC",
    "BASE_USDC",
    "DEFAULT_MAX_TIMEOUT_SECONDS",
    "KNOWN_TOKENS",
    "Authorization",
    "PaymentPayload",
    "PaymentRequired",
    "PaymentRequirements",
    "ResourceInfo",
    "SettlementResponse",
    "Token",
    "decode_header",
    "encode_header",
    "normalize_challenge",
    "token_for",
    "usdc_for",
]

"""The pure x402 v2 protocol layer: wire models, header codec, EIP-712 hashing, signing,
verification and challenge checks. No HTTP, pandas or widgets here.
"""

from x402lab.x402.checks import ChallengePolicy, select_requirements
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.eip712 import authorization_digest, domain_separator
from x402lab.x402.models import (
    Authorization,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    ResourceInfo,
    SettlementResponse,
    normalize_challenge,
)
from x402lab.x402.signing import DigestSigner, KeySigner, new_nonce, sign_payment
from x402lab.x402.tokens import (
    BASE_SEPOLIA_USDC,
    BASE_USDC,
    DEFAULT_MAX_TIMEOUT_SECONDS,
    KNOWN_TOKENS,
    Token,
    token_for,
    usdc_for,
)
from x402lab.x402.verify import VerifyResult, recover_address, verify_payment

__all__ = [
    "Authorization",
    "BASE_SEPOLIA_USDC",
    "BASE_USDC",
    "ChallengePolicy",
    "DEFAULT_MAX_TIMEOUT_SECONDS",
    "DigestSigner",
    "KNOWN_TOKENS",
    "KeySigner",
    "PaymentPayload",
    "PaymentRequired",
    "PaymentRequirements",
    "ResourceInfo",
    "SettlementResponse",
    "Token",
    "VerifyResult",
    "authorization_digest",
    "decode_header",
    "domain_separator",
    "encode_header",
    "new_nonce",
    "normalize_challenge",
    "recover_address",
    "select_requirements",
    "sign_payment",
    "token_for",
    "usdc_for",
    "verify_payment",
]

"""Tokens x402lab knows, with their real EIP-712 domains.

The domain (name, version) is what the token contract hashes with; a challenge's ``extra`` is
only a claim about it, so signing and verification always take the domain from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class Token:
    """An EIP-3009 token on one network, with its EIP-712 domain."""

    network: str
    chain_id: int
    address: str
    name: str
    version: str
    decimals: int
    symbol: str


BASE_USDC = Token(
    "eip155:8453", 8453, "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "USD Coin", "2", 6, "USDC"
)
# Known so that its domain is never mistaken for mainnet's ("USDC" vs "USD Coin"); no policy
# allows its network by default.
BASE_SEPOLIA_USDC = Token(
    "eip155:84532", 84532, "0x036CbD53842c5426634e7929541eC2318f3dCF7e", "USDC", "2", 6, "USDC"
)

KNOWN_TOKENS: dict[str, tuple[Token, ...]] = {
    BASE_USDC.network: (BASE_USDC,),
    BASE_SEPOLIA_USDC.network: (BASE_SEPOLIA_USDC,),
}


def token_for(network: str, asset: str) -> Token | None:
    """The known token at ``asset`` on ``network`` (case-insensitive address), or None."""
    if not isinstance(network, str) or not isinstance(asset, str):
        return None
    wanted = asset.lower()
    for token in KNOWN_TOKENS.get(network, ()):
        if token.address.lower() == wanted:
            return token
    return None


def usdc_for(network: str) -> Token | None:
    """The USDC token of ``network``, or None when x402lab knows none."""
    for token in KNOWN_TOKENS.get(network, ()):
        if token.symbol == "USDC":
            return token
    return None

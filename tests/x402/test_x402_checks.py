import pytest
from support.x402 import OTHER, PAY_TO, challenge_wire, entry

from x402lab.errors import PaymentRefused
from x402lab.x402 import (
    BASE_SEPOLIA_USDC,
    ChallengePolicy,
    PaymentRequired,
    normalize_challenge,
    select_requirements,
)

CAP = ChallengePolicy(per_call_cap=500_000, pay_to=PAY_TO)


def refusal_for(*entries, policy=CAP):
    with pytest.raises(PaymentRefused) as info:
        select_requirements(normalize_challenge(challenge_wire(*entries)), policy)
    return info.value.reason


def test_standard_challenge_passes():
    challenge = normalize_challenge(challenge_wire())
    assert select_requirements(challenge, CAP) is challenge.accepts[0]
    assert select_requirements(challenge, ChallengePolicy()) is challenge.accepts[0]


def test_first_acceptable_entry_wins():
    challenge = normalize_challenge(
        challenge_wire(entry(network="eip155:84532"), entry(amount="20000"), entry())
    )
    assert select_requirements(challenge, CAP).amount == 20000


def test_reason_names_the_first_entry_failure():
    reason = refusal_for(entry(amount="620000"), entry(payTo=OTHER))
    assert reason == "amount 0.62 USD above per-call cap 0.50 USD"


def test_amount_above_cap():
    assert refusal_for(entry(amount="500001")) == "amount 0.500001 USD above per-call cap 0.50 USD"
    assert (
        select_requirements(normalize_challenge(challenge_wire(entry(amount="500000"))), CAP).amount
        == 500000
    )


def test_zero_amount():
    assert refusal_for(entry(amount="0")) == "amount 0.00 USD is not positive"


def test_other_network_not_allowed():
    sepolia = entry(
        network=BASE_SEPOLIA_USDC.network,
        asset=BASE_SEPOLIA_USDC.address,
        extra={"name": "USDC", "version": "2"},
    )
    assert refusal_for(sepolia) == "network eip155:84532 not allowed (allowed: eip155:8453)"
    policy = ChallengePolicy(allowed_networks=frozenset({"eip155:8453", "eip155:84532"}))
    challenge = normalize_challenge(challenge_wire(sepolia))
    assert select_requirements(challenge, policy).network == "eip155:84532"


def test_wrong_payee():
    reason = refusal_for(entry(payTo=OTHER))
    assert reason == "payTo 0x0000…dEaD differs from pinned payee 0xF2d0…f355"


def test_pinned_payee_is_case_insensitive():
    policy = ChallengePolicy(pay_to=PAY_TO.lower())
    challenge = normalize_challenge(challenge_wire())
    assert select_requirements(challenge, policy).pay_to == PAY_TO


def test_sepolia_domain_on_mainnet_refused():
    reason = refusal_for(entry(extra={"name": "USDC", "version": "2"}))
    assert "name='USDC'" in reason and "real USDC domain on eip155:8453" in reason
    assert "name='USD Coin'" in reason


def test_missing_domain_on_known_token_is_filled_then_passes():
    challenge = normalize_challenge(challenge_wire(entry(extra=None)))
    assert select_requirements(challenge, CAP).filled == {"extra"}


def test_unknown_asset_refused():
    challenge = PaymentRequired.from_wire(challenge_wire(entry(asset=OTHER)))
    with pytest.raises(PaymentRefused, match="is not the USDC contract of eip155:8453"):
        select_requirements(challenge, CAP)


@pytest.mark.parametrize(
    ("timeout", "ok"), [(0, False), (1, True), (3600, True), (3601, False), (-5, False)]
)
def test_timeout_bounds(timeout, ok):
    challenge = normalize_challenge(challenge_wire(entry(maxTimeoutSeconds=timeout)))
    if ok:
        assert select_requirements(challenge, CAP).max_timeout_seconds == timeout
    else:
        with pytest.raises(PaymentRefused, match=f"maxTimeoutSeconds {timeout} outside 1..3600"):
            select_requirements(challenge, CAP)


def test_scheme_refused():
    assert refusal_for(entry(scheme="upto")) == "scheme 'upto' not supported (only exact)"


def test_pay_to_must_be_an_address():
    assert "not an EVM address" in refusal_for(entry(payTo="merchant"), policy=ChallengePolicy())


def test_all_reasons_are_kept_in_details():
    with pytest.raises(PaymentRefused) as info:
        select_requirements(
            normalize_challenge(challenge_wire(entry(amount="620000"), entry(scheme="upto"))), CAP
        )
    assert len(info.value.details["all_reasons"]) == 2


def test_hand_built_challenge_with_another_version_refused():
    challenge = normalize_challenge(challenge_wire())
    odd = PaymentRequired(3, challenge.accepts)
    with pytest.raises(PaymentRefused, match="unsupported x402Version 3"):
        select_requirements(odd, CAP)

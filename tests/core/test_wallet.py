import pickle

import pytest
from eth_account import Account

import x402lab as xl

KEY = "0x" + "11" * 32


def test_repr_and_str_show_only_the_address():
    wallet = xl.Wallet.from_key(KEY)
    assert wallet.address == Account.from_key(KEY).address
    for text in (repr(wallet), str(wallet), wallet._repr_html_()):
        assert wallet.address in text
        assert "11" * 8 not in text


def test_a_wallet_cannot_be_pickled():
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(xl.Wallet.from_key(KEY))


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("0x1234", "32 bytes, got 2"),
        ("zz" * 32, "not hex"),
        ("0x" + "00" * 32, "zero"),
        (42, "hex text"),
    ],
)
def test_bad_keys_are_named_without_repeating_the_key(key, message):
    with pytest.raises(xl.ConfigError, match=message) as info:
        xl.Wallet.from_key(key)
    assert "zz" * 8 not in str(info.value)


def test_from_env(monkeypatch):
    monkeypatch.delenv("X402LAB_PRIVATE_KEY", raising=False)
    with pytest.raises(xl.ConfigError, match="X402LAB_PRIVATE_KEY is not set"):
        xl.Wallet.from_env()
    monkeypatch.setenv("X402LAB_PRIVATE_KEY", KEY)
    assert xl.Wallet.from_env() == xl.Wallet.from_key(KEY)
    monkeypatch.setenv("MY_KEY", "0xdead")
    with pytest.raises(xl.ConfigError, match="MY_KEY: private key must be 32 bytes") as info:
        xl.Wallet.from_env("MY_KEY")
    assert "dead" not in str(info.value)


def test_from_keyfile(tmp_path):
    # A geth keyfile (scrypt) with a small work factor: reading it is tested, not scrypt's
    # cost (the default n=2**18 takes ~0.5 s a derivation, three of them here).
    keystore = Account.encrypt(KEY, "s3cret", kdf="scrypt", iterations=2**10)
    path = tmp_path / "key.json"
    import json

    path.write_text(json.dumps(keystore))
    assert xl.Wallet.from_keyfile(path, "s3cret") == xl.Wallet.from_key(KEY)
    with pytest.raises(xl.ConfigError, match="wrong password"):
        xl.Wallet.from_keyfile(path, "nope")
    with pytest.raises(xl.ConfigError, match="cannot read keyfile"):
        xl.Wallet.from_keyfile(tmp_path / "missing.json", "x")


def test_create_makes_distinct_signing_wallets():
    first, second = xl.Wallet.create(), xl.Wallet.create()
    assert first.address != second.address
    assert len(first.sign_digest(b"\x01" * 32)) == 65

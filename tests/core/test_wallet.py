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


def test_a_keyfile_asking_too_much_key_derivation_work_is_refused_at_once(tmp_path):
    import json
    import time

    keystore = Account.encrypt(KEY, "s3cret", kdf="scrypt", iterations=2**10)
    path = tmp_path / "key.json"
    started = time.monotonic()
    for kdf, changes, named in [
        ("scrypt", {"p": 100_000}, "scrypt n=1024 r=8 p=100000"),
        ("scrypt", {"n": 2**20}, "n=1048576"),
        ("pbkdf2", {"c": 10**9}, "pbkdf2 c=1000000000"),
    ]:
        crypto = dict(keystore["crypto"], kdf=kdf)
        if kdf == "pbkdf2":
            crypto["kdfparams"] = {"c": 1, "dklen": 32, "prf": "hmac-sha256", "salt": "00"}
        crypto["kdfparams"] = {**crypto["kdfparams"], **changes}
        path.write_text(json.dumps({**keystore, "crypto": crypto}))
        with pytest.raises(xl.ConfigError, match="more key derivation work") as info:
            xl.Wallet.from_keyfile(path, "s3cret")
        assert named in str(info.value) and "Account.encrypt" in str(info.value)
    path.write_text("[" * 200_000 + "]" * 200_000)  # no RecursionError either
    with pytest.raises(xl.ConfigError, match="not a JSON keystore"):
        xl.Wallet.from_keyfile(path, "s3cret")
    assert time.monotonic() - started < 5  # refused before any derivation ran

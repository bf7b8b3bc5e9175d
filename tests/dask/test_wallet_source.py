"""A wallet records where its key came from (never the key), so a worker can load it again."""

from __future__ import annotations

import json
import pickle

import pytest
from eth_account import Account

import x402lab as xl
from x402lab.errors import ConfigError

KEY = "0x" + "4f" * 32


def test_a_wallet_from_the_environment_is_loaded_again_from_the_same_variable(monkeypatch):
    monkeypatch.setenv("TEAM_KEY", KEY)
    wallet = xl.Wallet.from_env("TEAM_KEY")
    assert wallet.source.reloadable and wallet.source.load() == wallet
    assert KEY[2:] not in repr(wallet.source) and KEY[2:] not in pickle.dumps(wallet.source).hex()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(wallet)


def test_a_keyfile_with_password_env_is_loaded_again_and_a_literal_password_is_not(
    tmp_path, monkeypatch
):
    keyfile = tmp_path / "key.json"
    keyfile.write_text(json.dumps(Account.encrypt(KEY, "s3cret", kdf="scrypt", iterations=2**10)))
    monkeypatch.setenv("KEY_PASSWORD", "s3cret")
    wallet = xl.Wallet.from_keyfile(keyfile, password_env="KEY_PASSWORD")
    assert wallet == xl.Wallet.from_key(KEY) and wallet.source.load() == wallet
    assert wallet.source.name == str(keyfile.absolute())
    assert "s3cret" not in repr(wallet.source)

    literal = xl.Wallet.from_keyfile(keyfile, "s3cret")
    assert not literal.source.reloadable and "s3cret" not in repr(literal.source)
    with pytest.raises(ConfigError, match="password_env='VAR'"):
        literal.source.load()


def test_keyfile_arguments_are_checked(tmp_path, monkeypatch):
    keyfile = tmp_path / "key.json"
    keyfile.write_text(json.dumps(Account.encrypt(KEY, "s3cret", kdf="scrypt", iterations=2**10)))
    with pytest.raises(ConfigError, match="one of them"):
        xl.Wallet.from_keyfile(keyfile)
    with pytest.raises(ConfigError, match="one of them"):
        xl.Wallet.from_keyfile(keyfile, "s3cret", password_env="KEY_PASSWORD")
    monkeypatch.delenv("KEY_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="KEY_PASSWORD is not set"):
        xl.Wallet.from_keyfile(keyfile, password_env="KEY_PASSWORD")


@pytest.mark.parametrize("make", ["from_key", "create"])
def test_a_wallet_held_by_this_process_only_says_what_to_use(make):
    wallet = xl.Wallet.from_key(KEY) if make == "from_key" else xl.Wallet.create()
    assert not wallet.source.reloadable
    with pytest.raises(ConfigError, match=rf"Wallet\.{make}\(\).*Wallet\.from_env"):
        wallet.source.load()

"""A plan's kernel holds no key of the user's: a notebook that leaves rehearsal on purpose
signs nothing with the user's wallet.

The user's key is in ``X402LAB_PRIVATE_KEY`` and their keyfile's password in
``X402LAB_KEY_PASSWORD``. The notebook pops ``X402LAB_REHEARSAL`` (so its ``connect()`` is not
rehearsed), loads ``Wallet.from_env()`` and pays a real gateway on 127.0.0.1 (the emulator),
and tries the keyfile (through its variable and by its path). The gateway's chain shows the
payment it got came from a stand-in key's address, never the user's; the keyfile does not
open; the variables the kernel saw are the stand-ins, not the user's values.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import nbformat
import pytest
from eth_account import Account
from nbformat.v4 import new_code_cell, new_notebook

import x402lab as xl
from x402lab.planning.environment import without_credentials
from x402lab.wallet import Wallet

CELLS = [
    "import os\nimport x402lab as xl",
    # In rehearsal, from_keyfile does not open the file: a throwaway wallet stands in.
    "rehearsed = xl.Wallet.from_keyfile(os.environ['KEYFILE'],\n"
    "                               password_env='X402LAB_KEY_PASSWORD')",
    "os.environ.pop('X402LAB_REHEARSAL')  # the notebook leaves rehearsal\n"
    "lab = xl.connect(os.environ['PLAN_GW'], wallet=xl.Wallet.from_env(),\n"
    "                 ledger=os.environ['PLAN_LEDGER'], budget=xl.Budget(usd=1))\n"
    "lab.chat('Spend it for real', model='qwen-3-8-27b', max_tokens=5)",
    # Out of rehearsal: the variable naming the keyfile holds a stand-in (cannot read it),
    # and the file named as it is cannot be opened with the stand-in password.
    "for path, why in [(os.environ['KEYFILE'], 'cannot read'), (KEYFILE, 'cannot decrypt')]:\n"
    "    try:\n"
    "        xl.Wallet.from_keyfile(path, password_env='X402LAB_KEY_PASSWORD')\n"
    "    except xl.ConfigError as exc:\n"
    "        assert why in str(exc), exc\n"
    "    else:\n"
    "        raise AssertionError('the keyfile opened in the plan kernel')",
]


@pytest.mark.timeout(300)
def test_a_notebook_leaving_rehearsal_signs_nothing_with_the_users_key(
    tmp_path: Path, emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "0x" + secrets.token_hex(32)
    user = Wallet.from_key(key).address
    password = "correct horse " + secrets.token_hex(4)
    keyfile = tmp_path / "keyfile.json"
    keyfile.write_text(json.dumps(Account.encrypt(key, password, kdf="pbkdf2", iterations=2)))
    monkeypatch.setenv("X402LAB_PRIVATE_KEY", key)
    monkeypatch.setenv("X402LAB_KEY_PASSWORD", password)
    monkeypatch.setenv("KEYFILE", str(keyfile))
    monkeypatch.setenv("PLAN_GW", emulator.gateway_url)
    monkeypatch.setenv("PLAN_LEDGER", str(tmp_path / "escaped.sqlite"))
    assert Wallet.from_keyfile(keyfile, password_env="X402LAB_KEY_PASSWORD").address == user
    # The notebook in a folder of its own: the plan's kernel writes nothing in it, and the
    # escaped lab's ledger is elsewhere.
    (tmp_path / "notebook").mkdir()
    path = tmp_path / "notebook" / "escape.ipynb"
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [*CELLS[:-1], f"KEYFILE = {str(keyfile)!r}\n{CELLS[-1]}"]
    notebook = new_notebook(cells=[new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = kernelspec
    nbformat.write(notebook, path)

    plan = xl.plan(path, progress=None)

    # Every cell ran (a failing one would have a row saying so), and the escaped call paid
    # the gateway: from a stand-in key's address, a key of nobody's.
    assert plan.empty, plan.to_text()
    payers = {t.payer.lower() for t in emulator.chain.transfers()}
    assert len(payers) == 1 and user.lower() not in payers
    assert key not in plan.to_text()
    said = " ".join(plan.attrs["plan"]["notes"])
    for name in ("KEYFILE", "X402LAB_KEY_PASSWORD", "X402LAB_PRIVATE_KEY"):
        assert name in said, said


def test_the_environment_of_a_plan_keeps_no_key_or_password() -> None:
    key = "0x" + secrets.token_hex(32)
    env, replaced = without_credentials(
        {
            "X402LAB_PRIVATE_KEY": key,
            "MY_WALLET": key[2:],  # a key under any name, without 0x too
            "X402LAB_KEY_PASSWORD": "hunter2",
            "DB_PASSWD": "x",
            "HOME": "/home/me",
            "PWD": "/home/me/work",
            "X402LAB_CHAIN_RPC_URL": "http://127.0.0.1:8545",
        }
    )
    assert replaced == ["DB_PASSWD", "MY_WALLET", "X402LAB_KEY_PASSWORD", "X402LAB_PRIVATE_KEY"]
    assert key not in env.values() and key[2:] not in env.values()
    assert Wallet.from_key(env["MY_WALLET"]).address != Wallet.from_key(key).address
    assert env["X402LAB_KEY_PASSWORD"] != "hunter2" and env["DB_PASSWD"] != "x"
    kept = ("HOME", "PWD", "X402LAB_CHAIN_RPC_URL")
    assert [env[n] for n in kept] == ["/home/me", "/home/me/work", "http://127.0.0.1:8545"]

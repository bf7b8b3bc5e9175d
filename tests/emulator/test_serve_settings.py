"""Operator settings from the environment, fault flags, and the CLI's argument handling."""

from __future__ import annotations

import pytest

from x402lab.cli import COMMANDS, build_parser, main
from x402lab.emulator.chain import Chain
from x402lab.emulator.settings import RECEIVER_ADDRESS, EmulatorSettings, Faults
from x402lab.errors import ConfigError

WALLET = "0x1a642f0E3c3aF545E7AcBD38b07251B3990914F1"


def test_defaults_follow_the_specs():
    settings = EmulatorSettings.from_env({})
    assert settings == EmulatorSettings()
    assert settings.price_mult == 0.5
    assert settings.max_charge_usd == 50.0
    assert settings.min_charge_usd == 0.01
    assert settings.report_usd == 0.01
    assert settings.test_mode is True
    assert settings.test_wallet is None
    assert settings.facilitator_url is None
    assert settings.pay_to == RECEIVER_ADDRESS
    assert settings.balance_usd == 100.0
    assert settings.faults == Faults()


def test_every_operator_variable_is_read():
    settings = EmulatorSettings.from_env(
        {
            "X402_PROVIDER_PRICE_MULT": "0.75",
            "X402_PROVIDER_MAX_CHARGE_USD": "12.5",
            "X402_INTEL_REPORT_USD": "0.02",
            "X402_AGENT_TEST_MODE": "true",
            "X402_AGENT_TEST_WALLET": WALLET,
            "INTEL_LIBRARY_SECRET": "shh",
            "X402_FACILITATOR_URL": "http://127.0.0.1:9999/",
        }
    )
    assert settings.price_mult == 0.75
    assert settings.max_charge_usd == 12.5
    assert settings.report_usd == 0.02
    assert settings.test_mode is True
    assert settings.test_wallet == WALLET
    assert settings.library_secret == "shh"
    assert settings.facilitator_url == "http://127.0.0.1:9999"
    assert settings.settlement_configured is True


def test_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("X402_PROVIDER_PRICE_MULT", "0.9")
    assert EmulatorSettings.from_env().price_mult == 0.9


def test_overrides_win_over_the_environment():
    settings = EmulatorSettings.from_env(
        {"X402_PROVIDER_PRICE_MULT": "0.75"}, price_mult=0.6, seed=4
    )
    assert (settings.price_mult, settings.seed) == (0.6, 4)
    with pytest.raises(ConfigError, match="no_such_setting"):
        EmulatorSettings.from_env({}, no_such_setting=1)


def test_test_mode_off_without_facilitator_means_settlement_not_configured():
    assert EmulatorSettings.from_env({"X402_AGENT_TEST_MODE": "false"}).settlement_configured is (
        False
    )
    with_facilitator = EmulatorSettings.from_env(
        {"X402_AGENT_TEST_MODE": "0", "X402_FACILITATOR_URL": "https://fac.example"}
    )
    assert with_facilitator.settlement_configured is True
    assert with_facilitator.test_mode is False


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X402_PROVIDER_PRICE_MULT", "abc"),
        ("X402_PROVIDER_PRICE_MULT", "0"),
        ("X402_PROVIDER_PRICE_MULT", "nan"),
        ("X402_PROVIDER_MAX_CHARGE_USD", "-1"),
        ("X402_INTEL_REPORT_USD", "inf"),
        ("X402_AGENT_TEST_MODE", "maybe"),
        ("X402_AGENT_TEST_WALLET", "0x1234"),
        ("X402_FACILITATOR_URL", "ftp://nope"),
    ],
)
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        EmulatorSettings.from_env({name: value})


@pytest.mark.parametrize(
    "faults",
    [
        {"rate_429": 1.5},
        {"rate_5xx": -0.1},
        {"settle_fail_rate": float("nan")},
        {"latency_s": -1.0},
        {"paid_then_500_rate": True},
    ],
)
def test_faults_out_of_range_are_refused(faults):
    with pytest.raises(ConfigError):
        Faults(**faults)


def test_settings_validate_their_fields():
    with pytest.raises(ConfigError, match="pay_to"):
        EmulatorSettings(pay_to="nobody")
    with pytest.raises(ConfigError, match="min_charge_usd"):
        EmulatorSettings(min_charge_usd=2.0, max_charge_usd=1.0)
    assert EmulatorSettings().with_faults(rate_429=1.0).faults.rate_429 == 1.0


def test_chain_for_settings_funds_only_in_test_mode():
    assert Chain.for_settings(EmulatorSettings(balance_usd=3)).balance_of(WALLET) == 3_000_000
    assert Chain.for_settings(EmulatorSettings(test_mode=False)).balance_of(WALLET) == 0


def test_cli_registers_serve_with_every_flag():
    assert "serve" in COMMANDS
    args = build_parser().parse_args(
        [
            "serve",
            "--host", "127.0.0.1",
            "--gateway-port", "0",
            "--reports-port", "0",
            "--job-seconds", "1.5",
            "--seed", "9",
            "--balance-usd", "7",
            "--rate-429", "0.1",
            "--retry-after", "2",
            "--rate-5xx", "0.2",
            "--settle-fail-rate", "0.3",
            "--paid-then-500-rate", "0.4",
            "--latency", "0.05",
            "--paid-latency", "0.5",
        ]
    )  # fmt: skip
    assert (args.job_seconds, args.seed, args.balance_usd) == (1.5, 9, 7.0)
    assert (args.rate_429, args.retry_after, args.rate_5xx) == (0.1, 2.0, 0.2)
    assert (args.settle_fail_rate, args.paid_then_500_rate) == (0.3, 0.4)
    assert (args.latency, args.paid_latency) == (0.05, 0.5)


def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--gateway-port", "70000"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main([])
    assert "COMMAND" in capsys.readouterr().err

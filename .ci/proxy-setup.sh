#!/usr/bin/env bash
# What the proxy tests (tests/transport/test_proxy.py) need on a fresh Debian machine: the
# tinyproxy binary (Debian's tinyproxy-bin, without the system service). The tests start
# their own tinyproxy on 127.0.0.1 with a configuration of their own and stop it.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

if ! command -v tinyproxy >/dev/null 2>&1; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q tinyproxy-bin
fi
tinyproxy -v

#!/usr/bin/env bash
# What the PostgreSQL tests (tests/postgres, the shared-ledger benchmark) need on a fresh Debian
# machine: a running PostgreSQL server and a superuser role for the current user, reached over
# the local socket with peer authentication. Installs Debian's postgresql where it is missing.
# The tests create and drop their own databases; X402LAB_TEST_POSTGRES_URL overrides the server.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

if ! command -v pg_lsclusters >/dev/null 2>&1; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q postgresql
fi

# The first cluster Debian made (for example "15 main"); create one if there is none.
read -r version cluster _ < <(pg_lsclusters --no-header | head -n 1) || true
if [ -z "${version:-}" ]; then
  version="$(ls /usr/lib/postgresql | sort -n | tail -n 1)"
  cluster=main
  $SUDO pg_createcluster "$version" "$cluster"
fi
if ! pg_lsclusters --no-header | grep -q "^$version *$cluster .*online"; then
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start
fi

me="$(id -un)"
if ! $SUDO su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname = '$me'\"" | grep -q 1; then
  $SUDO su postgres -c "createuser -s $me"
fi
psql -d postgres -tAc "SELECT 'postgres ' || current_setting('server_version') || ' as ' || current_user"

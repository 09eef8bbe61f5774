# shellcheck shell=bash
# Throwaway PostgreSQL server for the tests.
#
# pith_postgres_start: when PITH_TEST_POSTGRES_URL is already set, uses that server and starts
# nothing. Otherwise finds the PostgreSQL 15 binaries (installing postgresql-15 with apt-get when
# they are missing), initialises a cluster in a fresh temporary directory, starts it on a free
# loopback port with trust authentication, creates the database `pith_test` and exports
#   PITH_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:<port>/pith_test
# When run as root the server runs as the `postgres` OS user (PostgreSQL refuses to run as root).
#
# pith_postgres_stop: stops a server started by pith_postgres_start and removes its directory.

PITH_PG_DIR=""
PITH_PG_BIN=""
PITH_PG_STARTED=0

# Finds a directory holding initdb and pg_ctl, preferring PostgreSQL 15.
_pith_pg_find_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin /usr/local/pgsql/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

# Installs PostgreSQL with apt-get (root only).
_pith_pg_install() {
  if [ "$(id -u)" != "0" ]; then
    echo "postgres: binaries not found and not root; install postgresql-15 or set PITH_TEST_POSTGRES_URL" >&2
    return 1
  fi
  echo "postgres: installing postgresql-15 with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq postgresql-15 >/dev/null || apt-get install -y -qq postgresql >/dev/null
}

# Prints a free TCP port on 127.0.0.1.
_pith_pg_free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return 0
  fi
  local port=55432
  while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1))
  done
  echo "$port"
}

# Runs a command as the server's OS user: `postgres` when we are root, ourselves otherwise.
_pith_pg_as_owner() {
  if [ "$(id -u)" = "0" ]; then
    if command -v runuser >/dev/null 2>&1; then
      runuser -u postgres -- "$@"
    else
      su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  else
    "$@"
  fi
}

pith_postgres_start() {
  if [ -n "${PITH_TEST_POSTGRES_URL:-}" ]; then
    echo "postgres: using PITH_TEST_POSTGRES_URL from the environment"
    return 0
  fi
  PITH_PG_BIN=$(_pith_pg_find_bin) || {
    _pith_pg_install || return 1
    PITH_PG_BIN=$(_pith_pg_find_bin) || {
      echo "postgres: initdb/pg_ctl still missing after installing" >&2
      return 1
    }
  }
  if [ "$(id -u)" = "0" ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  fi
  PITH_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pith-pg.XXXXXX")
  chmod 700 "$PITH_PG_DIR"
  if [ "$(id -u)" = "0" ]; then
    chown postgres: "$PITH_PG_DIR"
  fi
  local data="$PITH_PG_DIR/data" port
  if ! _pith_pg_as_owner "$PITH_PG_BIN/initdb" -D "$data" -U postgres --auth=trust \
    --encoding=UTF8 --no-locale >"$PITH_PG_DIR/initdb.log" 2>&1; then
    echo "postgres: initdb failed; log follows" >&2
    cat "$PITH_PG_DIR/initdb.log" >&2
    return 1
  fi
  port=$(_pith_pg_free_port)
  if ! _pith_pg_as_owner "$PITH_PG_BIN/pg_ctl" -D "$data" -l "$PITH_PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $PITH_PG_DIR -c max_connections=200" \
    start >/dev/null; then
    echo "postgres: server failed to start; log follows" >&2
    cat "$PITH_PG_DIR/server.log" >&2
    return 1
  fi
  PITH_PG_STARTED=1
  if ! _pith_pg_as_owner "$PITH_PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres pith_test; then
    echo "postgres: createdb pith_test failed" >&2
    return 1
  fi
  export PITH_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/pith_test"
  echo "postgres: PostgreSQL ($PITH_PG_BIN) running on 127.0.0.1:$port, data in $PITH_PG_DIR"
}

pith_postgres_stop() {
  if [ "$PITH_PG_STARTED" = "1" ] && [ -n "$PITH_PG_DIR" ]; then
    _pith_pg_as_owner "$PITH_PG_BIN/pg_ctl" -D "$PITH_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    PITH_PG_STARTED=0
  fi
  if [ -n "$PITH_PG_DIR" ] && [ -d "$PITH_PG_DIR" ]; then
    rm -rf "$PITH_PG_DIR"
  fi
  PITH_PG_DIR=""
}

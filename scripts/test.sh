#!/usr/bin/env bash
# Runs the whole connstore suite: vet, then every test with -race against
# PostgreSQL and SQLite. Unless CONNSTORE_TEST_PG_DSN names a server, it
# starts a throwaway PostgreSQL cluster on a free loopback port (installing
# the server with apt-get where its binaries are missing), and in front of it
# a PgBouncer in transaction pooling (installed the same way) for the
# PgBouncer tests, and stops both on exit. CONNSTORE_TEST_PGBOUNCER_DSN names
# an existing PgBouncer instead; a caller naming its own server gets no
# PgBouncer unless it names one too.
# Arguments, if any, replace the default go test arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

pg_bindir() {
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return
	fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return
		fi
	done
}

# apt_install installs a Debian package the suite needs but cannot find.
apt_install() {
	log "$1 not found; installing with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "$1" >/dev/null
}

# free_port picks a loopback port nothing listens on, below the kernel's
# ephemeral range: a port inside it can be taken by any outgoing connection
# between the pick and the server's bind (CI met exactly that). The servers
# still retry with another port when the bind fails.
free_port() {
	local port low=32768
	if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
		read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	fi
	[ "$low" -gt 12000 ] || low=32768
	for _ in $(seq 1 200); do
		port=$((10000 + RANDOM % (low - 10000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	echo "no free loopback port found" >&2
	return 1
}

# as_pg runs a command as the unprivileged owner of the cluster: Postgres
# refuses to run as root.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u "$PG_USER" -- "$@")
	else
		"$@"
	fi
}

start_pg() {
	local bindir
	bindir=$(pg_bindir)
	if [ -z "$bindir" ]; then
		apt_install postgresql
		bindir=$(pg_bindir)
	fi
	[ -n "$bindir" ] || { echo "PostgreSQL binaries still missing after install" >&2; exit 1; }

	PG_USER=$(id -un)
	if [ "$(id -u)" -eq 0 ]; then
		PG_USER=postgres
		id -u "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$PG_USER"
	fi
	PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/connstore-pg.XXXXXX")
	chmod 755 "$PG_DIR"
	[ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$PG_DIR"
	as_pg "$bindir/initdb" -D "$PG_DIR/data" -U connstore -A trust --no-sync -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
		{ cat "$PG_DIR/initdb.log" >&2; exit 1; }
	trap stop_pg EXIT
	local port opts started=""
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		log "starting PostgreSQL ($bindir) on 127.0.0.1:$port"
		opts="-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=400 ${PG_DURABILITY-"-c fsync=off -c synchronous_commit=off -c full_page_writes=off"}"
		if as_pg "$bindir/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start -o "$opts" >/dev/null; then
			started=1
			break
		fi
		log "PostgreSQL did not start on $port; trying another port"
	done
	[ -n "$started" ] || { cat "$PG_DIR/server.log" >&2; exit 1; }
	PG_BINDIR=$bindir
	PG_PORT=$port
	export CONNSTORE_TEST_PG_DSN="postgres://connstore@127.0.0.1:$port/postgres?sslmode=disable"
	# The restart-under-load test restarts this cluster (pg_ctl keeps its options).
	# The worker's shutdown test stops it (immediate mode) and starts it again.
	local pgctl="$bindir/pg_ctl -D $PG_DIR/data -w -t 60"
	local as=""
	if [ "$(id -u)" -eq 0 ]; then as="cd / && runuser -u $PG_USER -- "; fi
	export CONNSTORE_TEST_PG_RESTART="$as$pgctl -m fast restart >/dev/null"
	export CONNSTORE_TEST_PG_STOP="$as$pgctl -m immediate stop >/dev/null"
	export CONNSTORE_TEST_PG_START="$as$pgctl -l $PG_DIR/server.log start -o '$opts' >/dev/null"
}

stop_pg() {
	if [ -n "${BOUNCER_PIDFILE:-}" ] && [ -s "$BOUNCER_PIDFILE" ]; then
		kill "$(cat "$BOUNCER_PIDFILE")" 2>/dev/null || true
	fi
	as_pg "$PG_BINDIR/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$PG_DIR"
}

pgbouncer_bin() {
	command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; } || true
}

# start_pgbouncer puts a PgBouncer in transaction pooling, the usual
# production set-up, in front of the throwaway cluster (start_pg first). Its
# ini, auth file, log and pidfile live in the cluster's temporary directory,
# so stop_pg stops it and removes them. Any database name is forwarded to the
# cluster (the "*" entry): the PgBouncer test makes a database of its own,
# since a search_path in the DSN is a startup parameter PgBouncer refuses.
start_pgbouncer() {
	local bin
	bin=$(pgbouncer_bin)
	if [ -z "$bin" ]; then
		apt_install pgbouncer
		bin=$(pgbouncer_bin)
	fi
	[ -n "$bin" ] || { echo "PgBouncer still missing after install" >&2; exit 1; }
	local dir="$PG_DIR/pgbouncer"
	mkdir -p "$dir"
	BOUNCER_PIDFILE="$dir/pgbouncer.pid"
	local attempt
	for attempt in 1 2 3 4 5; do
		if try_pgbouncer "$bin" "$dir"; then
			return
		fi
		log "PgBouncer did not start (attempt $attempt); trying another port"
	done
	cat "$dir/pgbouncer.log" >&2 2>/dev/null
	exit 1
}

# try_pgbouncer starts PgBouncer on a fresh free port and waits until it
# listens; it fails (and leaves nothing running) when the bind fails.
try_pgbouncer() {
	local bin=$1 dir=$2 port
	port=$(free_port)
	# trust still needs the user listed in the auth file.
	echo '"connstore" ""' >"$dir/userlist.txt"
	cat >"$dir/pgbouncer.ini" <<-EOF
		[databases]
		* = host=127.0.0.1 port=$PG_PORT

		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $port
		unix_socket_dir =
		auth_type = trust
		auth_file = $dir/userlist.txt
		pool_mode = transaction
		default_pool_size = 20
		max_client_conn = 500
		logfile = $dir/pgbouncer.log
		pidfile = $dir/pgbouncer.pid
	EOF
	[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$dir"
	log "starting PgBouncer ($bin, transaction pooling) on 127.0.0.1:$port"
	# -d daemonizes once it listens; PgBouncer refuses to run as root.
	as_pg "$bin" -d "$dir/pgbouncer.ini" >"$dir/start.log" 2>&1 ||
		{ cat "$dir/start.log" "$dir/pgbouncer.log" >&2 2>/dev/null; return 1; }
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.1
	done
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "PgBouncer is not listening on 127.0.0.1:$port" >&2
		tail -n 5 "$dir/pgbouncer.log" >&2 2>/dev/null
		[ -s "$BOUNCER_PIDFILE" ] && kill "$(cat "$BOUNCER_PIDFILE")" 2>/dev/null
		rm -f "$BOUNCER_PIDFILE"
		return 1
	fi
	export CONNSTORE_TEST_PGBOUNCER_DSN="postgres://connstore@127.0.0.1:$port/postgres?sslmode=disable"
}

if [ "${1:-}" = "--bench" ]; then
	# Headline figures come from PostgreSQL as most users run it: default
	# settings, fsync on (the suite alone turns durability off, for speed).
	PG_DURABILITY=""
fi
if [ -z "${CONNSTORE_TEST_PG_DSN:-}" ]; then
	start_pg
	if [ "${1:-}" != "--bench" ] && [ -z "${CONNSTORE_TEST_PGBOUNCER_DSN:-}" ]; then
		start_pgbouncer
	fi
fi

if [ "${1:-}" = "--bench" ]; then
	# The side-by-side bench (its own module, so River stays out of the core).
	shift
	log "bench"
	(cd bench && go run . -out .. "$@")
	exit
fi
# The dashboard's browser test renders its pages in Debian's chromium.
if ! command -v chromium >/dev/null 2>&1; then
	apt_install chromium
fi
export CONNSTORE_TEST_CHROMIUM="${CONNSTORE_TEST_CHROMIUM:-$(command -v chromium)}"
# The browser tests' screenshots (artifacts/dashboard/*.png).
export CONNSTORE_TEST_ARTIFACTS="${CONNSTORE_TEST_ARTIFACTS:-$PWD/artifacts}"
if [ $# -gt 0 ]; then
	# Explicit go test arguments (benchmarks, one package, -run ...).
	go test "$@"
	exit
fi
# Nested modules keep heavy dependencies (OpenTelemetry, chromedp) out of
# the core's graph; each is vetted and tested on its own.
nested="otelconnstore dashboard/browsertest"
log "go vet"
go vet ./...
for m in $nested bench; do (cd "$m" && go vet ./...); done
log "go test -race"
go test -race -count=1 -timeout 20m ./...
for m in $nested; do
	log "go test -race ($m)"
	(cd "$m" && go test -race -count=1 -timeout 5m ./...)
done
# A short run of every fuzz target (their seed corpora run in go test too).
for target in models:FuzzJSONScan repository:FuzzReceiptValidation repository:FuzzOperationInputValidation \
	repository:FuzzSyncStateValidation; do
	log "fuzz ${target#*:} (${FUZZTIME:-40000x})"
	# A budget in executions, not seconds: with a duration, Go 1.26's fuzz
	# coordinator can report its own deadline as a failure ("context
	# deadline exceeded", no failing input) when it expires while a worker
	# is mid-call (Go issue 75804, fixed in 1.27). A count has no deadline
	# to race. No minimizing, for the same reason; a crasher is still
	# reported with its input. 40,000 calls take about 4 s here.
	go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "${FUZZTIME:-40000x}" -fuzzminimizetime 0 "./${target%%:*}"
done
if [ -n "${CONNSTORE_TEST_PG_RESTART:-}" ]; then
	# Alone: a restart cuts every other test's connections.
	log "server restart under load; server stopped under a worker pool"
	CONNSTORE_TEST_RESTART=1 go test -race -count=1 -timeout 5m \
		-run '^(TestServerRestartUnderLoad|TestWorkerShutdownServerStopped)$' ./integration_test
fi

#!/usr/bin/env bash
# hapg.sh: a real highly-available PostgreSQL on this machine, for tests and
# for trying failover by hand: one etcd and two Patroni nodes (pg1, pg2)
# running PostgreSQL 15 in synchronous mode, and HAProxy in front of them
# forwarding to whichever is the primary, all on 127.0.0.1.
#
# Needs (Debian): apt-get install -y --no-install-recommends patroni etcd-server haproxy
# plus PostgreSQL 15 in /usr/lib/postgresql/15/bin (HAPG_PG_BIN to change),
# curl and jq. Run as root (etcd, Patroni and HAProxy are started as user
# postgres) or as postgres.
#
# Commands (DIR holds everything: configs, data, logs, pid files; it is
# created if missing and owned by postgres, and must be reachable by postgres):
#   hapg.sh start DIR          start etcd, HAProxy, pg1 and pg2; wait until a
#                              leader runs, a synchronous standby streams and
#                              HAProxy forwards to the leader; print the URL
#   hapg.sh stop DIR           stop everything started for DIR (data is kept)
#   hapg.sh status DIR         print the cluster (patronictl list) and the URL
#   hapg.sh wait DIR           wait as start does
#   hapg.sh kill-primary DIR   SIGKILL the leader's Patroni and its postmaster
#                              (with its backends); print the killed node's name
#   hapg.sh restart NODE DIR   start NODE's Patroni again: it rewinds and rejoins
#                              as a standby (waits as 'wait' unless HAPG_WAIT=0)
#
# Ports, from HAPG_BASE_PORT (default 15432), fixed per DIR at its first start:
#   Postgres pg1 BASE, pg2 BASE+1; Patroni REST pg1 BASE+100, pg2 BASE+101;
#   etcd client BASE+200, peer BASE+201; HAProxy BASE+300.
# The app connects as user postgres with the password in DIR/env (from
# HAPG_PASSWORD, else random) over TCP, where pg_hba says md5 (the password is
# stored as scram-sha-256, so md5 lets the client do SCRAM); the multi-host URL
# with target_session_attrs=read-write is printed by start and kept in DIR/url,
# the URL through HAProxy in DIR/proxy_url. HAProxy asks each node's Patroni
# REST API GET /primary every second (200 on the leader only), forwards TCP to
# the node that answers 200, and cuts every session to a node it marks down
# (two failed checks), so that no client stays on a demoted or dead primary.
# Its config is DIR/haproxy.cfg, its log DIR/haproxy.log, its admin socket
# DIR/haproxy.sock ('show servers state').
# Other environment: HAPG_TIMEOUT (seconds for start/wait, default 120);
# HAPG_STOP=kill makes stop SIGKILL everything at once (for a DIR about to be
# removed) instead of the ~10s graceful shutdown.
set -euo pipefail

PG_BIN=${HAPG_PG_BIN:-/usr/lib/postgresql/15/bin}
# Debian's is in /usr/sbin, which a user's PATH may lack.
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
TIMEOUT=${HAPG_TIMEOUT:-120}
NODES=(pg1 pg2)

die() { echo "hapg: $*" >&2; exit 1; }
log() { echo "hapg: $*" >&2; }

usage() {
	sed -n '/^# Commands/,/^#   etcd client/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# AS_PG runs a command as postgres with a clean environment.
AS_PG=(env -i PATH="$PG_BIN:/usr/bin:/bin" LANG=C.UTF-8 LC_ALL=C.UTF-8)
if [[ $EUID -eq 0 ]]; then
	AS_PG=(setpriv --reuid=postgres --regid=postgres --init-groups -- "${AS_PG[@]}")
fi
# It runs in DIR, postgres's own: the caller's directory may be one postgres
# cannot enter (a clone in a home directory, or in a fresh mktemp -d, mode
# 0700), and initdb, finding no current directory, never bootstraps a node.
as_pg() { (cd "$DIR" && exec "${AS_PG[@]}" HOME="$DIR" "$@"); }

# launch PIDFILE LOGFILE CMD...: start CMD as postgres in its own session,
# detached (stdin /dev/null, output to LOGFILE), its pid in PIDFILE.
launch() {
	local pidfile=$1 logfile=$2
	shift 2
	rm -f "$pidfile"
	as_pg touch "$logfile"
	# exec: no shell of ours stays behind as the daemon's parent.
	# shellcheck disable=SC2016 # $$ and $@ are the inner sh's
	(cd "$DIR" && exec "${AS_PG[@]}" HOME="$DIR" setsid sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@") \
		>>"$logfile" 2>&1 </dev/null &
	local deadline=$((SECONDS + 10))
	until [[ -s $pidfile ]]; do
		((SECONDS < deadline)) || die "no pid file $pidfile"
		sleep 0.05
	done
}

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
# ours PID: PID is alive and one of DIR's processes (not a reused pid from a
# stale pid file): owned by postgres, its command line naming a path in DIR.
ours() {
	alive "${1:-}" && [[ $(stat -c %U "/proc/$1" 2>/dev/null) == postgres ]] &&
		[[ $(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) == *"$DIR/"* ]]
}
pidof_file() { if [[ -s $1 ]]; then head -n1 "$1"; fi; }

port_free() { [[ -z $(ss -Hltn "sport = :$1") ]]; }

# Port layout, from the BASE saved in DIR/env.
pg_port() { echo $((BASE + $1)); }          # node index 0 or 1
rest_port() { echo $((BASE + 100 + $1)); }
etcd_port() { echo $((BASE + 200)); }
etcd_peer() { echo $((BASE + 201)); }
proxy_port() { echo $((BASE + 300)); }
node_index() {
	local i
	for i in "${!NODES[@]}"; do [[ ${NODES[$i]} == "$1" ]] && { echo "$i"; return; }; done
	die "unknown node $1 (have: ${NODES[*]})"
}

load_env() {
	[[ -f $DIR/env ]] || die "$DIR has no cluster (no $DIR/env): run start first"
	# shellcheck disable=SC1091
	source "$DIR/env"
}

# cluster_json prints GET /cluster from the first node whose REST API answers.
cluster_json() {
	local i
	for i in "${!NODES[@]}"; do
		curl -fsS --max-time 2 "http://127.0.0.1:$(rest_port "$i")/cluster" 2>/dev/null && return 0
	done
	return 1
}

# leader prints the name of the running leader, if any.
leader() {
	cluster_json | jq -r '.members[] | select(.role == "leader" and .state == "running") | .name' | head -n1
}

# healthy succeeds when a leader runs and a sync standby both is named in the
# DCS and streams to the leader with sync_state 'sync' (pg_stat_replication,
# as the leader's GET /patroni reports it), and HAProxy forwards to the
# leader. Prints "leader sync".
healthy() {
	local js lead sync
	js=$(cluster_json) || return 1
	lead=$(jq -r '.members[] | select(.role == "leader" and .state == "running") | .name' <<<"$js" | head -n1)
	sync=$(jq -r '.members[] | select(.role == "sync_standby" and .state == "running") | .name' <<<"$js" | head -n1)
	[[ -n $lead && -n $sync ]] || return 1
	curl -fsS --max-time 2 "http://127.0.0.1:$(rest_port "$(node_index "$lead")")/patroni" 2>/dev/null |
		jq -e --arg s "$sync" '.role == "master" and
			any(.replication[]?; .application_name == $s and .state == "streaming" and .sync_state == "sync")' >/dev/null ||
		return 1
	proxied_to "$lead" || return 1
	echo "$lead $sync"
}

# proxied_to NODE succeeds when a connection through HAProxy reaches NODE's
# Postgres.
proxied_to() {
	local port
	port=$(PGPASSWORD=$PASSWORD PGCONNECT_TIMEOUT=2 "$PG_BIN/psql" -XAtq \
		"host=127.0.0.1 port=$(proxy_port) user=postgres dbname=postgres sslmode=disable" \
		-c 'SELECT inet_server_port()' 2>/dev/null) || return 1
	[[ $port == "$(pg_port "$(node_index "$1")")" ]]
}

wait_healthy() {
	local deadline=$((SECONDS + TIMEOUT)) got
	until got=$(healthy); do
		if ((SECONDS >= deadline)); then
			log "no leader with a streaming sync standby and HAProxy forwarding to it after ${TIMEOUT}s; cluster:"
			cluster_json >&2 || true
			# Patroni's log says what it waits for; Postgres's own, why.
			for n in "${NODES[@]}"; do
				log "--- $n/patroni.log"
				tail -n 30 "$DIR/$n/patroni.log" >&2 || true
				log "--- $n/log/postgresql.log"
				tail -n 30 "$DIR/$n/log/postgresql.log" >&2 || true
			done
			log "--- haproxy.log"
			tail -n 30 "$DIR/haproxy.log" >&2 || true
			exit 1
		fi
		sleep 0.25
	done
	log "leader ${got% *}, synchronous standby ${got#* } streaming, HAProxy forwarding to ${got% *}"
}

write_node_config() {
	local i=$1 n=${NODES[$1]}
	mkdir -p "$DIR/$n"
	cat >"$DIR/$n/patroni.yml" <<EOF
scope: hapg
namespace: /hapg/
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$i")
  connect_address: 127.0.0.1:$(rest_port "$i")
etcd3:
  hosts: 127.0.0.1:$(etcd_port)
bootstrap:
  # Written to the DCS once, by the node that initializes the cluster.
  dcs:
    # Failover timing. ttl is the leader lease: a killed leader's lock expires
    # ttl seconds after its last refresh, and no one may promote before that,
    # so the write outage is roughly ttl - (time since last refresh) + promote.
    # loop_wait is how often each node runs its HA loop and the leader
    # refreshes the lease (replicas also watch the leader key in etcd, so they
    # notice the expiry at once). retry_timeout is how long etcd and Postgres
    # calls are retried before the leader demotes itself. Patroni needs
    # loop_wait + 2*retry_timeout <= ttl (2 + 2*4 = 10) so that a leader cut off
    # from etcd demotes itself before its lease can expire and another node
    # promotes: no two primaries. The defaults (30/10/10) give ~30s outages.
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    # Only a node within 1 MiB of the leader's last reported WAL position may
    # be promoted (the default). In synchronous mode only the sync standby is
    # a candidate anyway, and it has every committed transaction.
    maximum_lag_on_failover: 1048576
    # Commits wait for the synchronous standby, and only it may be promoted,
    # so no acknowledged commit is lost on failover. Not strict: while one of
    # the two nodes is down the survivor accepts writes alone (strict mode
    # would block every commit until the other node is back).
    synchronous_mode: true
    synchronous_mode_strict: false
    synchronous_node_count: 1
    postgresql:
      # A killed primary may have WAL the new primary never got: rewind it
      # (after a single-user crash recovery) so it rejoins as a standby, and
      # re-clone it should the rewind fail.
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: true
      remove_data_directory_on_diverged_timelines: true
      use_slots: true
      parameters:
        wal_level: replica
        wal_log_hints: "on"
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        # Room for a pooler's server connections beside the sessions that
        # go past it, and for a test's own.
        max_connections: 200
        shared_buffers: 64MB
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - data-checksums
postgresql:
  listen: 127.0.0.1:$(pg_port "$i")
  connect_address: 127.0.0.1:$(pg_port "$i")
  data_dir: $DIR/$n/data
  bin_dir: $PG_BIN
  pgpass: $DIR/$n/pgpass
  # Patroni itself connects over the Unix socket (trust).
  use_unix_socket: true
  authentication:
    superuser:
      username: postgres
      password: "$PASSWORD"
    replication:
      username: replicator
      password: "$PASSWORD"
  parameters:
    unix_socket_directories: $DIR/$n
    logging_collector: "on"
    log_directory: $DIR/$n/log
    log_filename: postgresql.log
    log_line_prefix: "%m [%p] %q%u@%d "
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 md5
    - host all all 127.0.0.1/32 md5
EOF
}

# write_haproxy_config: HAProxy forwards TCP to the node whose Patroni
# answers GET /primary with 200, checked every second; two failed checks mark
# a node down and cut its sessions (on-marked-down shutdown-sessions), one
# good check marks it up. Sessions last as long as their clients keep them:
# the service's listeners and its workers' presence sit idle for a long time.
write_haproxy_config() {
	cat >"$DIR/haproxy.cfg" <<EOF
global
    log stdout format raw local0 info
    stats socket $DIR/haproxy.sock mode 600 level admin

defaults
    mode tcp
    log global
    option tcplog
    option log-health-checks
    timeout connect 2s
    timeout check 1s
    timeout client 24h
    timeout server 24h

listen primary
    bind 127.0.0.1:$(proxy_port)
    option httpchk
    http-check send meth GET uri /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
    server pg1 127.0.0.1:$(pg_port 0) check port $(rest_port 0)
    server pg2 127.0.0.1:$(pg_port 1) check port $(rest_port 1)
EOF
}

start_haproxy() {
	port_free "$(proxy_port)" || die "port $(proxy_port) (HAProxy) is in use"
	launch "$DIR/haproxy.pid" "$DIR/haproxy.log" "$HAPROXY" -db -f "$DIR/haproxy.cfg"
	local deadline=$((SECONDS + 10))
	while port_free "$(proxy_port)"; do
		alive "$(pidof_file "$DIR/haproxy.pid")" || { tail -n 20 "$DIR/haproxy.log" >&2; die "haproxy exited"; }
		((SECONDS < deadline)) || die "haproxy not listening on $(proxy_port) after 10s"
		sleep 0.05
	done
}

start_etcd() {
	as_pg mkdir -p "$DIR/etcd"
	launch "$DIR/etcd.pid" "$DIR/etcd.log" etcd \
		--name hapg --data-dir "$DIR/etcd/data" \
		--listen-client-urls "http://127.0.0.1:$(etcd_port)" \
		--advertise-client-urls "http://127.0.0.1:$(etcd_port)" \
		--listen-peer-urls "http://127.0.0.1:$(etcd_peer)" \
		--initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer)" \
		--initial-cluster "hapg=http://127.0.0.1:$(etcd_peer)" \
		--initial-cluster-token "hapg-$BASE" --initial-cluster-state new
	local deadline=$((SECONDS + 30))
	until curl -fsS --max-time 1 "http://127.0.0.1:$(etcd_port)/health" 2>/dev/null | grep -q '"health":"true"'; do
		alive "$(pidof_file "$DIR/etcd.pid")" || { tail -n 20 "$DIR/etcd.log" >&2; die "etcd exited"; }
		((SECONDS < deadline)) || die "etcd not healthy after 30s"
		sleep 0.1
	done
}

start_node() {
	local n=$1 i
	i=$(node_index "$n")
	ours "$(pidof_file "$DIR/$n/patroni.pid")" && die "$n's Patroni is already running"
	port_free "$(pg_port "$i")" || die "port $(pg_port "$i") (Postgres of $n) is in use"
	port_free "$(rest_port "$i")" || die "port $(rest_port "$i") (REST of $n) is in use"
	launch "$DIR/$n/patroni.pid" "$DIR/$n/patroni.log" patroni "$DIR/$n/patroni.yml"
}

cmd_start() {
	mkdir -p "$DIR"
	if [[ ! -f $DIR/env ]]; then
		local pw=${HAPG_PASSWORD:-$(head -c 18 /dev/urandom | base64 | tr -d '/+=')}
		printf 'BASE=%d\nPASSWORD=%q\n' "${HAPG_BASE_PORT:-15432}" "$pw" >"$DIR/env"
	fi
	load_env
	ours "$(pidof_file "$DIR/etcd.pid")" && die "etcd for $DIR is already running (stop first)"
	local p
	for p in $(etcd_port) $(etcd_peer); do port_free "$p" || die "port $p (etcd) is in use"; done
	for i in "${!NODES[@]}"; do write_node_config "$i"; done
	write_haproxy_config
	echo "postgres://postgres:$PASSWORD@127.0.0.1:$(pg_port 0),127.0.0.1:$(pg_port 1)/postgres?sslmode=disable&target_session_attrs=read-write" >"$DIR/url"
	echo "postgres://postgres:$PASSWORD@127.0.0.1:$(proxy_port)/postgres?sslmode=disable" >"$DIR/proxy_url"
	chmod 0700 "$DIR"
	chown -R postgres:postgres "$DIR" 2>/dev/null || [[ $EUID -ne 0 ]]

	start_etcd
	# Before the nodes: it forwards nowhere until one is the leader.
	start_haproxy
	# Both at once: one wins the initialize key and runs initdb, the other
	# waits for a leader and clones it with pg_basebackup.
	for n in "${NODES[@]}"; do start_node "$n"; done
	wait_healthy
	cat "$DIR/url"
}

# kill_postmaster PID: SIGKILL a postmaster and its children at once, as a
# crash would. Postgres children each run in a session of their own, so there
# is no group to signal: stop the postmaster (no more forks), list its
# children, then kill them all.
kill_postmaster() {
	local pm=$1 kids
	ours "$pm" || return 0
	kill -STOP "$pm" 2>/dev/null || true
	kids=$(ps -o pid= --ppid "$pm" 2>/dev/null || true)
	# shellcheck disable=SC2086
	kill -KILL "$pm" $kids 2>/dev/null || true
}

cmd_kill_primary() {
	load_env
	local lead ppid pmpid
	lead=$(leader) || true
	[[ -n $lead ]] || die "no running leader"
	ppid=$(pidof_file "$DIR/$lead/patroni.pid")
	pmpid=$(pidof_file "$DIR/$lead/data/postmaster.pid")
	ours "$ppid" || die "leader $lead has no live Patroni (pid file $DIR/$lead/patroni.pid)"
	# Patroni first, so it cannot restart the postmaster in between.
	kill -KILL "$ppid"
	kill_postmaster "$pmpid"
	local deadline=$((SECONDS + 10))
	while [[ -n $(leftovers "$DIR/$lead") ]]; do
		((SECONDS < deadline)) || die "$lead's processes survived SIGKILL: $(leftovers "$DIR/$lead" | tr '\n' ' ')"
		sleep 0.05
	done
	log "killed $lead (Patroni $ppid, postmaster ${pmpid:-none})"
	echo "$lead"
}

cmd_restart() {
	load_env
	start_node "$NODE"
	log "started $NODE's Patroni"
	[[ ${HAPG_WAIT:-1} == 0 ]] || wait_healthy
}

# leftovers [PREFIX] prints the pids of postgres-owned processes that belong
# to PREFIX (default DIR): their command line names a path under it, or their
# working directory is under it (Postgres backends run in their data dir).
leftovers() {
	local p pid cwd cmd pguid prefix=${1:-$DIR}
	pguid=$(id -u postgres)
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[[ $(stat -c %u "$p" 2>/dev/null) == "$pguid" ]] || continue
		cwd=$(readlink "$p/cwd" 2>/dev/null) || cwd=
		cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || cmd=
		if [[ $cwd == "$prefix"/* || $cmd == *"$prefix/"* ]]; then echo "$pid"; fi
	done
}

cmd_stop() {
	[[ -d $DIR ]] || return 0
	local pid n lead deadline
	if [[ ${HAPG_STOP:-} == kill ]]; then
		# For a DIR about to be removed: no graceful shutdown (which takes
		# ~10s, as the leader hands over to the standby on its way out).
		for n in "${NODES[@]}"; do
			pid=$(pidof_file "$DIR/$n/patroni.pid")
			ours "$pid" && kill -KILL "$pid"
		done
	fi
	# Patroni first (SIGTERM stops its Postgres too), then etcd. The leader
	# before the others: a sync standby told to stop first waits up to
	# 2*loop_wait for the leader to release it from sync duty.
	lead=$(leader 2>/dev/null) || true
	for n in $lead "${NODES[@]}"; do
		pid=$(pidof_file "$DIR/$n/patroni.pid")
		ours "$pid" || continue
		kill -TERM "$pid"
		deadline=$((SECONDS + 15))
		while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
	done
	for pid in "$(pidof_file "$DIR/etcd.pid")" "$(pidof_file "$DIR/haproxy.pid")"; do
		ours "$pid" || continue
		kill -TERM "$pid"
		deadline=$((SECONDS + 5))
		while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
	done
	# Whatever is left (a hung Patroni, an orphaned postmaster or backend).
	for n in "${NODES[@]}"; do
		pid=$(pidof_file "$DIR/$n/data/postmaster.pid")
		kill_postmaster "$pid"
	done
	local left
	left=$(leftovers)
	if [[ -n $left ]]; then
		log "killing leftovers: ${left//$'\n'/ }"
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null || true
	fi
	deadline=$((SECONDS + 10))
	while [[ -n $(leftovers) ]]; do
		((SECONDS < deadline)) || die "processes of $DIR survived SIGKILL: $(leftovers | tr '\n' ' ')"
		sleep 0.1
	done
	rm -f "$DIR"/etcd.pid "$DIR"/haproxy.pid "$DIR"/pg*/patroni.pid
	log "stopped"
}

cmd_status() {
	load_env
	patronictl -c "$DIR/${NODES[0]}/patroni.yml" list || true
	echo "URL: $(cat "$DIR/url")"
	echo "through HAProxy: $(cat "$DIR/proxy_url")"
}

[[ $# -ge 2 ]] || usage
CMD=$1
case $CMD in
restart)
	[[ $# -eq 3 ]] || usage
	NODE=$2
	DIR=$3
	;;
*)
	[[ $# -eq 2 ]] || usage
	DIR=$2
	;;
esac
DIR=$(realpath -m -- "$DIR")
[[ $DIR != / ]] || die "DIR must not be /"

for tool in curl jq ss setpriv; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
if [[ $CMD == start || $CMD == restart ]]; then
	for tool in patroni etcd; do
		command -v "$tool" >/dev/null ||
			die "$tool is not installed (apt-get install -y --no-install-recommends patroni etcd-server haproxy)"
	done
	[[ -x $HAPROXY ]] || die "haproxy is not installed (apt-get install -y --no-install-recommends haproxy)"

	[[ -x $PG_BIN/postgres ]] || die "no PostgreSQL in $PG_BIN (set HAPG_PG_BIN)"
	[[ $EUID -eq 0 || $(id -un) == postgres ]] || die "run as root or as postgres"
fi

case $CMD in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
wait) load_env; wait_healthy ;;
kill-primary) cmd_kill_primary ;;
restart) cmd_restart ;;
*) usage ;;
esac

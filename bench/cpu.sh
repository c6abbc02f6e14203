# Sourced by the bench/run_*.sh scripts: CPU time of a server process and of every PostgreSQL
# process on the machine.
# cpu_ticks PID: "<server ticks> <postgres ticks>" (utime + stime, clock ticks).
cpu_ticks() {
  local s p=0 q
  s=$(awk '{print $14 + $15}' "/proc/$1/stat")
  for q in $(pgrep -x postgres || true); do
    p=$((p + $(awk '{print $14 + $15}' "/proc/$q/stat" 2>/dev/null || echo 0)))
  done
  echo "$s $p"
}
# cpu_report S0 P0 S1 P1 WHAT: prints the milliseconds used between two cpu_ticks readings.
cpu_report() {
  local hz
  hz=$(getconf CLK_TCK)
  echo "$5: server $(( ($3 - $1) * 1000 / hz )) ms, postgres $(( ($4 - $2) * 1000 / hz )) ms"
}
# memory_report PID: the server's resident memory now and at its peak (VmRSS, VmHWM).
memory_report() {
  awk '/^VmRSS:/ {rss = $2} /^VmHWM:/ {hwm = $2}
       END {printf "memory: server resident %d MiB, peak %d MiB\n", rss / 1024, hwm / 1024}' \
    "/proc/$1/status"
}
# embedded_sql DATA_DIR SQL: runs SQL on the embedded PostgreSQL of a server's data directory
# (through its socket, with its password file) and prints the answer; nothing when it cannot.
embedded_sql() {
  local psql
  psql=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | head -1)
  [ -n "$psql" ] || return 0
  PGPASSWORD=$(cat "$1/postgres.password") "$psql" -XAtq \
    "host=$1/postgres port=5432 user=quartermaster dbname=postgres" -c "$2" 2>/dev/null || true
}
# wal_lsn DATA_DIR: the embedded PostgreSQL's current WAL position (pg_current_wal_lsn).
wal_lsn() { embedded_sql "$1" "select pg_current_wal_lsn()"; }
# wal_report DATA_DIR LSN0: the WAL PostgreSQL wrote since LSN0.
wal_report() {
  local lsn1
  lsn1=$(wal_lsn "$1")
  [ -n "$2" ] && [ -n "$lsn1" ] || return 0
  echo "postgres WAL written: $(embedded_sql "$1" \
    "select pg_wal_lsn_diff('$lsn1', '$2')::bigint / 1024") KiB"
}

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

# Shared by the shell benchmarks (sourced, not run).
#
# Sets `root` and `clowder`: the release binary, built into ${CARGO_TARGET_DIR:-target}
# unless CLOWDER_BIN already names one (benches/run-all.sh builds once and sets it).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${CLOWDER_BIN:-}" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
  bench_target=${CARGO_TARGET_DIR:-$root/target}
  case $bench_target in /*) ;; *) bench_target=$PWD/$bench_target ;; esac
  CLOWDER_BIN=$bench_target/release/clowder
fi
clowder=$CLOWDER_BIN
[ -x "$clowder" ] || { echo "no clowder binary at $clowder" >&2; exit 1; }
clk_tck=$(getconf CLK_TCK)

# utime + stime of a process (all its threads), in clock ticks.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# CPU time of each thread of a process, in ns ("TID NAME NS" lines; schedstat is
# exact, where the stat file counts 10 ms ticks): `thread_ns PID`.
thread_ns() {
  local task
  for task in /proc/"$1"/task/*; do
    printf '%s %s %s\n' "${task##*/}" "$(tr ' ' _ < "$task/comm")" "$(cut -d' ' -f1 "$task/schedstat")"
  done 2>/dev/null
}

# Per-thread CPU between two `thread_ns` listings, as "name x.xx%" over SECS seconds
# (threads that began or ended in between are left out): `thread_share BEFORE AFTER SECS`.
thread_share() {
  awk -v s="$3" 'NR == FNR { before[$1] = $3; next }
    ($1 in before) { printf "%s%s %.2f%%", sep, $2, ($3 - before[$1]) / 1e7 / s; sep = ", " }
    END { print "" }' "$1" "$2"
}

# Peak RSS of a process, e.g. "7664 kB".
peak_rss() { awk '/^VmHWM/ {print $2, $3}' "/proc/$1/status"; }

# The value of numeric field KEY of the first EVENT in DIR/harness-events.jsonl, waiting
# up to 30 s for it to appear: `event_field DIR loop_start pid`.
event_field() {
  local dir=$1 event=$2 key=$3 value=""
  for _ in $(seq 1 300); do
    value=$(grep -h "\"event\":\"$event\"" "$dir/harness-events.jsonl" 2>/dev/null | head -n 1 |
      sed -n "s/.*\"$key\":\([0-9]*\).*/\1/p")
    [ -n "$value" ] && { echo "$value"; return 0; }
    sleep 0.1
  done
  echo "no $event event in $dir" >&2
  return 1
}

# Ends a clowder loop like a user would (SIGINT twice: kill the session now), then makes
# sure neither it nor any process of its session's group is left: `stop_loop PID [PGID]`.
stop_loop() {
  local pid=$1 pgid=${2:-}
  kill -INT "$pid" 2>/dev/null || true
  sleep 0.3
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  [ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null || true
}

# Kills every process of group PGID still alive (a cleanup of last resort).
kill_group() { kill -KILL -- "-$1" 2>/dev/null || true; }

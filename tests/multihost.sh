#!/usr/bin/env bash
# multihost.sh (`make test-multihost`): a P=4 plan across two "hosts" on this machine: two network
# namespaces joined by a veth pair, each with its own hostname (unshare --uts), TCP between them,
# mpirun's rsh agent entering the namespace.  Measures the inter-host link
# with `profile comm`, runs the plan emulated with ranks 0,1 on one host and 2,3 on the other,
# and prints measured vs predicted.  Skips (with the reason) where namespaces cannot be made;
# always deletes what it created.  Knobs: MH_TIME_SCALE (1), MH_BYTES_SCALE (0.005: 160 KiB
# messages; over TCP a large message needs the sender to progress it too, see docs/executor.md),
# MH_FLAGS (extra exec flags).
set -u
cd "$(dirname "$0")/.."
OCTOPIPE=$(readlink -f "${OCTOPIPE:-${BUILD:-build}/octopipe}")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
skip() { echo "multihost: skipped: $*"; echo "multihost: 0 passed, 0 failed"; exit 0; }

[ -x "$OCTOPIPE" ] || skip "no binary at $OCTOPIPE (make first)"
[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
command -v ip >/dev/null && command -v unshare >/dev/null && command -v mpirun >/dev/null ||
  skip "needs ip (iproute2), unshare (util-linux) and mpirun"

id=$$
N1=oph1-$id N2=oph2-$id V1=vop1-$id V2=vop2-$id
T=$(mktemp -d /tmp/octopipe-multihost-XXXXXX)
cleanup() {
  ip netns del "$N1" 2>/dev/null; ip netns del "$N2" 2>/dev/null; ip link del "$V1" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
if ! ip netns add "$N1" 2>"$T/err" || ! ip netns add "$N2" 2>>"$T/err" ||
   ! ip link add "$V1" type veth peer name "$V2" 2>>"$T/err"; then
  skip "cannot create network namespaces here: $(head -n 1 "$T/err")"
fi
ip link set "$V1" netns "$N1" && ip link set "$V2" netns "$N2" &&
ip -n "$N1" addr add 10.77.0.1/24 dev "$V1" && ip -n "$N2" addr add 10.77.0.2/24 dev "$V2" &&
ip -n "$N1" link set lo up && ip -n "$N2" link set lo up &&
ip -n "$N1" link set "$V1" up && ip -n "$N2" link set "$V2" up || skip "cannot configure the veth pair"

# the rsh agent: run mpirun's daemon for HOST inside that host's namespace, with its hostname
cat > "$T/rsh" <<EOF
#!/bin/sh
host="\$1"; shift
case "\$host" in 10.77.0.1) ns=$N1 ;; 10.77.0.2) ns=$N2 ;; *) echo "rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname node-\$ns; \$*"
EOF
chmod +x "$T/rsh"
# mpirun itself runs on host 1; TCP between hosts, shared memory within one
mpi() { # mpi HOSTS NP CMD... (output in $T/out, $T/err)
  local hosts=$1 np=$2; shift 2
  timeout -k 5 120 ip netns exec "$N1" unshare --uts /bin/sh -c "hostname node-$N1; exec \"\$@\"" sh \
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$T/rsh" --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    --timeout 100 --host "$hosts" -np "$np" "$@" >"$T/out" 2>"$T/err" </dev/null
}

# 1. two hosts really: 4 ranks report 2 hostnames
if mpi 10.77.0.1:2,10.77.0.2:2 4 hostname && [ "$(sort -u "$T/out" | wc -l)" -eq 2 ]; then ok
else bad "4 ranks over 2 namespaces: $(tr '\n' ' ' < "$T/out") $(tail -n 3 "$T/err")"; fi

# 2. links: intra-host (both ranks on host 1) and inter-host (one rank per host)
mpi 10.77.0.1:2 2 "$OCTOPIPE" profile comm --max-bytes 4194304 --iters 50 --out "$T/intra.json" && ok ||
  bad "profile comm intra: $(tail -n 3 "$T/err")"
mpi 10.77.0.1:1,10.77.0.2:1 2 "$OCTOPIPE" profile comm --as inter --max-bytes 4194304 --iters 50 --out "$T/inter.json" && ok ||
  bad "profile comm inter: $(tail -n 3 "$T/err")"
num() { sed -nE "s/.*\"$2\": ([0-9.eE+-]+).*/\1/p" "$1"; }
il=$(num "$T/intra.json" intra_lat_ms); ib=$(num "$T/intra.json" intra_bw_GBps)
xl=$(num "$T/inter.json" inter_lat_ms); xb=$(num "$T/inter.json" inter_bw_GBps)
if [ -n "$il" ] && [ -n "$xl" ]; then
  printf '{"format": "octopipe.cluster/1", "nodes_of": 2, "intra_lat_ms": %s, "intra_bw_GBps": %s,\n "inter_lat_ms": %s, "inter_bw_GBps": %s, "source": "multihost.sh: 2 netns hosts over veth"}\n' \
    "$il" "$ib" "$xl" "$xb" > "$T/cluster.json"
  echo "links: intra-host ${il} ms + bytes / ${ib} GB/s; inter-host ${xl} ms + bytes / ${xb} GB/s"
fi

# 3. a P=4 plan, ranks 0,1 on host 1 and 2,3 on host 2 (nodes of 2 in the cluster file)
"$OCTOPIPE" compare --model nemotron-h-8b --devices 4 --microbatches 8 --no-tune --plans-dir "$T" >/dev/null 2>&1 ||
  bad "compare could not write plans"
for plan in 1f1b zbv; do
  if mpi 10.77.0.1:2,10.77.0.2:2 4 "$OCTOPIPE" exec "$T/$plan.json" --emulate --time-scale "${MH_TIME_SCALE:-1}" --bytes-scale "${MH_BYTES_SCALE:-0.005}" ${MH_FLAGS:-} \
       --cluster "$T/cluster.json" --json; then
    ok
    mk=$(sed -nE 's/.*"measured": \{"makespan_ms": ([0-9.]+).*/\1/p' "$T/out")
    pr=$(sed -nE 's/.*"predicted": \{"makespan_ms": ([0-9.]+).*/\1/p' "$T/out")
    er=$(sed -nE 's/.*"makespan_error_pct": ([0-9.+-]+).*/\1/p' "$T/out")
    echo "$plan over 2 hosts: measured ${mk} ms, predicted ${pr} ms, error ${er}%"
  else
    bad "$plan over 2 hosts: $(tail -n 5 "$T/err")"
  fi
done

echo "multihost: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Two simulated hosts (SPEC 8, ranks on several hosts): two network namespaces joined by a veth
# pair, each with its own name (UTS namespace), mpirun started in the first and launching into the
# second through an rsh agent that enters it, gloo between the ranks over TCP on the veth pair
# (XMC_GLOO_IFACE) with the store built on MPI (no file store: the hosts share no folder). What a
# user who outgrows one machine runs, on one machine.
#
#   run_two_hosts.sh MPIEXEC RANKS_PER_HOST PROGRAM [ARGS...]
#
# Runs PROGRAM ARGS on 2 x RANKS_PER_HOST ranks, half in each namespace, and checks that traffic
# crossed the veth pair. Exit 77 (ctest's skip) with the reason where namespaces cannot be made
# (not root, no iproute2, no CAP_SYS_ADMIN); the namespaces, the pair and the agent go on every
# path. Traffic goes only to the addresses given here, inside the namespaces made here.
set -uo pipefail
mpiexec=$1 per_host=$2
shift 2
skip() { echo "run_two_hosts: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no 'unshare' command (util-linux)"

tag=xmc$$
a=${tag}a b=${tag}b
dir=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$a" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
ip netns add "$b" 2>"$dir/err" || skip "ip netns add failed: $(cat "$dir/err")"
# One interface name in both (xmc0), so that one --mca ..._if_include and one XMC_GLOO_IFACE fit
# every rank; addresses from a private range that exists only inside these two namespaces.
ip link add xmc0 netns "$a" type veth peer name xmc0 netns "$b" 2>"$dir/err" \
  || skip "cannot make a veth pair between the namespaces: $(cat "$dir/err")"
ip -n "$a" addr add 10.213.7.1/24 dev xmc0
ip -n "$b" addr add 10.213.7.2/24 dev xmc0
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set xmc0 up
done

# Open MPI's rsh agent: "agent HOST COMMAND...": COMMAND in HOST's namespace under HOST's name.
cat > "$dir/agent" <<'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$host" "$*"
EOF
chmod +x "$dir/agent"
printf '%s slots=%s\n%s slots=%s\n' "$a" "$per_host" "$b" "$per_host" > "$dir/hosts"

# Every XMC_*, RC_PARAMS and LD_LIBRARY_PATH variable of the caller goes to every rank.
pass=()
for v in $(compgen -e | grep -E '^(XMC_|RC_PARAMS$|LD_LIBRARY_PATH$)'); do pass+=(-x "$v"); done
tx() { ip -n "$a" -s link show xmc0 | awk '/TX:/{getline; print $1; exit}'; }
before=$(tx)
ip netns exec "$a" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$a" \
  env XMC_GLOO_IFACE=xmc0 "$mpiexec" --allow-run-as-root --oversubscribe --bind-to none \
  --hostfile "$dir/hosts" --map-by node -n $((2 * per_host)) \
  --mca plm_rsh_agent "$dir/agent" --mca btl self,tcp --mca btl_tcp_if_include xmc0 \
  --mca oob_tcp_if_include xmc0 -x XMC_GLOO_IFACE "${pass[@]}" -x PATH "$@"
rc=$?
crossed=$(( $(tx) - before ))
echo "run_two_hosts: ranks on hosts $a and $b ($per_host each); $crossed bytes left $a over the veth pair; exit $rc"
if [ "$rc" -eq 0 ] && [ "$crossed" -lt 4096 ]; then
  echo "run_two_hosts: FAIL: almost nothing crossed between the hosts: the ranks did not talk over the pair"
  exit 1
fi
exit "$rc"

# lib.sh: what the shell tests share (sourced, not run): the binary under test, the pass/fail
# counters with ok/bad, and a temporary directory removed on exit.
OP=${OCTOPIPE:-build/octopipe}
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

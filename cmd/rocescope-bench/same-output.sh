#!/usr/bin/env bash
# same-output.sh REV: checks that rocescope built from the working tree
# writes byte-identical reports (JSON lines, --exact, CSV, --summary) and
# window states to rocescope built from REV (a commit, default main), on
# testdata/demo.pcap, every capture under $CAPTURES (default
# /work/shared/captures, the tshark corpus) and generated traces (many
# flows and windows; every scenario; a table too small for the flows, so
# that flows are evicted; 1 and 2 workers). Run it from the repository
# root. It prints one line per input and exits 1 on the first difference.
set -euo pipefail
rev=${1:-main}
captures=${CAPTURES:-/work/shared/captures}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

git worktree add --detach "$tmp/base" "$rev" >/dev/null 2>&1
(cd "$tmp/base" && go build -o "$tmp/a" ./cmd/rocescope)
go build -o "$tmp/b" ./cmd/rocescope

# run BIN OUT TRACE ARGS...: every output of one replay, into directory OUT.
run() {
	local bin=$1 out=$2 trace=$3
	shift 3
	mkdir -p "$out/state"
	"$bin" replay --host h --progress=false --keep-going "$@" --exact -o "$out/exact.jsonl" \
		-o "$out/r.csv" --state-out "$out/state/" "$trace" >/dev/null 2>"$out/stderr" || echo "exit $?" >>"$out/stderr"
	"$bin" replay --host h --progress=false --keep-going "$@" -o "$out/r.jsonl" "$trace" >/dev/null 2>>"$out/stderr" || true
	"$bin" replay --host h --progress=false --keep-going "$@" --summary -o "$out/summary.jsonl" "$trace" >/dev/null 2>>"$out/stderr" || true
	# The run's own time is the one thing that may differ.
	sed -i -E 's/ in [0-9.hmµns]+ \([0-9.]+ [kM]?frames\/s\)$//' "$out/stderr"
}

n=0
check() {
	local trace=$1
	shift
	rm -rf "$tmp/ra" "$tmp/rb"
	run "$tmp/a" "$tmp/ra" "$trace" "$@"
	run "$tmp/b" "$tmp/rb" "$trace" "$@"
	if ! diff -r "$tmp/ra" "$tmp/rb" >"$tmp/diff"; then
		echo "DIFFERENT: $trace $*"
		head -20 "$tmp/diff"
		exit 1
	fi
	n=$((n + 1))
	echo "same: $trace $* ($(du -sh "$tmp/ra" | cut -f1) of output)"
}

for w in 1 2; do
	check testdata/demo.pcap --workers $w
done
while IFS= read -r -d '' f; do
	check "$f" --workers 1
done < <(find "$captures" \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.gz' \) -print0 | sort -z)

"$tmp/a" gen --seed 3 --flows 20000 --packets 2000000 --duration 4s --window 250ms -o "$tmp/many.pcap" >/dev/null 2>&1
"$tmp/a" gen --seed 4 --flows 300 --packets 400000 --scenario all -o "$tmp/scen.pcap" >/dev/null 2>&1
"$tmp/a" gen --seed 5 --flows 2000 --packets 300000 --snaplen 128 -o "$tmp/snap.pcap" >/dev/null 2>&1
for w in 1 2; do
	check "$tmp/many.pcap" --workers $w --window 250ms
	check "$tmp/scen.pcap" --workers $w --burst 100us
	check "$tmp/snap.pcap" --workers $w --table-size 1000
done
echo "identical outputs on $n runs against $rev"

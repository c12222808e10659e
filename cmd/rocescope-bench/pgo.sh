#!/usr/bin/env bash
# pgo.sh: writes cmd/rocescope/default.pgo, the CPU profile that go build
# uses to optimize rocescope (profile-guided optimization: hot calls
# inlined, hot code laid out together). It profiles replays of the
# benchmark's steady traces (12 M frames over 12 s, 10 k, 100 k and 1 M
# connections; made with rocescope gen as rocescope-bench makes them, in
# $DIR, default /dev/shm/rocescope-bench) with one and two workers, by a
# rocescope built without a profile, and merges the six profiles. Run it
# from the repository root after a change to the replay's hot path, and
# measure the build it gives against the one before.
set -euo pipefail
dir=${DIR:-/dev/shm/rocescope-bench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -pgo=off -o "$tmp/rocescope" ./cmd/rocescope
mkdir -p "$dir"
profiles=()
for conns in 10000 100000 1000000; do
	trace=$dir/gen-12000000-$conns-12s-128.pcap
	if [[ ! -s $trace ]]; then
		"$tmp/rocescope" gen -o "$trace.tmp" --packets 12000000 --flows "$conns" --snaplen 128 --seed 1 --duration 12s
		mv "$trace.tmp" "$trace"
	fi
	for workers in 1 2; do
		p=$tmp/$conns-$workers.pprof
		"$tmp/rocescope" replay --workers "$workers" --format jsonl -o /dev/null --progress=false \
			--cpu-profile "$p" "$trace"
		profiles+=("$p")
	done
done
go tool pprof -proto "${profiles[@]}" >"$tmp/default.pgo"
mv "$tmp/default.pgo" cmd/rocescope/default.pgo
echo "pgo.sh: wrote cmd/rocescope/default.pgo ($(wc -c <cmd/rocescope/default.pgo) bytes) from ${#profiles[@]} replays"

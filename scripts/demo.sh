#!/usr/bin/env bash
# A short scripted tour of the compactord CLI on a local Lance table under
# ./var/demo.lance. Every step prints the command and its JSON output.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/compactord}
T=var/demo.lance
rm -rf "$T"
mkdir -p var
step() { printf '\n$ %s\n' "$*"; "$@"; }
step $BIN table create "$T" --schema "id:int64,cat:string,val:float64" --primary-key id
step $BIN table append "$T" --rows 1000 --start 0 --seed 1
step $BIN table append "$T" --rows 1000 --start 1000 --seed 2
printf '{"id": 5000, "cat": "hand-written", "val": 1.5}\n{"id": 5001, "cat": null, "val": 2.5}\n' > var/demo-rows.jsonl
step $BIN table append "$T" --jsonl var/demo-rows.jsonl
step $BIN table delete "$T" --fragment 0
step $BIN index create "$T" --name id_idx --column id --type btree
step $BIN wal configure "$T" --buckets 2 --maintain id_idx
step $BIN wal write "$T" --rows 500 --start 1500 --seed 3 --flush
step $BIN merge "$T"
step $BIN index catchup "$T"
step $BIN compact "$T"
printf '\n$ %s | wc -l\n' "$BIN table scan $T"
$BIN table scan "$T" | wc -l
printf '\n$ %s | head -3\n' "$BIN table scan $T --version 3"
$BIN table scan "$T" --version 3 > var/demo-scan-v3.jsonl
head -3 var/demo-scan-v3.jsonl
step $BIN verify "$T" --deep
step $BIN inspect "$T"
printf '\nThe table lives in %s, a Lance dataset LanceDB opens: _versions/ holds one manifest per version, data/ the Lance files, _mem_wal/ the MemWAL.\n' "$T"

// Times DuckDB rewriting Parquet files: the peer of the compaction and merge
// benchmarks (scripts/bench.sh, internal/benchsuite).
//
// usage: node bench/duckdb-rewrite.mjs THREADS OUT_FILE... -- SQL...
//
// Each SQL statement runs in order on one DuckDB instance with `threads`
// set to THREADS. The statements write the OUT_FILEs (COPY ... TO); once
// they are done every OUT_FILE is fsynced, because compactord fsyncs every
// file it writes, and the ceiling (cp) is measured with an fsync too.
//
// It prints one JSON line: {"ms": wall milliseconds of the statements and
// the fsyncs, "cpu_ms": CPU milliseconds of this process over the same
// span (DuckDB's threads included), "bytes": total size of the OUT_FILEs}.
// Instance creation and module loading are not timed: the comparison is
// against the rewrite, not node's start-up (compactord's own start-up is
// included in its figures, which only counts against compactord).
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';

const args = process.argv.slice(2);
const sep = args.indexOf('--');
if (args.length < 3 || sep < 2 || sep === args.length - 1) {
  console.error('usage: duckdb-rewrite.mjs THREADS OUT_FILE... -- SQL...');
  process.exit(2);
}
const threads = args[0];
const outs = args.slice(1, sep);
const statements = args.slice(sep + 1);

for (const f of outs) {
  fs.rmSync(f, { force: true });
}
const instance = await DuckDBInstance.create(':memory:', { threads: String(threads) });
const conn = await instance.connect();
// Warm DuckDB's own code paths (extension autoload, Parquet writer init)
// on a tiny statement so the timed span is the rewrite itself.
await conn.run('SELECT 1');

const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
for (const sql of statements) {
  await conn.run(sql);
}
let bytes = 0;
for (const f of outs) {
  const fd = fs.openSync(f, 'r');
  fs.fsyncSync(fd);
  bytes += fs.fstatSync(fd).size;
  fs.closeSync(fd);
}
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ms, cpu_ms: (cpu.user + cpu.system) / 1000, bytes }));
conn.closeSync?.();
instance.closeSync?.();

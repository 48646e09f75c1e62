// Runs one SQL statement in DuckDB and prints the result rows as JSON lines.
// Used by tests (format compatibility) and by the benchmark scripts.
// usage: node bench/duckdb-query.mjs "SELECT ..." [threads]
import { DuckDBInstance } from '@duckdb/node-api';

const [sql, threads] = process.argv.slice(2);
if (!sql) {
  console.error('usage: duckdb-query.mjs SQL [threads]');
  process.exit(2);
}
const opts = threads ? { threads: String(threads) } : {};
const instance = await DuckDBInstance.create(':memory:', opts);
const conn = await instance.connect();
const reader = await conn.runAndReadAll(sql);
for (const row of reader.getRowObjectsJson()) {
  console.log(JSON.stringify(row));
}

// The LanceDB oracle for compactord's tests (package internal/testing/lancedb).
//
//   node oracle.mjs run            a JSON program on stdin; one JSON result on stdout
//   node oracle.mjs writer CONFIG  the long-running random writer (JSON lines on stdout)
//
// LanceDB is found through $LANCEDB_NODE_MODULES (the node_modules folder of
// tools/lancedb); the Go harness sets it. Everything LanceDB writes to stderr
// (its Rust log) is left there.
//
// Values cross the JSON boundary losslessly: int64, uint64 and timestamps are
// JSON numbers written from BigInts (Go decodes them with UseNumber); on
// input they may be numbers or decimal strings. Binary is base64. Floats that
// JSON cannot hold are the strings "NaN", "Infinity", "-Infinity".

import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const modules = process.env.LANCEDB_NODE_MODULES;
if (!modules) {
  process.stderr.write("oracle.mjs: LANCEDB_NODE_MODULES is not set\n");
  process.exit(2);
}
const require = createRequire(path.join(modules, "..", "package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

// ---- JSON output with BigInts as numbers ----------------------------------

function toJSON(v) {
  if (v === null || v === undefined) return "null";
  switch (typeof v) {
    case "bigint":
      return v.toString();
    case "number":
      if (Number.isFinite(v)) return JSON.stringify(v);
      return JSON.stringify(String(v));
    case "string":
    case "boolean":
      return JSON.stringify(v);
    case "object":
      if (v instanceof Date) return JSON.stringify(v.getTime());
      if (Array.isArray(v)) return "[" + v.map(toJSON).join(",") + "]";
      if (v instanceof Map) v = Object.fromEntries(v);
      return (
        "{" +
        Object.entries(v)
          .filter(([, x]) => x !== undefined && typeof x !== "function")
          .map(([k, x]) => JSON.stringify(k) + ":" + toJSON(x))
          .join(",") +
        "}"
      );
    default:
      return "null";
  }
}

// ---- schema ------------------------------------------------------------------

// parseType turns the harness's type names into Arrow types:
// int32 int64 float32 float64 bool utf8 binary timestamp[us]
// vector[N] (fixed_size_list<float32, N>) list<int32>, large_utf8,
// large_binary, dict<V> (Arrow dictionary of V, int32 keys; dict<V,K>
// picks the key type K, one of int8..int64, uint8..uint64; V is any type
// here, e.g. dict<utf8,int8>, dict<float64>, dict<int64,uint16>).
function parseType(s) {
  const dm = /^dict<(.+?)(?:,((?:u?int)(?:8|16|32|64)))?>$/.exec(s);
  if (dm) return new arrow.Dictionary(parseType(dm[1]), parseType(dm[2] || "int32"));
  switch (s) {
    case "large_utf8":
      return new arrow.LargeUtf8();
    case "large_binary":
      return new arrow.LargeBinary();
    case "int8":
      return new arrow.Int8();
    case "int16":
      return new arrow.Int16();
    case "uint8":
      return new arrow.Uint8();
    case "uint16":
      return new arrow.Uint16();
    case "uint32":
      return new arrow.Uint32();
    case "uint64":
      return new arrow.Uint64();
    case "int32":
      return new arrow.Int32();
    case "int64":
      return new arrow.Int64();
    case "float32":
      return new arrow.Float32();
    case "float64":
      return new arrow.Float64();
    case "bool":
      return new arrow.Bool();
    case "utf8":
      return new arrow.Utf8();
    case "binary":
      return new arrow.Binary();
    case "timestamp[us]":
      return new arrow.TimestampMicrosecond();
    case "list<int32>":
      return new arrow.List(new arrow.Field("item", new arrow.Int32(), true));
  }
  const m = /^vector\[(\d+)\]$/.exec(s);
  if (m) {
    return new arrow.FixedSizeList(Number(m[1]), new arrow.Field("item", new arrow.Float32(), true));
  }
  // fixed_size_list<T,N> of any item type (float16 and float64 vectors,
  // uint8 binary vectors) and list<fixed_size_list<T,N>> (multivectors).
  const fm = /^fixed_size_list<(\w+),(\d+)>$/.exec(s);
  if (fm) return new arrow.FixedSizeList(Number(fm[2]), new arrow.Field("item", fm[1] === "float16" ? new arrow.Float16() : parseType(fm[1]), true));
  const lm = /^list<(fixed_size_list<\w+,\d+>)>$/.exec(s);
  if (lm) return new arrow.List(new arrow.Field("item", parseType(lm[1]), true));
  throw new Error(`unknown column type ${JSON.stringify(s)}`);
}

function typeName(t) {
  const D = arrow.DataType;
  if (D.isDictionary(t)) {
    const k = typeName(t.indices);
    return k === "int32" ? `dict<${typeName(t.dictionary)}>` : `dict<${typeName(t.dictionary)},${k}>`;
  }
  if (D.isInt(t)) return `${t.isSigned ? "int" : "uint"}${t.bitWidth}`;
  if (D.isFloat(t)) return ["float16", "float32", "float64"][t.precision];
  if (D.isBool(t)) return "bool";
  if (D.isUtf8(t)) return "utf8";
  if (D.isLargeUtf8(t)) return "large_utf8";
  if (D.isBinary(t)) return "binary";
  if (D.isLargeBinary(t)) return "large_binary";
  if (D.isTimestamp(t)) return `timestamp[${["s", "ms", "us", "ns"][t.unit]}]`;
  if (D.isFixedSizeList(t) && D.isFloat(t.children[0].type) && t.children[0].type.precision === 1) return `vector[${t.listSize}]`;
  if (D.isFixedSizeList(t)) return `fixed_size_list<${typeName(t.children[0].type)},${t.listSize}>`;
  if (D.isList(t)) return `list<${typeName(t.children[0].type)}>`;
  return String(t);
}

function makeSchema(cols) {
  return new arrow.Schema(cols.map((c) => new arrow.Field(c.name, parseType(c.type), c.nullable !== false)));
}

function describeSchema(schema) {
  return schema.fields.map((f) => ({ name: f.name, type: typeName(f.type), nullable: f.nullable }));
}

// ---- rows in ---------------------------------------------------------------------

function bigOf(v) {
  if (typeof v === "bigint") return v;
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw new Error(`integer ${v} is not exact; pass it as a string`);
    return BigInt(v);
  }
  if (typeof v === "string") return BigInt(v);
  throw new Error(`not an integer: ${JSON.stringify(v)}`);
}

function floatOf(v) {
  if (typeof v === "number") return v;
  if (v === "NaN" || v === "Infinity" || v === "-Infinity") return Number(v);
  throw new Error(`not a number: ${JSON.stringify(v)}`);
}

function validity(values) {
  const bitmap = new Uint8Array((values.length + 7) >> 3);
  let nulls = 0;
  values.forEach((v, i) => {
    if (v === null || v === undefined) nulls++;
    else bitmap[i >> 3] |= 1 << (i & 7);
  });
  return { nullBitmap: nulls ? bitmap : undefined, nullCount: nulls };
}

// columnData builds the Arrow data of one column from JSON values.
function columnData(type, values) {
  const length = values.length;
  const { nullBitmap, nullCount } = validity(values);
  const base = { type, length, nullCount, nullBitmap };
  const D = arrow.DataType;
  if ((D.isInt(type) && type.bitWidth === 64) || D.isTimestamp(type)) {
    const A = D.isInt(type) && !type.isSigned ? BigUint64Array : BigInt64Array;
    return arrow.makeData({ ...base, data: A.from(values, (v) => (v == null ? 0n : bigOf(v))) });
  }
  if (D.isInt(type)) {
    return arrow.makeData({ ...base, data: type.ArrayType.from(values, (v) => (v == null ? 0 : Number(bigOf(v)))) });
  }
  if (D.isFloat(type) && type.precision === 0) {
    return arrow.makeData({ ...base, data: Uint16Array.from(values, (v) => arrow.util.float64ToUint16(v == null ? 0 : floatOf(v))) });
  }
  if (D.isFloat(type) && type.precision > 0) {
    return arrow.makeData({ ...base, data: type.ArrayType.from(values, (v) => (v == null ? 0 : floatOf(v))) });
  }
  if (D.isBool(type)) {
    const bits = new Uint8Array((length + 7) >> 3);
    values.forEach((v, i) => {
      if (v) bits[i >> 3] |= 1 << (i & 7);
    });
    return arrow.makeData({ ...base, data: bits });
  }
  if (D.isDictionary(type)) {
    // Keys in first-use order; a null row's key is 0 under the bitmap.
    const ids = new Map();
    const keys = new type.indices.ArrayType(length);
    values.forEach((v, i) => {
      if (v == null) return;
      if (!ids.has(v)) ids.set(v, ids.size);
      keys[i] = type.indices.bitWidth === 64 ? BigInt(ids.get(v)) : ids.get(v);
    });
    const dictionary = arrow.makeVector(columnData(type.dictionary, [...ids.keys()]));
    return arrow.makeData({ ...base, data: keys, dictionary });
  }
  if (D.isUtf8(type) || D.isBinary(type) || D.isLargeUtf8(type) || D.isLargeBinary(type)) {
    const enc = new TextEncoder();
    const text = D.isUtf8(type) || D.isLargeUtf8(type);
    const parts = values.map((v) => {
      if (v == null) return new Uint8Array(0);
      return text ? enc.encode(v) : new Uint8Array(Buffer.from(v, "base64"));
    });
    const large = D.isLargeUtf8(type) || D.isLargeBinary(type);
    const offsets = large ? new BigInt64Array(length + 1) : new Int32Array(length + 1);
    let end = 0;
    parts.forEach((p, i) => {
      end += p.length;
      offsets[i + 1] = large ? BigInt(end) : end;
    });
    const data = new Uint8Array(end);
    end = 0;
    parts.forEach((p) => {
      data.set(p, end);
      end += p.length;
    });
    return arrow.makeData({ ...base, valueOffsets: offsets, data });
  }
  if (D.isFixedSizeList(type)) {
    const n = type.listSize;
    const child = [];
    values.forEach((v) => {
      if (v == null) for (let i = 0; i < n; i++) child.push(0);
      else {
        if (v.length !== n) throw new Error(`vector of ${v.length} values for a ${n}-wide column`);
        child.push(...v);
      }
    });
    return arrow.makeData({ ...base, child: columnData(type.children[0].type, child) });
  }
  if (D.isList(type)) {
    const offsets = new Int32Array(length + 1);
    const child = [];
    values.forEach((v, i) => {
      if (v != null) child.push(...v);
      offsets[i + 1] = child.length;
    });
    return arrow.makeData({ ...base, valueOffsets: offsets, child: columnData(type.children[0].type, child) });
  }
  throw new Error(`cannot build a column of ${type}`);
}

// arrowTable makes an Arrow table with exactly schema from JSON row objects.
function arrowTable(schema, rows) {
  for (const r of rows) {
    for (const k of Object.keys(r)) {
      if (!schema.fields.some((f) => f.name === k)) throw new Error(`row has column ${k} that the schema lacks`);
    }
  }
  const children = schema.fields.map((f) => columnData(f.type, rows.map((r) => (r[f.name] === undefined ? null : r[f.name]))));
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(schema, struct)]);
}

// ---- rows out --------------------------------------------------------------------

function cell(data, i) {
  if (!data.getValid(i)) return null;
  const t = data.type;
  const j = data.offset + i;
  if (t instanceof arrow.Dictionary) {
    // The value the key names, as its value type prints.
    const k = Number(data.values[j]);
    const dict = data.dictionary;
    let seen = 0;
    for (const d of dict.data) {
      if (k < seen + d.length) return cell(d, k - seen);
      seen += d.length;
    }
    throw new Error(`dictionary key ${k} past ${seen} items`);
  }
  if (t instanceof arrow.Int || t instanceof arrow.Timestamp) {
    const v = data.values[j];
    return typeof v === "bigint" ? v : Number(v);
  }
  if (t instanceof arrow.Float) return data.values[j];
  if (t instanceof arrow.Bool) return ((data.values[j >> 3] >> (j & 7)) & 1) === 1;
  if (t instanceof arrow.Utf8 || t instanceof arrow.LargeUtf8 || t instanceof arrow.Binary || t instanceof arrow.LargeBinary) {
    const lo = Number(data.valueOffsets[j]);
    const hi = Number(data.valueOffsets[j + 1]);
    const bytes = data.values.subarray(lo, hi);
    if (t instanceof arrow.Utf8 || t instanceof arrow.LargeUtf8) return new TextDecoder().decode(bytes);
    return Buffer.from(bytes).toString("base64");
  }
  if (t instanceof arrow.FixedSizeList || t instanceof arrow.List || t instanceof arrow.LargeList) {
    const v = arrow.makeVector(data).get(i);
    return Array.from(v.toArray(), (x) => (typeof x === "bigint" ? x : x));
  }
  if (t instanceof arrow.Struct) {
    const o = {};
    t.children.forEach((f, k) => (o[f.name] = cell(data.children[k], i)));
    return o;
  }
  return String(arrow.makeVector(data).get(i));
}

function tableRows(tbl) {
  const rows = [];
  for (const batch of tbl.batches) {
    const names = batch.schema.fields.map((f) => f.name);
    const cols = names.map((_, k) => batch.data.children[k]);
    for (let i = 0; i < batch.numRows; i++) {
      const r = {};
      names.forEach((n, k) => (r[n] = cell(cols[k], i)));
      rows.push(r);
    }
  }
  return rows;
}

function compareValues(a, b) {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  if (typeof a === "bigint" || typeof b === "bigint") {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (typeof a === "number" && typeof b === "number") return a - b;
  const x = toJSON(a);
  const y = toJSON(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function sortRows(rows, keys) {
  if (!keys || keys.length === 0) return rows;
  return rows.sort((r, s) => {
    for (const k of keys) {
      const c = compareValues(r[k], s[k]);
      if (c !== 0) return c;
    }
    return 0;
  });
}

// ---- MemWAL shard routing ------------------------------------------------

// murmur3 is MurmurHash3 x86_32, seed 0: LanceDB's bucket spec hashes the
// key as Iceberg's bucket transform does (integers as 8-byte little-endian
// int64, strings as their UTF-8 bytes; bucket = (hash & 0x7fffffff) % N).
// The harness only uses it to split a merge into per-bucket calls; LanceDB
// still validates every row, so a wrong guess fails loudly.
function murmur3(bytes) {
  let h = 0;
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  const n = bytes.length;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    let k = (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >>> 0;
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) >>> 0;
  }
  let k = 0;
  const r = n & 3;
  if (r >= 3) k ^= bytes[i + 2] << 16;
  if (r >= 2) k ^= bytes[i + 1] << 8;
  if (r >= 1) {
    k ^= bytes[i];
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
  }
  h ^= n;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function bucketOf(v, n) {
  let bytes;
  if (typeof v === "string" && !/^-?\d+$/.test(v)) bytes = Buffer.from(v, "utf8");
  else {
    bytes = Buffer.alloc(8);
    bytes.writeBigInt64LE(bigOf(v));
  }
  return (murmur3(bytes) & 0x7fffffff) % n;
}

// shardGroups splits rows by the shard a spec routes them to: a key per
// group (a bucket, an identity value, or "" for unsharded).
function shardGroups(spec, rows) {
  const groups = new Map();
  for (const r of rows) {
    let key = "";
    if (spec && spec.specType === "bucket") key = "b" + bucketOf(r[spec.column], spec.numBuckets);
    else if (spec && spec.specType === "identity") key = "i" + toJSON(r[spec.column]);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(r);
  }
  return groups;
}

// ---- the session: a connection and its table handles ----------------------

class Session {
  constructor(uri, storageOptions, staleHandles) {
    this.uri = uri;
    this.storageOptions = storageOptions || undefined;
    this.staleHandles = !!staleHandles;
    this.handles = new Map(); // `${table}` or `${table}#${shard}` -> Table
  }

  async connect() {
    // readConsistencyInterval 0: every call sees the latest version, so
    // handles written by other handles or processes never read stale.
    // staleHandles leaves it unset, LanceDB's default: a handle keeps the
    // version it last saw, and its next write's transaction reads that
    // version however old (as a long-lived application's handle does).
    const opts = { storageOptions: this.storageOptions };
    if (!this.staleHandles) opts.readConsistencyInterval = 0;
    this.db = await lancedb.connect(this.uri, opts);
  }

  async table(name, key = name) {
    let t = this.handles.get(key);
    if (!t) {
      t = await this.db.openTable(name);
      this.handles.set(key, t);
    }
    return t;
  }

  // shardHandle is the handle that writes one shard of table: LanceDB keeps
  // one MemWAL shard writer per handle and refuses a second shard on it.
  async shardHandle(name, shard) {
    return this.table(name, `${name}#${shard}`);
  }

  // closeLsm closes the MemWAL writers of every handle of table name, which
  // flushes each shard's memtable into a new generation.
  async closeLsm(name) {
    let n = 0;
    for (const [k, t] of this.handles) {
      if (k === name || k.startsWith(name + "#")) {
        await t.closeLsmWriters();
        n++;
      }
    }
    return n;
  }

  forget(name) {
    for (const [k, t] of [...this.handles]) {
      if (k === name || k.startsWith(name + "#")) {
        t.close();
        this.handles.delete(k);
      }
    }
  }

  async close() {
    for (const t of this.handles.values()) {
      try {
        await t.closeLsmWriters();
      } catch {}
      t.close();
    }
    this.handles.clear();
  }
}

async function mergeInsert(s, name, step) {
  const t = await s.table(name);
  const schema = await t.schema();
  const on = step.on || "id";
  const rows = step.rows || [];
  const build = (tb) => {
    let b = tb.mergeInsert(on);
    if (step.whenMatchedUpdateAll !== false) b = b.whenMatchedUpdateAll(step.matchedWhere ? { where: step.matchedWhere } : undefined);
    if (step.whenNotMatchedInsertAll !== false) b = b.whenNotMatchedInsertAll();
    if (step.deleteNotMatchedBySource !== undefined && step.deleteNotMatchedBySource !== null) {
      b = b.whenNotMatchedBySourceDelete(step.deleteNotMatchedBySource === "" ? undefined : { where: step.deleteNotMatchedBySource });
    }
    if (step.lsm !== undefined && step.lsm !== null) b = b.useLsm(step.lsm);
    if (step.validateSingleShard !== undefined) b = b.validateSingleShard(step.validateSingleShard);
    return b;
  };
  const spec = step.lsm === false ? undefined : await t.getLsmWriteSpec();
  if (!spec || step.split === false) {
    const h = spec ? await s.shardHandle(name, step.shard || "all") : t;
    const r = await build(h).execute(arrowTable(schema, rows));
    return { ...r, calls: 1 };
  }
  // Through the MemWAL: one call per shard, each on that shard's handle.
  const out = { version: 0, numInsertedRows: 0, numUpdatedRows: 0, numDeletedRows: 0, numAttempts: 0, numRows: 0, calls: 0, shards: [] };
  for (const [shard, group] of shardGroups(spec, rows)) {
    const h = await s.shardHandle(name, shard || "unsharded");
    const r = await build(h).execute(arrowTable(schema, group));
    for (const k of ["numInsertedRows", "numUpdatedRows", "numDeletedRows", "numAttempts", "numRows"]) out[k] += r[k];
    out.version = Math.max(out.version, r.version);
    out.calls++;
    out.shards.push(shard || "unsharded");
  }
  return out;
}

async function readRows(s, name, step) {
  let t = await s.table(name);
  let temp = null;
  if (step.version !== undefined && step.version !== null) {
    temp = await s.db.openTable(name);
    await temp.checkout(step.version);
    t = temp;
  }
  try {
    let q = t.query();
    if (step.where) q = q.where(step.where);
    if (step.columns) q = q.select(step.columns);
    if (step.withRowId) q = q.withRowId();
    if (step.lsm !== undefined && step.lsm !== null) q = q.useLsm(step.lsm);
    const tbl = await q.toArrow();
    const rows = sortRows(tableRows(tbl), step.sortBy || (step.sortBy === undefined ? ["id"].filter((k) => tbl.schema.fields.some((f) => f.name === k)) : []));
    return { rows, schema: describeSchema(tbl.schema) };
  } finally {
    if (temp) temp.close();
  }
}

// vectorIndexConfig is the config of the vector and full-text index types
// ("ivf_pq", "ivf_rq", "ivf_hnsw_sq", "ivf_hnsw_pq", "fts"), with the step's
// indexOptions (numPartitions, numSubVectors, distanceType, m,
// efConstruction, ...) passed to LanceDB as they are; null for another type.
function vectorIndexConfig(type, opts) {
  const o = opts || {};
  switch ((type || "").toLowerCase()) {
    case "ivf_pq":
      return lancedb.Index.ivfPq(o);
    case "ivf_rq":
      return lancedb.Index.ivfRq(o);
    case "ivf_hnsw_sq":
    case "hnsw_sq":
      return lancedb.Index.hnswSq(o);
    case "ivf_hnsw_pq":
    case "hnsw_pq":
      return lancedb.Index.hnswPq(o);
    case "fts":
      return lancedb.Index.fts(o);
  }
  return null;
}

// vectorSearch runs a nearest-neighbour query: the step's vector against
// column, k results (limit), optionally filtered (where), through the
// index unless bypassIndex (then an exhaustive search); nprobes, ef and
// refineFactor tune the index search. Rows carry _distance.
async function vectorSearch(t, st) {
  // A list of vectors is a multivector query.
  const v = st.vector.length > 0 && Array.isArray(st.vector[0]) ? st.vector.map((x) => x.map(floatOf)) : st.vector.map(floatOf);
  let q = t.vectorSearch(v);
  if (st.column) q = q.column(st.column);
  if (st.limit) q = q.limit(st.limit);
  if (st.where) q = q.where(st.where);
  if (st.columns) q = q.select(st.columns);
  if (st.distanceType) q = q.distanceType(st.distanceType);
  if (st.nprobes) q = q.nprobes(st.nprobes);
  if (st.ef) q = q.ef(st.ef);
  if (st.refineFactor) q = q.refineFactor(st.refineFactor);
  if (st.bypassIndex) q = q.bypassVectorIndex();
  if (st.lsm !== undefined && st.lsm !== null) q = q.useLsm(st.lsm);
  const tbl = await q.toArrow();
  return { rows: tableRows(tbl), schema: describeSchema(tbl.schema) };
}

// textSearch runs a full-text query (through the fts index of column, or
// the only one), optionally filtered (where), at most limit rows.
async function textSearch(t, st) {
  // phrase / match: LanceDB's PhraseQuery (slop) or MatchQuery (operator)
  // on st.column, instead of a plain query string.
  let fq = st.query;
  if (st.phrase) fq = new lancedb.PhraseQuery(st.query, st.column, { slop: st.slop || 0 });
  else if (st.match) fq = new lancedb.MatchQuery(st.query, st.column, st.operator ? { operator: st.operator } : undefined);
  let q = t.query().fullTextSearch(fq, st.column && typeof fq === "string" ? { columns: [st.column] } : undefined);
  if (st.where) q = q.where(st.where);
  if (st.columns) q = q.select(st.columns);
  q = q.limit(st.limit || 1000000);
  if (st.lsm !== undefined && st.lsm !== null) q = q.useLsm(st.lsm);
  const tbl = await q.toArrow();
  return { rows: sortRows(tableRows(tbl), ["id"].filter((k) => tbl.schema.fields.some((f) => f.name === k))), schema: describeSchema(tbl.schema) };
}

// smallVectorIndexes are the options of a vector index created without
// any (CreateIndex rather than CreateVectorIndex): small indexes for tests
// of their row ids (two partitions train on a few hundred rows).
const smallVectorIndexes = {
  ivf_flat: { numPartitions: 2 },
  ivf_pq: { numPartitions: 2, numSubVectors: 2 },
  ivf_hnsw_sq: { numPartitions: 2 },
};

function indexConfig(type, opts) {
  const t = (type || "btree").toLowerCase();
  if (opts === undefined || opts === null) opts = smallVectorIndexes[t];
  if (t === "ivf_flat") return lancedb.Index.ivfFlat(opts || {});
  const v = vectorIndexConfig(t, opts);
  if (v) return v;
  switch (t) {
    case "btree":
      return lancedb.Index.btree();
    case "bitmap":
      return lancedb.Index.bitmap();
    case "label_list":
    case "labellist":
      return lancedb.Index.labelList();
    default:
      throw new Error(`unknown index type ${type}`);
  }
}

function versionOut(v) {
  return { version: v.version, timestamp: v.timestamp instanceof Date ? v.timestamp.getTime() : v.timestamp, metadata: v.metadata };
}

// step runs one step of a program and returns its result.
async function step(s, st, defaultTable) {
  const name = st.table || defaultTable;
  const t = () => s.table(name);
  switch (st.op) {
    case "create": {
      s.forget(name);
      const schema = makeSchema(st.schema);
      // storageVersion ("2.0", "2.1", "2.2") sets the table's data file
      // version; absent, LanceDB's default.
      const opts = { mode: st.mode || "create" };
      if (st.storageVersion) opts.storageOptions = { new_table_data_storage_version: st.storageVersion };
      const tbl = await s.db.createTable(name, arrowTable(schema, st.rows || []), opts);
      s.handles.set(name, tbl);
      return { version: await tbl.version() };
    }
    case "open":
      s.forget(name);
      return { version: await (await t()).version() };
    case "add": {
      const tb = await t();
      return await tb.add(arrowTable(await tb.schema(), st.rows || []));
    }
    case "delete":
      return await (await t()).delete(st.where);
    case "update":
      return await (await t()).update({ where: st.where, valuesSql: st.values });
    case "mergeInsert":
      return await mergeInsert(s, name, st);
    case "closeLsmWriters":
      return { handles: await s.closeLsm(name) };
    case "createIndex": {
      await (await t()).createIndex(st.column, { config: indexConfig(st.type, st.indexOptions), name: st.name, replace: st.replace !== false });
      return { version: await (await t()).version() };
    }
    case "dropIndex":
      await (await t()).dropIndex(st.name);
      return { version: await (await t()).version() };
    case "optimize": {
      const opts = {};
      if (st.cleanupOlderThanMs !== undefined) opts.cleanupOlderThan = new Date(st.cleanupOlderThanMs);
      if (st.cleanupNow) {
        // A Date has milliseconds and a version's timestamp finer ones: a
        // version committed in the current millisecond is not older than
        // new Date(), so the cutoff waits for the next millisecond (a
        // spin of under 1 ms) to cover every version written before it.
        const ms = Date.now();
        while (Date.now() <= ms) {}
        opts.cleanupOlderThan = new Date();
      }
      if (st.deleteUnverified) opts.deleteUnverified = true;
      const r = await (await t()).optimize(opts);
      return { ...r, version: await (await t()).version() };
    }
    case "tagCreate":
      await (await (await t()).tags()).create(st.tag, st.version);
      return {};
    case "tagUpdate":
      await (await (await t()).tags()).update(st.tag, st.version);
      return {};
    case "tagDelete":
      await (await (await t()).tags()).delete(st.tag);
      return {};
    case "tags": {
      const list = await (await (await t()).tags()).list();
      const out = {};
      for (const [k, v] of Object.entries(list)) out[k] = { version: v.version, manifestSize: v.manifestSize };
      return { tags: out };
    }
    case "setPrimaryKey":
      await (await t()).setUnenforcedPrimaryKey(st.columns);
      return { version: await (await t()).version() };
    case "setLsmWriteSpec":
      await (await t()).setLsmWriteSpec(st.spec);
      return { version: await (await t()).version() };
    case "unsetLsmWriteSpec":
      await (await t()).unsetLsmWriteSpec();
      return { version: await (await t()).version() };
    case "getLsmWriteSpec":
      return { spec: (await (await t()).getLsmWriteSpec()) || null };
    case "flushLsm":
    case "compactLsm":
    case "checkpointLsm":
      await (await t())[st.op]();
      return {};
    case "lsmStats":
      return { stats: (await (await t()).getLsmStats(st.includeGenerationRows !== false)) || null };
    case "checkout":
      await (await t()).checkout(st.tag !== undefined ? st.tag : st.version);
      return { version: await (await t()).version() };
    case "checkoutLatest":
      await (await t()).checkoutLatest();
      return { version: await (await t()).version() };
    case "restore":
      await (await t()).restore();
      return { version: await (await t()).version() };
    case "rows":
      return await readRows(s, name, st);
    case "vectorSearch":
      return await vectorSearch(await t(), st);
    case "textSearch":
      return await textSearch(await t(), st);
    case "countRows":
      return { count: await (await t()).countRows(st.where) };
    case "explain": {
      let q = (await t()).query();
      if (st.where) q = q.where(st.where);
      return { plan: await q.explainPlan(true) };
    }
    case "version":
      return { version: await (await t()).version() };
    case "listVersions":
      return { versions: (await (await t()).listVersions()).map(versionOut) };
    case "listIndices":
      return {
        indices: (await (await t()).listIndices()).map((ix) => ({
          name: ix.name,
          indexType: ix.indexType,
          columns: ix.columns,
          indexUuid: ix.indexUuid,
          typeUrl: ix.typeUrl,
          numIndexedRows: ix.numIndexedRows,
          numUnindexedRows: ix.numUnindexedRows,
          numSegments: ix.numSegments,
        })),
      };
    case "indexStats":
      return { stats: (await (await t()).indexStats(st.name)) || null };
    case "schema":
      return { schema: describeSchema(await (await t()).schema()) };
    case "tableNames":
      return { names: await s.db.tableNames() };
    // signal and waitFor let a Go test interleave its own work between
    // steps of a running program (e.g. claim a shard while LanceDB's
    // writer is open): signal creates a file, waitFor polls for one.
    case "signal":
      fs.writeFileSync(st.path, "1");
      return {};
    case "waitFor": {
      const deadline = Date.now() + (st.timeoutMs || 60000);
      while (!fs.existsSync(st.path)) {
        if (Date.now() > deadline) throw new Error(`waitFor ${st.path}: timed out`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return {};
    }
    case "dropTable":
      s.forget(name);
      await s.db.dropTable(name);
      return {};
    default:
      throw new Error(`unknown op ${JSON.stringify(st.op)}`);
  }
}

async function runProgram(prog) {
  const s = new Session(prog.uri, prog.storageOptions, prog.staleHandles);
  const results = [];
  const started = Date.now();
  try {
    await s.connect();
  } catch (e) {
    return { results, fatal: `connect ${prog.uri}: ${e.message}` };
  }
  const defaultTable = prog.table || "t";
  let stopped = false;
  for (let i = 0; i < (prog.steps || []).length; i++) {
    const st = prog.steps[i];
    if (stopped) {
      results.push({ step: i, op: st.op, skipped: true });
      continue;
    }
    const t0 = Date.now();
    try {
      const result = await step(s, st, defaultTable);
      if (st.expectError) {
        results.push({ step: i, op: st.op, result, error: null, unexpectedSuccess: true, ms: Date.now() - t0 });
        if (!prog.continueOnError) stopped = true;
      } else {
        results.push({ step: i, op: st.op, result, ms: Date.now() - t0 });
      }
    } catch (e) {
      results.push({ step: i, op: st.op, error: String(e && e.message ? e.message : e), ms: Date.now() - t0 });
      if (!st.expectError && !prog.continueOnError) stopped = true;
    }
  }
  try {
    await s.close();
  } catch {}
  return { results, ms: Date.now() - started };
}

// ---- writer mode -------------------------------------------------------------

// A small deterministic PRNG (mulberry32), so that a seed replays a run's
// choice of operations.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function valueFor(field, key, tag) {
  const t = field.type;
  const D = arrow.DataType;
  if (D.isInt(t)) return t.bitWidth === 64 ? BigInt(key) : Number(key) | 0;
  if (D.isFloat(t)) return Number(key) + 0.5;
  if (D.isBool(t)) return Number(key) % 2 === 0;
  if (D.isUtf8(t)) return tag;
  if (D.isBinary(t)) return Buffer.from(tag).toString("base64");
  if (D.isTimestamp(t)) return BigInt(Date.now()) * 1000n;
  if (D.isFixedSizeList(t)) return Array.from({ length: t.listSize }, (_, i) => Number(key) + i);
  if (D.isList(t)) return [Number(key) | 0];
  return null;
}

async function runWriter(cfg) {
  // Each line is written synchronously before the next operation starts,
  // so a line in the file is an acknowledgement the harness can rely on.
  const out = (o) => {
    const line = toJSON({ ...o, ts: Date.now() }) + "\n";
    if (cfg.opsFile) fs.appendFileSync(cfg.opsFile, line);
    else process.stdout.write(line);
  };
  const name = cfg.table || "t";
  const keyCol = cfg.key || "id";
  const valCol = cfg.valueColumn || "s";
  const lo = cfg.keyMin ?? 0;
  const hi = cfg.keyMax ?? 99;
  const batch = cfg.batch || 3;
  const closeEvery = cfg.closeEvery || 4;
  const w = cfg.weights || { append: 3, delete: 1, merge: 2, lsmMerge: 2 };
  // createIndex picks one of cfg.indexes ({column, type, name}) and
  // builds it with replace: true, so an existing name is rebuilt and a new
  // one is added.
  const indexes = cfg.indexes || [];
  const rand = rng(cfg.seed ?? Date.now());
  const deadline = Date.now() + (cfg.durationMs ?? 2000);
  const id = cfg.id || `w${process.pid}`;

  let stopping = false;
  process.on("SIGTERM", () => (stopping = true));
  process.on("SIGINT", () => (stopping = true));
  process.stdin.on("end", () => (stopping = true));
  process.stdin.on("close", () => (stopping = true));
  process.stdin.resume();

  const s = new Session(cfg.uri, cfg.storageOptions);
  await s.connect();
  const t = await s.table(name);
  const schema = await t.schema();
  const spec = await t.getLsmWriteSpec();
  const weights = { ...w };
  if (!spec) weights.lsmMerge = 0;
  if (indexes.length === 0) weights.createIndex = 0;
  // The keys this writer believes present: it appends only those it
  // believes absent, so that a writer owning its key range never makes
  // duplicates (shared ranges can).
  const present = new Set();
  for (const r of tableRows(await t.query().useLsm(false).select([keyCol]).toArrow())) present.add(Number(r[keyCol]));

  const pick = () => {
    const total = Object.values(weights).reduce((a, b) => a + b, 0);
    let x = rand() * total;
    for (const [k, v] of Object.entries(weights)) {
      if ((x -= v) < 0) return k;
    }
    return "append";
  };
  const keysWhere = (keys) => `${keyCol} IN (${keys.join(",")})`;
  const randomKeys = (pred) => {
    const ks = new Set();
    for (let i = 0; i < batch * 4 && ks.size < batch; i++) {
      const k = lo + Math.floor(rand() * (hi - lo + 1));
      if (pred(k)) ks.add(k);
    }
    return [...ks].sort((a, b) => a - b);
  };
  const rowsFor = (keys, tag) =>
    keys.map((k) => {
      const r = {};
      for (const f of schema.fields) r[f.name] = f.name === keyCol ? k : f.name === valCol ? tag : valueFor(f, k, tag);
      return r;
    });

  let seq = 0;
  let lsmSince = 0;
  // A maintenance call refused as a retryable conflict is retried, up to
  // maxRetries times in a row, as its error asks and as a user's
  // maintenance job does: on a busy table (compactord merging and
  // compacting beside it) a single optimize() is often preempted. Each
  // refused attempt is still reported on its own line.
  const maxRetries = 3;
  let retry = null;
  let retries = 0;
  out({ op: "start", id, spec: spec || null, present: present.size });
  while (!stopping && Date.now() < deadline) {
    const op = retry || pick();
    retry = null;
    const tag = `${id}-${++seq}`;
    let keys;
    try {
      if (op === "append") {
        keys = randomKeys((k) => !present.has(k));
        if (keys.length === 0) continue;
        const r = await t.add(arrowTable(schema, rowsFor(keys, tag)));
        keys.forEach((k) => present.add(k));
        out({ op, keys, tag, version: r.version });
      } else if (op === "delete") {
        keys = randomKeys((k) => present.has(k));
        if (keys.length === 0) continue;
        const r = await t.delete(keysWhere(keys));
        keys.forEach((k) => present.delete(k));
        out({ op, keys, version: r.version, deleted: r.numDeletedRows });
      } else if (op === "merge") {
        keys = randomKeys(() => true);
        const r = await t.mergeInsert(keyCol).whenMatchedUpdateAll().whenNotMatchedInsertAll().useLsm(false).execute(arrowTable(schema, rowsFor(keys, tag)));
        keys.forEach((k) => present.add(k));
        out({ op, keys, tag, version: r.version, inserted: r.numInsertedRows, updated: r.numUpdatedRows, attempts: r.numAttempts });
      } else if (op === "lsmMerge") {
        // One shard per call: the keys of one bucket.
        const all = randomKeys(() => true);
        const groups = [...shardGroups(spec, rowsFor(all, tag))];
        const [shard, rows] = groups[Math.floor(rand() * groups.length)];
        keys = rows.map((r) => r[keyCol]);
        const h = await s.shardHandle(name, shard || "unsharded");
        await h.mergeInsert(keyCol).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(arrowTable(schema, rows));
        out({ op, keys, tag, shard: shard || "unsharded" });
        if (++lsmSince >= closeEvery) {
          lsmSince = 0;
          await s.closeLsm(name);
          out({ op: "closeLsmWriters" });
        }
      } else if (op === "optimize") {
        // LanceDB's own maintenance: compaction, index optimize, and a
        // prune that, with the default cleanupOlderThan (7 days) and
        // deleteUnverified off, removes nothing a concurrent writer or
        // reader of a test's table could still need. The prune's figures
        // are reported so the harness can check exactly that.
        const r = await t.optimize();
        out({
          op,
          version: await t.version(),
          fragmentsRemoved: r.compaction.fragmentsRemoved,
          fragmentsAdded: r.compaction.fragmentsAdded,
          prunedVersions: r.prune.oldVersionsRemoved,
          prunedBytes: r.prune.bytesRemoved,
        });
      } else if (op === "createIndex") {
        const ix = indexes[Math.floor(rand() * indexes.length)];
        await t.createIndex(ix.column, { config: indexConfig(ix.type), name: ix.name, replace: true });
        out({ op, name: ix.name, column: ix.column, indexType: ix.type, version: await t.version() });
      }
      retries = 0;
    } catch (e) {
      const error = String(e && e.message ? e.message : e);
      out({ op, keys: keys || [], tag, failed: true, error });
      if ((op === "optimize" || op === "createIndex") && /Retryable commit conflict/.test(error) && retries < maxRetries) {
        retry = op;
        retries++;
      } else {
        retries = 0;
      }
    }
  }
  try {
    if (spec) {
      await s.closeLsm(name);
      out({ op: "closeLsmWriters" });
    }
  } catch (e) {
    out({ op: "closeLsmWriters", failed: true, error: String(e.message || e) });
  }
  await s.close();
  out({ op: "stop", ops: seq });
}

// ---- main ------------------------------------------------------------------

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

const mode = process.argv[2];
if (mode === "run") {
  let out;
  try {
    out = await runProgram(JSON.parse(await readStdin()));
  } catch (e) {
    out = { results: [], fatal: String(e && e.stack ? e.stack : e) };
  }
  // Wait for the write to drain: on a pipe it is asynchronous, and the
  // process.exit below would cut off everything past the pipe's buffer.
  await new Promise((resolve) => process.stdout.write(toJSON(out) + "\n", resolve));
} else if (mode === "writer") {
  try {
    await runWriter(JSON.parse(process.argv[3]));
  } catch (e) {
    const cfg = JSON.parse(process.argv[3]);
    (cfg.opsFile ? (l) => fs.appendFileSync(cfg.opsFile, l) : (l) => process.stdout.write(l))(toJSON({ op: "fatal", failed: true, error: String(e && e.stack ? e.stack : e), ts: Date.now() }) + "\n");
    process.exitCode = 1;
  }
} else {
  process.stderr.write("usage: node oracle.mjs run < program.json | node oracle.mjs writer CONFIG\n");
  process.exit(2);
}
// A finished run exits even if LanceDB leaves background handles behind.
process.exit(process.exitCode || 0);

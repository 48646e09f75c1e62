// Generates Lance data files with LanceDB and records LanceDB's own read of
// each as JSON, the oracle the Go reader is compared with.
//
//   node gen.mjs OUTDIR corpus|matrix|CASE...
//
// LANCEDB_NODE_MODULES names the node_modules holding @lancedb/lancedb and
// apache-arrow. For every case it writes OUTDIR/NAME.lance (the table's only
// data file) and OUTDIR/NAME.json ({rows, columns: {name: [value...]}}),
// where a value is null, true/false (bool), a hex string of the value's
// little-endian bytes (fixed width) or of its bytes (strings, binaries), an
// array (lists, fixed-size lists) or an object (structs). Data is built from
// raw buffers with a seeded generator, so reruns give the same values.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import zlib from "node:zlib";

const mods = process.env.LANCEDB_NODE_MODULES;
if (!mods) throw new Error("LANCEDB_NODE_MODULES is not set");
const require = createRequire(path.join(path.resolve(mods), "x.js"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

// ---- deterministic data -------------------------------------------------
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

function bitmap(n, valid) {
  const b = new Uint8Array(((n + 63) >> 6) << 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) { if (valid(i)) b[i >> 3] |= 1 << (i & 7); else nulls++; }
  return [b, nulls];
}

// Physical byte width of a fixed-width Arrow type, 0 when not fixed width.
function width(t) {
  switch (t.typeId) {
    case arrow.Type.Int: return t.bitWidth / 8;
    case arrow.Type.Float: return [2, 4, 8][t.precision];
    case arrow.Type.Date: return t.unit === arrow.DateUnit.DAY ? 4 : 8;
    case arrow.Type.Timestamp: return 8;
    case arrow.Type.Decimal: return t.bitWidth / 8;
    case arrow.Type.FixedSizeBinary: return t.byteWidth;
    case arrow.Type.Time: return t.bitWidth / 8;
    case arrow.Type.Duration: return 8;
  }
  return 0;
}

const typeOf = {
  int8: () => new arrow.Int8(), int16: () => new arrow.Int16(), int32: () => new arrow.Int32(), int64: () => new arrow.Int64(),
  uint8: () => new arrow.Uint8(), uint16: () => new arrow.Uint16(), uint32: () => new arrow.Uint32(), uint64: () => new arrow.Uint64(),
  float16: () => new arrow.Float16(), float32: () => new arrow.Float32(), float64: () => new arrow.Float64(),
  bool: () => new arrow.Bool(), utf8: () => new arrow.Utf8(), large_utf8: () => new arrow.LargeUtf8(),
  binary: () => new arrow.Binary(), large_binary: () => new arrow.LargeBinary(),
  fsb16: () => new arrow.FixedSizeBinary(16), date32: () => new arrow.DateDay(), date64: () => new arrow.DateMillisecond(),
  ts_s: () => new arrow.TimestampSecond(), ts_ms: () => new arrow.TimestampMillisecond(),
  ts_us: () => new arrow.TimestampMicrosecond(), ts_ns: () => new arrow.TimestampNanosecond(),
  ts_us_tz: () => new arrow.TimestampMicrosecond("UTC"), ts_ns_tz: () => new arrow.TimestampNanosecond("America/New_York"),
  dec128: () => new arrow.Decimal(2, 20, 128), dec256: () => new arrow.Decimal(3, 40, 256),
  time32_ms: () => new arrow.TimeMillisecond(), time64_us: () => new arrow.TimeMicrosecond(),
  time64_ns: () => new arrow.TimeNanosecond(), dur_ms: () => new arrow.DurationMillisecond(),
  dur_ns: () => new arrow.DurationNanosecond(),
};

// Fills n fixed-width values of w bytes following pattern p.
function fixedBytes(n, w, p, r, kind) {
  const out = new Uint8Array(n * w);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < n; i++) {
    let v;
    switch (p) {
      case "seq": v = BigInt(i); break;
      case "const": v = 42n; break;
      case "lowcard": v = BigInt(Math.floor(r() * 5)); break;
      case "runs": v = BigInt(Math.floor(i / 50) % 7); break;
      case "small": v = BigInt(Math.floor(r() * 1000)); break;
      default: v = BigInt(Math.floor(r() * 4294967296)) << 32n | BigInt(Math.floor(r() * 4294967296));
    }
    if (kind === "float") {
      const f = p === "random" ? (r() - 0.5) * 1e6 : Number(v) + 0.25;
      if (w === 4) dv.setFloat32(i * 4, f, true);
      else if (w === 8) dv.setFloat64(i * 8, f, true);
      else dv.setUint16(i * 2, Number(v & 0x3fffn), true); // float16 bit patterns
      continue;
    }
    if (kind === "ts") { // plausible timestamps: 2024 plus a few hours
      v = 1704067200n * 1000000n + (p === "random" ? BigInt(Math.floor(r() * 1e10)) : v * 1000000n);
    }
    for (let b = 0; b < w; b++) out[i * w + b] = Number((v >> BigInt(8 * (b % 8))) & 0xffn);
    if (kind === "signed" && w <= 8 && p === "random" && r() < 0.5) out[i * w + w - 1] |= 0x80;
  }
  return out;
}

function strings(n, p, r, large, minLen) {
  const parts = [];
  const words = ["alpha", "beta", "gamma", "delta", "epsilon", "lance", "compactord", "zeta"];
  for (let i = 0; i < n; i++) {
    let s;
    switch (p) {
      case "lowcard": s = words[Math.floor(r() * 4)]; break;
      case "const": s = "same-value"; break;
      case "empty": s = i % 3 === 0 ? "" : "x" + i; break;
      default: {
        s = `${words[i % words.length]}-${i}-${Math.floor(r() * 1e6)}`;
        if (r() < 0.1) s += " ünïcödé ✓";
      }
    }
    while (s.length < (minLen || 0)) s += `|${words[Math.floor(r() * words.length)]}${Math.floor(r() * 1e9)}`;
    parts.push(Buffer.from(s, "utf8"));
  }
  const offs = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  let total = 0;
  parts.forEach((b, i) => { total += b.length; offs[i + 1] = large ? BigInt(total) : total; });
  return [offs, new Uint8Array(Buffer.concat(parts))];
}

// Builds the Arrow Data of one column spec.
function makeColumn(c, n, r) {
  const nullable = !!c.nullable;
  const validFn = c.allNull ? () => false : (i) => !nullable || r() >= (c.nullFrac ?? 0.2);
  const [nb, nulls] = nullable ? bitmap(n, validFn) : [undefined, 0];
  const p = c.pattern || "random";
  const t = c.type;
  if (t.startsWith("fsl_f32_")) {
    const dim = Number(t.slice(8));
    const vals = new Float32Array(n * dim);
    for (let i = 0; i < vals.length; i++) vals[i] = p === "const" ? 1.5 : Math.fround((r() - 0.5) * 10);
    const child = arrow.makeData({ type: new arrow.Float32(), length: n * dim, data: vals });
    const type = new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Float32(), true));
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, child })];
  }
  if (t === "fsl_i32_nullable_3" || t.startsWith("fsl_i32n_")) {
    const dim = t === "fsl_i32_nullable_3" ? 3 : Number(t.slice(9));
    const [cb, cn] = bitmap(n * dim, () => r() >= 0.2);
    const child = arrow.makeData({ type: new arrow.Int32(), length: n * dim, nullCount: cn, nullBitmap: cb, data: new Int32Array(fixedBytes(n * dim, 4, "small", r).buffer) });
    const type = new arrow.FixedSizeList(dim, new arrow.Field("item", new arrow.Int32(), true));
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, child })];
  }
  // apache-arrow 18 (the one LanceDB's Node package uses) has no LargeList.
  if (t === "list_i32" || t === "list_utf8" || t === "list_of") {
    const large = false;
    const lens = [];
    for (let i = 0; i < n; i++) lens.push(c.pattern === "emptyish" ? (r() < 0.3 ? 0 : Math.floor(r() * 5)) : Math.floor(r() * 6));
    const total = lens.reduce((a, b) => a + b, 0);
    const offs = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
    let acc = 0;
    lens.forEach((l, i) => { acc += l; offs[i + 1] = large ? BigInt(acc) : acc; });
    const itemNullable = c.itemNullable !== false;
    const [cb, cn] = itemNullable ? bitmap(total, () => r() >= 0.15) : [undefined, 0];
    let child, itype;
    if (c.listOf) {
      [itype, child] = makeColumn({ ...c.listOf, nullable: itemNullable }, total, r);
    } else if (t === "list_utf8") {
      const [so, sd] = strings(total, "random", r, false);
      itype = new arrow.Utf8();
      child = arrow.makeData({ type: itype, length: total, nullCount: cn, nullBitmap: cb, valueOffsets: so, data: sd });
    } else {
      itype = new arrow.Int32();
      child = arrow.makeData({ type: itype, length: total, nullCount: cn, nullBitmap: cb, data: new Int32Array(fixedBytes(total, 4, "small", r).buffer) });
    }
    const f = new arrow.Field("item", itype, itemNullable);
    const type = new arrow.List(f);
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, valueOffsets: offs, child })];
  }
  if (t === "struct") {
    const kids = (c.children || [{ name: "a", type: "int32", nullable: true }, { name: "b", type: "utf8", nullable: true }]);
    const built = kids.map((k) => [k, ...makeColumn(k, n, r)]);
    const type = new arrow.Struct(built.map(([k, kt]) => new arrow.Field(k.name, kt, !!k.nullable)));
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, children: built.map((b) => b[2]) })];
  }
  // Arrow dictionary arrays (an index type over a utf8 dictionary), which
  // LanceDB stores with logical type dict:string:<index>:false.
  // dict_VALUE[_KEY]: VALUE utf8, large_utf8 or binary; KEY i8, i16, u8
  // or (default) i32.
  // dictn_VALUE[_KEY]: a dictionary of fixed-width VALUEs (int8..uint64,
  // float16/32/64, bool), KEY i8..i64, u8..u64 or (default) i32; c.items values.
  if (t.startsWith("dictn_")) {
    const [, vt, kt] = t.match(/^dictn_((?:u?int|float)(?:8|16|32|64)|bool)(?:_([iu](?:8|16|32|64)))?$/);
    const keyTypes = { i8: "int8", i16: "int16", i32: "int32", i64: "int64", u8: "uint8", u16: "uint16", u32: "uint32", u64: "uint64" };
    const it = typeOf[keyTypes[kt || "i32"]]();
    const nd = p === "const" ? 1 : (c.items ?? 7);
    const [vtype, vdata] = makeColumn({ type: vt, pattern: c.valuePattern || "random" }, nd, r);
    const type = new arrow.Dictionary(vtype, it);
    const idx = new it.ArrayType(n);
    for (let i = 0; i < n; i++) {
      const k = Math.floor(r() * nd);
      idx[i] = it.bitWidth === 64 ? BigInt(k) : k;
    }
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, data: idx, dictionary: arrow.makeVector(vdata) })];
  }
  if (t.startsWith("dict_")) {
    const [, vt, kt] = t.match(/^dict_(utf8|large_utf8|binary)(?:_(i8|i16|u8))?$/);
    const words = p === "const" ? ["same-value"] : ["alpha", "beta", "gamma", "delta", "epsilon ünïcödé", ""];
    const it = { i8: new arrow.Int8(), i16: new arrow.Int16(), u8: new arrow.Uint8() }[kt] || new arrow.Int32();
    const vtype = typeOf[vt]();
    const type = new arrow.Dictionary(vtype, it);
    const enc = words.map((w) => Buffer.from(w, "utf8"));
    const large = vt === "large_utf8";
    const offs = large ? new BigInt64Array(enc.length + 1) : new Int32Array(enc.length + 1);
    let end = 0;
    enc.forEach((b, i) => { end += b.length; offs[i + 1] = large ? BigInt(end) : end; });
    const dict = arrow.makeVector(arrow.makeData({ type: vtype, length: enc.length, valueOffsets: offs, data: new Uint8Array(Buffer.concat(enc)) }));
    const idx = new it.ArrayType(n);
    for (let i = 0; i < n; i++) idx[i] = Math.floor(r() * words.length);
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, data: idx, dictionary: dict })];
  }
  const type = typeOf[t]();
  if (t === "bool") {
    const [vb] = bitmap(n, (i) => p === "const" ? true : p === "runs" ? Math.floor(i / 100) % 2 === 0 : r() < 0.5);
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, data: vb })];
  }
  if (["utf8", "large_utf8", "binary", "large_binary"].includes(t)) {
    const large = t.startsWith("large");
    const [offs, data] = strings(n, p, r, large, c.minLen);
    return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, valueOffsets: offs, data })];
  }
  const w = width(type);
  const kind = t.startsWith("float") ? "float" : t.startsWith("ts") ? "ts" : t.startsWith("int") || t === "dec128" ? "signed" : "";
  const raw = fixedBytes(n, w, p, r, kind);
  const arrays = { 1: Uint8Array, 2: Uint16Array, 4: Uint32Array, 8: BigUint64Array, 16: Uint32Array, 32: Uint32Array };
  let data = raw;
  if (t !== "fsb16") data = new (arrays[w])(raw.buffer);
  if (t === "float32") data = new Float32Array(raw.buffer);
  if (t === "float64") data = new Float64Array(raw.buffer);
  if (t.startsWith("int") && w === 8) data = new BigInt64Array(raw.buffer);
  if (t.startsWith("int") && w < 8) data = new ({ 1: Int8Array, 2: Int16Array, 4: Int32Array })[w](raw.buffer);
  if (t.startsWith("ts") || t === "date64" || t.startsWith("dur") || t.startsWith("time64")) data = new BigInt64Array(raw.buffer);
  if (t === "time32_ms") data = new Int32Array(raw.buffer);
  if (t === "date32") data = new Int32Array(raw.buffer);
  return [type, arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nb, data })];
}

// ---- canonical values of LanceDB's read ---------------------------------
function isValid(d, i) {
  const nb = d.nullBitmap;
  if (!nb || nb.length === 0 || d.nullCount === 0) return true;
  const j = d.offset + i;
  return (nb[j >> 3] >> (j & 7)) & 1;
}
function hex(u8) { return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("hex"); }
function canon(d, i) {
  if (!isValid(d, i)) return null;
  const t = d.type;
  const j = d.offset + i;
  switch (t.typeId) {
    case arrow.Type.Dictionary: {
      // The item the key names, canonical as its value type.
      let k = Number(d.values[j]);
      for (const part of d.dictionary.data) {
        if (k < part.length) return canon(part, k);
        k -= part.length;
      }
      throw new Error(`dictionary key ${d.values[j]} past the dictionary`);
    }
    case arrow.Type.Bool: return !!((d.values[j >> 3] >> (j & 7)) & 1);
    case arrow.Type.Utf8: case arrow.Type.Binary: case arrow.Type.LargeUtf8: case arrow.Type.LargeBinary: {
      const a = Number(d.valueOffsets[j]), b = Number(d.valueOffsets[j + 1]);
      return hex(d.values.subarray(a, b));
    }
    case arrow.Type.List: case arrow.Type.LargeList: {
      const a = Number(d.valueOffsets[j]), b = Number(d.valueOffsets[j + 1]);
      const out = [];
      for (let k = a; k < b; k++) out.push(canon(d.children[0], k));
      return out;
    }
    case arrow.Type.FixedSizeList: {
      const out = [];
      for (let k = 0; k < t.listSize; k++) out.push(canon(d.children[0], j * t.listSize + k));
      return out;
    }
    case arrow.Type.Struct: {
      const o = {};
      t.children.forEach((f, k) => { o[f.name] = canon(d.children[k], j); });
      return o;
    }
  }
  const w = width(t);
  if (!w) throw new Error("no canonical form for " + t);
  const u8 = new Uint8Array(d.values.buffer, d.values.byteOffset, d.values.byteLength);
  return hex(u8.subarray(j * w, (j + 1) * w));
}

function canonTable(tbl) {
  const cols = {};
  for (const f of tbl.schema.fields) {
    const out = [];
    for (const d of tbl.getChild(f.name).data) for (let i = 0; i < d.length; i++) out.push(canon(d, i));
    cols[f.name] = out;
  }
  return { rows: tbl.numRows, columns: cols };
}

// ---- cases ---------------------------------------------------------------
const prims = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
  "bool", "utf8", "large_utf8", "binary", "large_binary", "fsb16", "date32", "date64", "ts_s", "ts_ms", "ts_us", "ts_ns",
  "ts_us_tz", "ts_ns_tz", "dec128"];
const nested = [
  { name: "vec", type: "fsl_f32_8" }, { name: "vec_n", type: "fsl_f32_8", nullable: true },
  { name: "fsl_in", type: "fsl_i32_nullable_3", nullable: true },
  { name: "li", type: "list_i32" }, { name: "li_n", type: "list_i32", nullable: true, pattern: "emptyish" },
  { name: "ls", type: "list_utf8", nullable: true },
  { name: "st", type: "struct", nullable: true },
  { name: "st2", type: "struct", children: [{ name: "x", type: "int64" }, { name: "y", type: "struct", nullable: true, children: [{ name: "z", type: "float64", nullable: true }] }] },
];
// Format 2.0 cannot store struct validity: its structs are all valid.
function noStructNulls(cols) {
  return cols.map((c) => c.type === "struct" ? { ...c, nullable: false, children: c.children && noStructNulls(c.children) } : c);
}
function allTypes() {
  const cols = [];
  for (const t of prims) {
    cols.push({ name: t, type: t });
    cols.push({ name: t + "_n", type: t, nullable: true });
  }
  cols.push({ name: "i64_seq", type: "int64", pattern: "seq" }, { name: "i32_small", type: "int32", pattern: "small", nullable: true },
    { name: "s_low", type: "utf8", pattern: "lowcard", nullable: true }, { name: "s_const", type: "utf8", pattern: "const" },
    { name: "i_const", type: "int64", pattern: "const" }, { name: "all_null", type: "int32", nullable: true, allNull: true },
    { name: "s_all_null", type: "utf8", nullable: true, allNull: true }, { name: "s_empty", type: "utf8", pattern: "empty", nullable: true });
  return cols.concat(nested);
}
const md = (m) => (c) => ({ ...c, metadata: m });
const forced = (m, types) => types.map((t) => md(m)(typeof t === "string" ? { name: t, type: t, nullable: true } : { nullable: true, ...t }));
const fcommon = ["int32", "int64", "float64", "utf8", "binary", "bool", "ts_us", { name: "vec", type: "fsl_f32_8" }, { name: "li", type: "list_i32" }];

const cases = {};
for (const v of ["2.0", "2.1", "2.2"]) {
  const tag = v.replace(".", "");
  const cols = v === "2.0" ? noStructNulls(allTypes()) : allTypes();
  cases[`all_v${tag}`] = { version: v, rows: 300, columns: cols };
  cases[`allbig_v${tag}`] = { version: v, rows: 5000, columns: cols };
  cases[`large_v${tag}`] = { version: v, rows: 20, columns: [
    { name: "s300", type: "utf8", minLen: 300, nullable: true }, { name: "b2k", type: "binary", minLen: 2000 },
    { name: "v768", type: "fsl_f32_768" }, { name: "v768_n", type: "fsl_f32_768", nullable: true },
    { name: "ls300", type: "list_utf8", nullable: true }] };
}
for (const v of ["2.1", "2.2"]) {
  const tag = v.replace(".", "");
  cases[`zstd_v${tag}`] = { version: v, rows: 1200, columns: forced({ "lance-encoding:compression": "zstd" }, fcommon) };
  cases[`lz4_v${tag}`] = { version: v, rows: 1200, columns: forced({ "lance-encoding:compression": "lz4" }, fcommon) };
  cases[`none_v${tag}`] = { version: v, rows: 1200, columns: forced({ "lance-encoding:compression": "none" }, fcommon) };
  cases[`fullzip_v${tag}`] = { version: v, rows: 800, columns: forced({ "lance-encoding:structural-encoding": "fullzip" }, fcommon) };
  cases[`rle_v${tag}`] = { version: v, rows: 3000, columns: forced({ "lance-encoding:rle-threshold": "0.9" },
    [{ name: "i32", type: "int32", pattern: "runs" }, { name: "i64", type: "int64", pattern: "runs" }, { name: "u8", type: "uint8", pattern: "runs" },
     { name: "f64", type: "float64", pattern: "runs" }, { name: "b", type: "bool", pattern: "runs" }]) };
  cases[`bss_v${tag}`] = { version: v, rows: 2000, columns: forced({ "lance-encoding:bss": "on" }, ["float32", "float64"]).concat(
    forced({ "lance-encoding:bss": "on", "lance-encoding:compression": "zstd" }, [{ name: "f32z", type: "float32" }, { name: "f64z", type: "float64" }])) };
  cases[`dict_v${tag}`] = { version: v, rows: 3000, columns: forced({ "lance-encoding:dict-divisor": "2", "lance-encoding:dict-size-ratio": "0.99" },
    [{ name: "s", type: "utf8", pattern: "lowcard" }, { name: "i64", type: "int64", pattern: "lowcard" }, { name: "i32", type: "int32", pattern: "lowcard" },
     { name: "f64", type: "float64", pattern: "lowcard" }]) };
}
cases.more_v22 = { version: "2.2", rows: 700, columns: ["dec256", "time32_ms", "time64_us", "time64_ns", "dur_ms", "dur_ns"].flatMap((t) =>
  [{ name: t, type: t, pattern: "small" }, { name: t + "_n", type: t, nullable: true, pattern: "small" }]) };
cases.fsst_v22 = { version: "2.2", rows: 2500, columns: [{ name: "s", type: "utf8" }, { name: "s_n", type: "large_utf8", nullable: true }] };
cases.fsst_v21 = { ...cases.fsst_v22, version: "2.1" };
cases.fzzstd_v22 = { version: "2.2", rows: 600, columns: forced({ "lance-encoding:structural-encoding": "fullzip", "lance-encoding:compression": "zstd" },
  ["int64", "utf8", "binary", { name: "vec", type: "fsl_f32_8" }, { name: "li", type: "list_i32" }]).concat(
  forced({ "lance-encoding:compression": "zstd" }, [{ name: "s300", type: "utf8", minLen: 300 }, { name: "v768", type: "fsl_f32_768" }])) };
cases.fzlz4_v22 = { version: "2.2", rows: 300, columns: forced({ "lance-encoding:compression": "lz4" }, [{ name: "s300", type: "utf8", minLen: 300 }, { name: "b2k", type: "binary", minLen: 2000 }]) };
// lance-encoding:packed on a struct: LanceDB stores the struct as one
// packed column (fixed-width children; 2.2 also variable-width ones).
const packedCols = (v) => forced({ "lance-encoding:packed": "true" }, [
  { name: "pf", type: "struct", nullable: false, children: [{ name: "a", type: "int32" }, { name: "b", type: "float64" }, { name: "c", type: "uint8" }] },
  { name: "pfn", type: "struct", nullable: v !== "2.0", children: [{ name: "x", type: "int64" }, { name: "y", type: "float32" }] },
].concat(v === "2.2" ? [{ name: "pv", type: "struct", nullable: true, children: [{ name: "id", type: "int32" }, { name: "s", type: "utf8" }, { name: "bin", type: "binary" }] }] : []))
  .concat([{ name: "plain", type: "struct", nullable: false, children: [{ name: "a", type: "int32" }, { name: "b", type: "float64" }] }]);
for (const v of ["2.0", "2.1", "2.2"]) {
  const tag = v.replace(".", "");
  cases[`packed_v${tag}`] = { version: v, rows: 1500, columns: packedCols(v) };
  cases[`packedbig_v${tag}`] = { version: v, rows: 30000, columns: packedCols(v) };
}
// Fixed-size lists inside lists and structs.
const nestedFsl = [
  { name: "lv", type: "list_of", nullable: true, itemNullable: false, listOf: { type: "fsl_f32_4" } },
  { name: "lvn", type: "list_of", nullable: true, listOf: { type: "fsl_f32_4" } },
  { name: "sv", type: "struct", nullable: true, children: [{ name: "id", type: "int32" }, { name: "v", type: "fsl_f32_4", nullable: true }] },
  { name: "lfi", type: "list_of", listOf: { type: "fsl_i32_nullable_3" } },
];
// Arrow dictionary-typed columns.
const dictCols = [{ name: "d", type: "dict_utf8" }, { name: "d_n", type: "dict_utf8", nullable: true },
  { name: "d8", type: "dict_utf8_i8", nullable: true }, { name: "d_const", type: "dict_utf8", pattern: "const" },
  { name: "d16", type: "dict_utf8_i16", nullable: true }, { name: "d16_null", type: "dict_utf8_i16", nullable: true, allNull: true },
  { name: "du8", type: "dict_utf8_u8", nullable: true }, { name: "dl", type: "dict_large_utf8", nullable: true },
  { name: "db", type: "dict_binary", nullable: true },
  { name: "ld", type: "list_of", nullable: true, listOf: { type: "dict_utf8" } },
  // Not a dictionary type: low-cardinality large strings, which writers dictionary-encode.
  { name: "ls_low", type: "large_utf8", pattern: "lowcard", nullable: true }];
// Structs with nulls need 2.1+.
const dictStruct = { name: "sd", type: "struct", nullable: true, children: [{ name: "id", type: "int32" }, { name: "d", type: "dict_utf8", nullable: true }] };
for (const v of ["2.0", "2.1", "2.2"]) {
  cases[`arrowdict_v${v.replace(".", "")}`] = { version: v, rows: 800, columns: v === "2.0" ? dictCols.concat(noStructNulls([dictStruct])) : dictCols.concat([dictStruct]) };
}
// Arrow dictionaries of numbers (LanceDB stores dict:VALUE:KEY:false
// with a fixed-width VALUE).
const numDictCols = [{ name: "i32", type: "dictn_int32" }, { name: "i32_n", type: "dictn_int32", nullable: true },
  { name: "f64_8", type: "dictn_float64_i8", nullable: true }, { name: "i64_u8", type: "dictn_int64_u8", nullable: true },
  { name: "f32_16", type: "dictn_float32_i16", nullable: true }, { name: "i8_u16", type: "dictn_int8_u16", nullable: true, items: 3 },
  { name: "u64_i64", type: "dictn_uint64_i64", nullable: true }, { name: "u16_u32", type: "dictn_uint16_u32" },
  { name: "i16_const", type: "dictn_int16_i8", pattern: "const" }, { name: "f64_null", type: "dictn_float64", nullable: true, allNull: true },
  { name: "f64_many", type: "dictn_float64_i16", nullable: true, items: 300 },
  { name: "f16_u8", type: "dictn_float16_u8", nullable: true }, { name: "u32_i16", type: "dictn_uint32_i16" },
  { name: "u8_u64", type: "dictn_uint8_u64", nullable: true, items: 3 },
  // Every int8 key in use (2.0 has no room for a null item beside them).
  { name: "f64_full", type: "dictn_float64_i8", items: 128 },
  { name: "b_i8", type: "dictn_bool_i8", nullable: true, items: 2 }, { name: "b_one", type: "dictn_bool", items: 1 },
  { name: "lnd", type: "list_of", nullable: true, listOf: { type: "dictn_int32_i8" } }];
const numDictStruct = { name: "snd", type: "struct", nullable: true, children: [{ name: "id", type: "int32" }, { name: "d", type: "dictn_float64_i8", nullable: true }] };
for (const v of ["2.0", "2.1", "2.2"]) {
  cases[`numdict_v${v.replace(".", "")}`] = { version: v, rows: 800, columns: v === "2.0" ? numDictCols.concat(noStructNulls([numDictStruct])) : numDictCols.concat([numDictStruct]) };
}
// Wide fixed-size lists with null items (full-zip), alone and nested.
const wideFsl = [
  { name: "w", type: "fsl_i32n_80", nullable: true },
  { name: "lw", type: "list_of", nullable: true, listOf: { type: "fsl_i32n_80" } },
  { name: "sw", type: "struct", nullable: true, children: [{ name: "id", type: "int32" }, { name: "w", type: "fsl_i32n_80", nullable: true }] },
  { name: "lv", type: "list_of", listOf: { type: "fsl_f32_96" } },
];
for (const v of ["2.1", "2.2"]) cases[`widefsl_v${v.replace(".", "")}`] = { version: v, rows: 60, columns: wideFsl };
for (const v of ["2.1", "2.2"]) {
  const tag = v.replace(".", "");
  cases[`nestedfsl_v${tag}`] = { version: v, rows: 1000, columns: nestedFsl };
  cases[`nestedfslbig_v${tag}`] = { version: v, rows: 30000, columns: nestedFsl };
}
cases.nestedfsl_v20 = { version: "2.0", rows: 1000, columns: noStructNulls(nestedFsl) };
// A big file for decode benchmarks (no oracle JSON): LANCE_BENCH_FILE.
cases.bench_v22 = { version: "2.2", rows: 500000, noOracle: true, benchOnly: true, columns: [
  { name: "i64", type: "int64" }, { name: "i64_seq", type: "int64", pattern: "seq" }, { name: "i64_n", type: "int64", nullable: true },
  { name: "i32_small", type: "int32", pattern: "small" }, { name: "f64", type: "float64" }, { name: "f32", type: "float32" },
  { name: "utf8", type: "utf8" }, { name: "s_low", type: "utf8", pattern: "lowcard" }, { name: "bool", type: "bool" },
  { name: "ts_us", type: "ts_us" }, { name: "vec8", type: "fsl_f32_8" }, { name: "li", type: "list_i32" },
  { name: "f64_n", type: "float64", nullable: true }] };
cases.bench_vec_v22 = { version: "2.2", rows: 20000, noOracle: true, benchOnly: true, columns: [{ name: "v768", type: "fsl_f32_768" }, { name: "s300", type: "utf8", minLen: 300 }] };
cases.multipage_v22 = { version: "2.2", rows: 40000, columns: [
  { name: "id", type: "int64", pattern: "seq" }, { name: "f", type: "float64", nullable: true }, { name: "s", type: "utf8", nullable: true },
  { name: "vec", type: "fsl_f32_8" }, { name: "li", type: "list_i32", nullable: true }, { name: "b", type: "bool", nullable: true }] };

// The committed corpus: small files covering every type and encoding.
const corpus = ["all_v20", "all_v21", "all_v22", "large_v20", "large_v22", "zstd_v22", "lz4_v22", "fullzip_v22",
  "rle_v22", "bss_v22", "dict_v22", "dict_v21", "more_v22", "fsst_v22", "packed_v20", "packed_v21", "packed_v22",
  "nestedfsl_v20", "nestedfsl_v21", "nestedfsl_v22", "widefsl_v21", "widefsl_v22", "arrowdict_v20", "arrowdict_v21", "arrowdict_v22",
  "numdict_v20", "numdict_v21", "numdict_v22"];

// ---- main ------------------------------------------------------------------
async function run(outDir, name, spec) {
  const r = rng(name.split("").reduce((a, ch) => a * 31 + ch.charCodeAt(0), 7));
  const fields = [], datas = [];
  for (const c of spec.columns) {
    const [type, data] = makeColumn(c, spec.rows, r);
    const meta = new Map(Object.entries(c.metadata || {}));
    fields.push(new arrow.Field(c.name, type, !!c.nullable, meta));
    datas.push(data);
  }
  const schema = new arrow.Schema(fields);
  const batch = new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(fields), length: spec.rows, nullCount: 0, children: datas }));
  const table = new arrow.Table([batch]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lance-gen-"));
  const saved = {};
  for (const [k, v] of Object.entries(spec.env || {})) { saved[k] = process.env[k]; process.env[k] = v; }
  try {
    const db = await lancedb.connect(dir);
    const t = await db.createTable(name, table, { storageOptions: { new_table_data_storage_version: spec.version } });
    const files = fs.readdirSync(path.join(dir, `${name}.lance`, "data"));
    if (files.length !== 1) throw new Error(`${name}: ${files.length} data files`);
    fs.copyFileSync(path.join(dir, `${name}.lance`, "data", files[0]), path.join(outDir, `${name}.lance`));
    if (spec.benchOnly) {
      // LanceDB's own time to read each column in full (best of 3), to
      // compare with BenchmarkDecode on the same file.
      for (const c of spec.columns) {
        let best = Infinity;
        for (let k = 0; k < 3; k++) {
          const t0 = process.hrtime.bigint();
          await t.query().select([c.name]).toArrow();
          best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
        }
        console.log(`lancedb-read ${name} ${c.name} ${best.toFixed(2)} ms`);
      }
    }
    if (spec.noOracle) return;
    const back = await t.query().toArrow();
    fs.writeFileSync(path.join(outDir, `${name}.json.gz`), zlib.gzipSync(JSON.stringify(canonTable(back)), { level: 9 }));
  } finally {
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// node gen.mjs read DBDIR OUTDIR NAME...: LanceDB's read of the tables
// DBDIR/NAME.lance (made by the Go writer's tests) as OUTDIR/NAME.json, or
// OUTDIR/NAME.err with LanceDB's error.
if (process.argv[2] === "read") {
  const [dbDir, outDir, ...tables] = process.argv.slice(3);
  const db = await lancedb.connect(dbDir);
  for (const n of tables) {
    try {
      const t = await db.openTable(n);
      const back = await t.query().toArrow();
      fs.writeFileSync(path.join(outDir, `${n}.json`), JSON.stringify(canonTable(back)));
    } catch (e) {
      fs.writeFileSync(path.join(outDir, `${n}.err`), String(e.message || e));
    }
  }
  process.exit(0);
}

const [outDir, ...which] = process.argv.slice(2);
if (!outDir) throw new Error("usage: node gen.mjs OUTDIR corpus|matrix|CASE...");
fs.mkdirSync(outDir, { recursive: true });
let names = [];
for (const w of which.length ? which : ["corpus"]) {
  if (w === "corpus") names.push(...corpus);
  else if (w === "matrix") names.push(...Object.keys(cases).filter((k) => !cases[k].benchOnly));
  else if (cases[w]) names.push(w);
  else throw new Error("unknown case " + w);
}
for (const n of [...new Set(names)]) {
  try { await run(outDir, n, cases[n]); console.log("ok", n); }
  catch (e) { console.log("FAIL", n, String(e.message || e).split("\n")[0]); process.exitCode = 1; }
}

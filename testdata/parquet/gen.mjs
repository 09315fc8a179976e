#!/usr/bin/env node
// gen.mjs: the Parquet fixtures of ingest's tests, written by DuckDB (the
// writer users have), and their goldens (gzipped): each column's key text as DuckDB
// computes it from DESIGN's rules (integers in decimal, strings and blobs
// as their bytes (hex here), booleans true/false, DECIMAL as plain
// decimal text with its scale, DATE/TIME/TIMESTAMP as the stored integer
// in the file's unit), one row a line, NULL as \N. Floats are written
// with 17 significant digits; the test formats them as Go's shortest
// round-trip text itself.
//
//   npm install --prefix /tmp/duckdb @duckdb/node-api@1.5.6-r.1
//   NODE_PATH=/tmp/duckdb/node_modules node testdata/parquet/gen.mjs testdata/parquet
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');

const dir = process.argv[2] ?? '.';
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
await con.run(`CREATE TABLE t AS SELECT
  i AS id,
  ((i * 37) % 256 - 128)::TINYINT AS i8,
  ((i * 7919) % 2000000 - 1000000)::INTEGER AS i32,
  (i * 1000000007 - 300000000000)::BIGINT AS i64,
  ((i * 2654435761) % 4294967296)::UINTEGER AS u32,
  (18446744073709551615 - i * 12345)::UBIGINT AS u64,
  (i % 3 = 0) AS b,
  (i / 7.0)::FLOAT AS f,
  (i * 1.0e15 / 7)::DOUBLE AS d,
  'k-' || i || CASE WHEN i % 5 = 0 THEN ' späce' ELSE '' END AS s,
  ('\\x00\\x01' || i::VARCHAR)::BLOB AS bl,
  (((i * 104729) % 1000000 - 500000) / 100)::DECIMAL(18,2) AS dec,
  (((i * 104729) % 1000000 - 500000)::DECIMAL(38,10) / 1000)::DECIMAL(38,10) AS dec38,
  (DATE '1970-01-01' + (i * 37 - 5000)::INTEGER) AS dt,
  make_timestamp((1700000000000000 + i * 1000003)::BIGINT) AS ts,
  make_timestamp_ms((1700000000000 + i * 1003)::BIGINT)::TIMESTAMP_MS AS tsms,
  make_timestamp_ns((1700000000000000000 + i * 1000000007)::BIGINT) AS tsns,
  make_time(0, 0, 0) + to_microseconds((i * 86399999 // 1000)::BIGINT) AS tm,
  {'a': i % 100, 'b': 'n' || i} AS st,
  CASE WHEN i % 7 = 3 THEN NULL ELSE i END AS n,
  [i, i + 1] AS l
  FROM range(4200) r(i)`);
await con.run(`COPY t TO '${dir}/types.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048)`);
// The same rows in BROTLI, which DuckDB, Arrow and Polars read and write:
// the same golden.
await con.run(`COPY t TO '${dir}/types-brotli.parquet' (FORMAT parquet, COMPRESSION brotli, ROW_GROUP_SIZE 2048)`);
// A small file, the fuzz targets' seed: every kind of value in a few rows.
await con.run(`COPY (SELECT * FROM t WHERE id < 12) TO '${dir}/small.parquet' (FORMAT parquet, COMPRESSION snappy)`);
const golden = await con.runAndReadAll(`SELECT
  i8::VARCHAR, i32::VARCHAR, i64::VARCHAR, u32::VARCHAR, u64::VARCHAR, b::VARCHAR,
  printf('%.17g', f::DOUBLE), printf('%.17g', d),
  hex(encode(s)), hex(bl), dec::VARCHAR, dec38::VARCHAR,
  (dt - DATE '1970-01-01')::VARCHAR, epoch_us(ts)::VARCHAR, epoch_ms(tsms)::VARCHAR, epoch_ns(tsns)::VARCHAR,
  (epoch_us(DATE '1970-01-01' + tm))::VARCHAR,
  st.a::VARCHAR, hex(encode(st.b)), coalesce(n::VARCHAR, '\\N')
  FROM t ORDER BY id`);
const cols = 'i8 i32 i64 u32 u64 b f d s bl dec dec38 dt ts tsms tsns tm st.a st.b n';
const lines = [cols.split(' ').join('\t')];
for (const row of golden.getRows()) lines.push(row.join('\t'));
const fs = await import('node:fs');
fs.writeFileSync(`${dir}/types.golden.tsv.gz`, (await import('node:zlib')).gzipSync(lines.join('\n') + '\n', { level: 9 }));
console.log(`${dir}/types.parquet: 4200 rows, 3 row groups; ${dir}/types.golden.tsv.gz; ${dir}/small.parquet: 12 rows`);

// Events as the data lake holds them: the key (user_id, device_id, ts) of
// row i is a function of a key id drawn from hash(i) over 0.96n ids, so
// ~38% of rows repeat an earlier key; amount and event belong to the row.
// events-nested.parquet adds NULL device_ids (~2%) and a STRUCT column.
// The damaged copies in damaged.tsv are edits of these two files, so they
// are written on one thread, byte for byte the same each time.
const one = await (await DuckDBInstance.create(':memory:', { threads: '1' })).connect();
await one.run(`SET preserve_insertion_order = true`);
for (const [name, codec, nested] of [['events.parquet', 'zstd', false], ['events-nested.parquet', 'snappy', true]]) {
  const n = 3000, K = Math.round(n * 0.96);
  const key = `(hash(i, 'key') % ${K})`;
  await one.run(`COPY (SELECT
    (1000000 + ${key} // 8)::BIGINT AS user_id,
    ${nested ? `CASE WHEN hash(i, 'null') % 50 = 0 THEN NULL ELSE` : ''}
      'dv-' || lpad(to_hex((hash(${key}, 'dev') % 1099511627776)::BIGINT), 13, '0')
    ${nested ? 'END' : ''} AS device_id,
    make_timestamp_ms((1767225600000 + ${key} * 37 + ${key} % 8)::BIGINT)::TIMESTAMP_MS AS ts,
    ((hash(i, 'amt') % 100000000)::BIGINT::DECIMAL(18,2) / 100)::DECIMAL(18,2) AS amount,
    ${nested ? `CASE WHEN i % 7 = 3 THEN NULL ELSE {'src': 'app-' || (i % 13)::VARCHAR,
      'ver': (i % 5)::INTEGER, 'geo': {'lat': (i % 1800) / 10.0 - 90, 'lon': (i % 3600) / 10.0 - 180}} END AS meta,` : ''}
    substr(md5(i::VARCHAR) || '|' || 'evt=' || (hash(i, 'e') % 40)::VARCHAR || '|' || md5((i * 7)::VARCHAR), 1, 60) AS event
    FROM range(${n}) t(i) ORDER BY i) TO '${dir}/${name}' (FORMAT parquet, COMPRESSION ${codec},
    KV_METADATA {origin: 'fpdedup-proto', generator: 'gen.mjs v1'})`);
}
// Their keys as DuckDB reads them (user_id:device_id:ts, ts in the file's
// milliseconds), one row a line in file order, \N for a row with a NULL:
// the tests' oracle for every command that reads Parquet keys.
// With the row's other columns after a TAB (amount:event): what dedup
// must copy.
for (const name of ['events', 'events-nested']) {
  const keys = await one.runAndReadAll(`SELECT coalesce(user_id::VARCHAR || ':' || device_id || ':' || epoch_ms(ts)::VARCHAR, '\\N')
      || chr(9) || amount::VARCHAR || ':' || event
    FROM read_parquet('${dir}/${name}.parquet', file_row_number = true) ORDER BY file_row_number`);
  const text = keys.getRows().map((r) => r[0]).join('\n') + '\n';
  fs.writeFileSync(`${dir}/${name}.keys.txt.gz`, (await import('node:zlib')).gzipSync(text, { level: 9 }));
}
// A UINTEGER in v2 pages: DuckDB delta-encodes it from its unsigned value,
// which the Parquet library refuses for an INT32 column (ErrParquetUnreadable).
await one.run(`COPY (SELECT i AS id, (4000000000 + i)::UINTEGER AS u32 FROM range(100) t(i))
  TO '${dir}/uint32-v2.parquet' (FORMAT parquet, PARQUET_VERSION V2, COMPRESSION zstd)`);
console.log(`${dir}/types.parquet, ${dir}/types-brotli.parquet, ${dir}/events.parquet, ${dir}/events-nested.parquet: 3000 rows each, and their keys (*.keys.txt.gz); ${dir}/uint32-v2.parquet`);

#!/usr/bin/env node
// duckdb-oracle.mjs FPDEDUP DIR -- fpdedup's Parquet commands checked live
// against DuckDB, the writer and reader users have (scripts/duckdb-oracle.sh
// runs it; the Go tests check against goldens DuckDB wrote once, this
// checks against DuckDB itself, on files it writes now and on what
// fpdedup writes).
//
// DuckDB writes one table of events (~50% of rows repeat an earlier key
// user_id, device_id, ts; every other column a type of its own: DECIMAL,
// a nullable string, BOOLEAN, DOUBLE, a struct, a list, BLOB) as Parquet
// in each codec, in small row groups and in DuckDB's default ones, with v1
// and v2 data pages. For each file:
//   - dedup -o OUT.parquet: DuckDB reads OUT back, and its rows, in order,
//     are exactly each key's first row as DuckDB's row_number() over the
//     input picks it; same columns and types, same codec;
//   - dedup --keep last: each key's last row, in input order;
//   - count --tsv: each key once, its count, in first-occurrence order, as
//     DuckDB's GROUP BY counts and CASTs the key to text;
//   - build from the Parquet file and from DuckDB's CSV of the same keys
//     (ts as its stored integer): the same fingerprints (dump);
// and on one file, each integer, boolean, string and DECIMAL column's key
// text against DuckDB's CAST(col AS VARCHAR) (count --tsv --key COL), a
// struct member's by its dotted path (st.a), dedup from standard input
// (byte for byte the file's output) and --output-format csv read back by
// DuckDB.
// Any difference is printed with the file and check, and exits 1.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, lit } from '../bench/duckdb-peer.mjs';

const [fpdedup, dir] = process.argv.slice(2);
if (!fpdedup || !dir) {
  process.stderr.write('usage: node scripts/duckdb-oracle.mjs FPDEDUP DIR\n');
  process.exit(2);
}
const con = await connect('duckdb-oracle', 2);
await con.run('SET preserve_insertion_order = true');

const rows = 50000;
await con.run(`CREATE TABLE ev AS SELECT
    (1000 + k // 4)::BIGINT AS user_id,
    'dv-' || (k % 97)::VARCHAR AS device_id,
    make_timestamp_ms((1767225600000 + k * 37)::BIGINT)::TIMESTAMP_MS AS ts,
    (((i * 7919) % 1000000 - 500000) / 100)::DECIMAL(18,2) AS amount,
    CASE WHEN i % 11 = 0 THEN NULL ELSE md5(i::VARCHAR) END AS note,
    (i % 3 = 0) AS flag,
    (i / 3.0)::DOUBLE AS ratio,
    {'a': i % 5, 'b': 'x' || i} AS st,
    [i, i + 1] AS l,
    ('\\x00' || i::VARCHAR)::BLOB AS raw,
    (i % 200 - 100)::TINYINT AS i8,
    (i * 2654435761 % 4294967296)::UINTEGER AS u32,
    (18446744073709551615 - i * 12345)::UBIGINT AS u64
  FROM (SELECT i, hash(i, 'k') % 30000 AS k FROM range(${rows}) t(i)) ORDER BY i`);

const key = 'user_id, device_id, ts';
const fpKey = 'user_id,device_id,ts';
let failures = 0;
const fail = (file, check, msg) => {
  failures++;
  process.stdout.write(`FAIL ${file}: ${check}: ${msg}\n`);
};
const one = async (sql) => (await con.runAndReadAll(sql)).getRows()[0][0];
// lines is a one-column query's values, a line each, as fpdedup prints them.
const lines = async (sql) => (await con.runAndReadAll(sql)).getRows().map((r) => r[0] + '\n').join('');
const fp = (...args) => execFileSync(fpdedup, ['-q', ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });

// sameRows: OUT's rows, in file order, are exactly want's (a query with
// an ordinal o and want's columns).
async function sameRows(name, check, out, want) {
  await con.run(`CREATE OR REPLACE TEMP TABLE got AS
    SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS o FROM read_parquet(${lit(out)}, file_row_number = true)`);
  await con.run(`CREATE OR REPLACE TEMP TABLE want AS ${want}`);
  const n = await one('SELECT count(*) FROM got');
  const m = await one('SELECT count(*) FROM want');
  const diff = await one(`SELECT count(*) FROM (
    (SELECT * FROM got EXCEPT ALL SELECT * FROM want) UNION ALL (SELECT * FROM want EXCEPT ALL SELECT * FROM got))`);
  if (n !== m || diff !== 0n) {
    fail(name, check, `${n} rows, want ${m}; ${diff} rows differ (as DuckDB reads ${out})`);
  }
  return m;
}

// sameShape: OUT has IN's columns, types and codec.
async function sameShape(name, check, input, out) {
  const shape = async (f) => JSON.stringify((await con.runAndReadAll(
    `SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(${lit(f)}))`)).getRows());
  if (await shape(input) !== await shape(out)) {
    fail(name, check, `columns ${await shape(out)}, want ${await shape(input)}`);
  }
  const codecs = async (f) => JSON.stringify((await con.runAndReadAll(
    `SELECT DISTINCT compression FROM parquet_metadata(${lit(f)}) ORDER BY 1`)).getRows());
  if (await codecs(input) !== await codecs(out)) {
    fail(name, check, `codecs ${await codecs(out)}, want ${await codecs(input)}`);
  }
}

const files = [];
for (const codec of ['zstd', 'snappy', 'gzip', 'brotli', 'uncompressed']) {
  for (const [rg, version] of [[4096, 'V1'], [null, 'V1'], [4096, 'V2']]) {
    if (version === 'V2' && codec !== 'zstd' && codec !== 'snappy' && codec !== 'brotli') continue;
    const name = `ev-${codec}-${rg ?? 'default'}-${version}.parquet`;
    const opts = [`FORMAT parquet`, `COMPRESSION ${codec}`, `PARQUET_VERSION ${version}`];
    if (rg) opts.push(`ROW_GROUP_SIZE ${rg}`);
    // Not u32 in v2 pages: DuckDB delta-encodes a UINTEGER from its
    // unsigned value, which the Parquet library cannot decode as INT32;
    // fpdedup refuses such a column (ingest's TestParquetDeltaUint32).
    const cols = version === 'V2' ? '* EXCLUDE (u32)' : '*';
    await con.run(`COPY (SELECT ${cols} FROM ev) TO ${lit(`${dir}/${name}`)} (${opts.join(', ')})`);
    files.push(name);
  }
}

for (const name of files) {
  const f = `${dir}/${name}`;
  const input = `read_parquet(${lit(f)}, file_row_number = true)`;

  const first = `${dir}/first-${name}`;
  fp('dedup', '--key', fpKey, '-o', first, f);
  const kept = await sameRows(name, 'dedup', first, `SELECT * EXCLUDE (rn, file_row_number), row_number() OVER (ORDER BY file_row_number) AS o
    FROM (SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY file_row_number) AS rn FROM ${input}) WHERE rn = 1`);
  await sameShape(name, 'dedup', f, first);

  const last = `${dir}/last-${name}`;
  fp('dedup', '--keep', 'last', '--key', fpKey, '-o', last, f);
  await sameRows(name, 'dedup --keep last', last, `SELECT * EXCLUDE (rn, file_row_number), row_number() OVER (ORDER BY file_row_number) AS o
    FROM (SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY file_row_number DESC) AS rn FROM ${input}) WHERE rn = 1`);
  await sameShape(name, 'dedup --keep last', f, last);

  const counted = fp('count', '--tsv', '--key', fpKey, f);
  const want = await lines(`SELECT count(*)::VARCHAR || chr(9) || user_id::VARCHAR || ':' || device_id || ':' || epoch_ms(ts)::VARCHAR
    FROM ${input} GROUP BY ${key} ORDER BY min(file_row_number)`);
  if (counted !== want) {
    fail(name, 'count --tsv', `${counted.split('\n').length - 1} lines, want ${want.split('\n').length - 1}; first difference near line ${firstDiff(counted, want)}`);
  }
  if (BigInt(want.split('\n').length - 1) !== kept) {
    fail(name, 'count', `${want.split('\n').length - 1} keys, dedup kept ${kept} rows`);
  }

  const csv = `${dir}/${name}.csv`;
  await con.run(`COPY (SELECT user_id, device_id, epoch_ms(ts) AS ts FROM read_parquet(${lit(f)})) TO ${lit(csv)} (HEADER)`);
  fp('build', '--key', fpKey, '-o', `${dir}/p.fpx`, f);
  fp('build', '--format', 'csv', '--header', '--key', fpKey, '-o', `${dir}/c.fpx`, csv);
  if (fp('dump', `${dir}/p.fpx`) !== fp('dump', `${dir}/c.fpx`)) {
    fail(name, 'build', 'the fingerprints built from Parquet are not those built from its CSV');
  }
}

// Key text: the columns whose text DESIGN and DuckDB's CAST agree on,
// and a struct member's, by its dotted path.
const f = `${dir}/${files[0]}`;
{
  const got = fp('count', '--tsv', '--key', 'st.a,device_id', f);
  const want = await lines(`SELECT count(*)::VARCHAR || chr(9) || st.a::VARCHAR || ':' || device_id
    FROM read_parquet(${lit(f)}, file_row_number = true) GROUP BY st.a, device_id ORDER BY min(file_row_number)`);
  if (got !== want) {
    fail(files[0], 'count --key st.a,device_id', `first difference near line ${firstDiff(got, want)}`);
  }
}
for (const col of ['user_id', 'device_id', 'amount', 'flag', 'i8', 'u32', 'u64']) {
  const got = fp('count', '--tsv', '--key', col, f);
  const want = await lines(`SELECT count(*)::VARCHAR || chr(9) || ${col}::VARCHAR
    FROM read_parquet(${lit(f)}, file_row_number = true) GROUP BY ${col} ORDER BY min(file_row_number)`);
  if (got !== want) {
    fail(files[0], `key text of ${col}`, `first difference near line ${firstDiff(got, want)}`);
  }
}

// Standard input (--format parquet: spooled, then read from its footer):
// the same output, byte for byte.
{
  const fromFile = `${dir}/first-${files[0]}`;
  const fromStdin = `${dir}/stdin-${files[0]}`;
  execFileSync(fpdedup, ['-q', 'dedup', '--format', 'parquet', '--key', fpKey, '-o', fromStdin, '-'], { input: readFileSync(f), maxBuffer: 1 << 28 });
  if (Buffer.compare(readFileSync(fromFile), readFileSync(fromStdin)) !== 0) {
    fail(files[0], 'dedup from standard input', `${fromStdin} differs from ${fromFile}`);
  }
}

// --output-format csv (a file without the LIST column, which text
// refuses): DuckDB reads the text back; each column is DuckDB's CAST of
// the first rows' values (ts the stored integer; a NULL an empty field).
// Not ratio (floats: Go's shortest text, not DuckDB's) nor raw (bytes).
{
  const flat = `${dir}/flat.parquet`;
  await con.run(`COPY (SELECT * EXCLUDE (l) FROM ev) TO ${lit(flat)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 4096)`);
  const out = `${dir}/first.csv`;
  fp('dedup', '--key', fpKey, '--output-format', 'csv', '-o', out, flat);
  const cols = 'user_id, device_id, ts, amount, note, flag, "st.a", "st.b", i8, u32, u64';
  await con.run(`CREATE OR REPLACE TEMP TABLE got AS SELECT ${cols} FROM read_csv(${lit(out)}, header = true, all_varchar = true)`);
  await con.run(`CREATE OR REPLACE TEMP TABLE want AS SELECT user_id::VARCHAR, device_id, epoch_ms(ts)::VARCHAR, amount::VARCHAR, note,
      flag::VARCHAR, st.a::VARCHAR, st.b, i8::VARCHAR, u32::VARCHAR, u64::VARCHAR
    FROM (SELECT *, row_number() OVER (PARTITION BY ${key} ORDER BY file_row_number) AS rn FROM read_parquet(${lit(flat)}, file_row_number = true))
    WHERE rn = 1 ORDER BY file_row_number`);
  // The order too: each row with its place.
  const diff = await one(`SELECT count(*) FROM (
    (SELECT row_number() OVER (), * FROM got EXCEPT ALL SELECT row_number() OVER (), * FROM want) UNION ALL
    (SELECT row_number() OVER (), * FROM want EXCEPT ALL SELECT row_number() OVER (), * FROM got))`);
  const n = await one('SELECT count(*) FROM got');
  if (diff !== 0n || n === 0n) {
    fail('flat.parquet', '--output-format csv', `${n} rows; ${diff} differ from DuckDB's CASTs`);
  }
}

function firstDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] !== y[i]) return `${i + 1}: ${JSON.stringify(x[i])} vs DuckDB's ${JSON.stringify(y[i])}`;
  }
  return 'none';
}

process.stdout.write(`duckdb-oracle: ${files.length} files of ${rows} rows written by DuckDB; dedup, --keep last, count, build, key text, stdin and csv output checked: ${failures === 0 ? 'all agree' : `${failures} failures`}\n`);
process.exit(failures === 0 ? 0 : 1);

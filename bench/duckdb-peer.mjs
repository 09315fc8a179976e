// duckdb-peer.mjs: what the DuckDB peer scripts (duckdb-distinct.mjs,
// duckdb-dedup.mjs) share: loading @duckdb/node-api and opening an
// in-memory connection, and quoting SQL string literals.

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// The package lives in bench/.peers (kept out of the repository), not in a
// node_modules on the import path, so resolve it from there first.
async function loadDuckDB(name) {
  const fromPeers = createRequire(new URL('./.peers/package.json', import.meta.url));
  let path;
  try {
    path = fromPeers.resolve('@duckdb/node-api');
  } catch {
    try {
      return await import('@duckdb/node-api');
    } catch {
      process.stderr.write(`${name}: @duckdb/node-api is not installed; run bench/peers.sh\n`);
      process.exit(2);
    }
  }
  return import(pathToFileURL(path).href);
}

// The open instances: a connection does not keep its instance alive, and
// an instance collected as garbage ends the process's queries silently
// (node then exits 0 with nothing printed).
const instances = [];

// connect opens an in-memory DuckDB with threads threads (null: its
// default); name prefixes the error when the package is missing.
export async function connect(name, threads) {
  const { DuckDBInstance } = await loadDuckDB(name);
  const opts = {};
  if (threads !== null) opts.threads = threads;
  const instance = await DuckDBInstance.create(':memory:', opts);
  instances.push(instance);
  return instance.connect();
}

// SQL string literal: the only escape is a doubled quote.
export const lit = (s) => `'${s.replaceAll("'", "''")}'`;

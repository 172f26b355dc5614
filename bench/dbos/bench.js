// bench.js — duro-bench's W1, W2 and W3 (bench/bench.c) run on DBOS
// Transact, so duro's PostgreSQL figures can stand beside DBOS's measured on
// the same machine against the same kind of throwaway cluster.
//
//   node bench.js --url URL --only W1|W2|W3 [--sleepers N] [--pool N] [--csv]
//
// URL is a postgresql:// URL of the cluster's database `duro`; each workload
// puts DBOS's system database in a new database of its own on that server
// (dbos_w1, dbos_w2, dbos_w3, dropped first if there), as duro-bench does.
// One workload per process (run.sh runs three), so that W3's RSS is that of
// its sleepers alone.
//
//   W1 throughput   1000 workflows x 10 trivial steps (DBOS.runStep), started
//                   with DBOS.startWorkflow 100 at a time (duro-bench creates
//                   them in batches of 100), all handles awaited: steps/s
//   W2 latency      one workflow of 100 sequential steps, median of 5 runs,
//                   ms/step; beside a bare one-row PostgreSQL commit
//                   (BEGIN; INSERT; COMMIT, median of 200 after 50) as
//                   bench/pg_bare.c times it
//   W3 sleepers     N workflows (default 10,000) each run one step then
//                   DBOS.sleep(1 hour), started 1000 at a time: creation
//                   rate, time until every one's durable sleep is recorded
//                   in the system database, RSS before/after, database size
'use strict';

const fs = require('fs');
const path = require('path');
const { Client } = require('pg');
const { DBOS } = require('@dbos-inc/dbos-sdk');

// The package exports no ./package.json: read the installed one.
const sdkVersion = JSON.parse(
  fs.readFileSync(path.join(__dirname, 'node_modules', '@dbos-inc', 'dbos-sdk', 'package.json'), 'utf8'),
).version;

function parseArgs(argv) {
  const o = { url: null, only: null, sleepers: 10000, pool: 10, csv: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--csv') o.csv = true;
    else if (a === '--url' && v) o.url = argv[++i];
    else if (a === '--only' && v) o.only = argv[++i];
    else if (a === '--sleepers' && v) o.sleepers = parseInt(argv[++i], 10);
    else if (a === '--pool' && v) o.pool = parseInt(argv[++i], 10);
    else usage();
  }
  if (!o.url || !['W1', 'W2', 'W3'].includes(o.only) || !(o.sleepers > 0) || !(o.pool > 0)) usage();
  return o;
}

function usage() {
  process.stderr.write('usage: node bench.js --url URL --only W1|W2|W3 [--sleepers N] [--pool N] [--csv]\n');
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const setting = `postgresql dbos-sdk ${sdkVersion} pool=${opts.pool}`;

// One line per figure in duro-bench's form.
function report(figure, value, unit) {
  const v = value.toFixed(3);
  if (opts.csv) process.stdout.write(`${figure},${v},${unit},"${setting}"\n`);
  else process.stdout.write(`${figure.padEnd(28)} ${v.padStart(12)} ${unit.padEnd(10)} [${setting}]\n`);
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// A line of /proc/self/status in KiB ("VmHWM": the peak RSS).
function statusKiB(field) {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) : -1;
}

// The same server's URL with another database.
function databaseUrl(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

// ---- workflows: trivial steps, as duro-bench's wf_steps and wf_sleeper

const trivial = async () => '1';

const steps = DBOS.registerWorkflow(
  async (n) => {
    for (let i = 0; i < n; i++) await DBOS.runStep(trivial, { name: `step${i}` });
    return n;
  },
  { name: 'steps' },
);

const sleeper = DBOS.registerWorkflow(
  async () => {
    await DBOS.runStep(trivial, { name: 'work' });
    await DBOS.sleep(3600 * 1000);
  },
  { name: 'sleeper' },
);

// Starts n workflows `batch` at a time (each batch's starts concurrent,
// awaited before the next) and returns their handles.
async function startMany(wf, args, n, batch) {
  const handles = [];
  for (let done = 0; done < n; done += batch) {
    const k = Math.min(batch, n - done);
    const starts = [];
    for (let i = 0; i < k; i++) starts.push(DBOS.startWorkflow(wf)(...args));
    handles.push(...(await Promise.all(starts)));
  }
  return handles;
}

// ---- W1

async function w1() {
  const n = 1000;
  const t0 = nowMs();
  const handles = await startMany(steps, [10], n, 100);
  await Promise.all(handles.map((h) => h.getResult()));
  const s = (nowMs() - t0) / 1000;
  report('W1 instances/s', n / s, 'inst/s');
  report('W1 durable steps/s', (n * 10) / s, 'steps/s');
}

// ---- W2

// The median of 200 bare one-row commits after 50 untimed, in ms.
async function bareCommitMs(url) {
  const c = new Client({ connectionString: url });
  await c.connect();
  await c.query('CREATE TABLE bench_commit (id bigint PRIMARY KEY, result text)');
  const insert = { name: 'insert', text: "INSERT INTO bench_commit VALUES ($1, 'step result')" };
  const v = [];
  for (let id = 1; id <= 250; id++) {
    const t = nowMs();
    await c.query('BEGIN');
    await c.query({ ...insert, values: [id] });
    await c.query('COMMIT');
    if (id > 50) v.push(nowMs() - t);
  }
  await c.end();
  return median(v);
}

async function w2(url) {
  const runs = [];
  for (let r = 0; r < 5; r++) {
    const t0 = nowMs();
    const h = await DBOS.startWorkflow(steps)(100);
    await h.getResult();
    runs.push((nowMs() - t0) / 100);
  }
  const stepMs = median(runs);
  report('W2 per-step latency', stepMs, 'ms/step');
  const bareMs = await bareCommitMs(url);
  report('W2 bare PostgreSQL commit', bareMs, 'ms');
  report('W2 step / bare commit', stepMs / bareMs, 'x');
}

// ---- W3

async function w3(url) {
  const n = opts.sleepers;
  const c = new Client({ connectionString: url });
  await c.connect();
  // A sleep is durable once DBOS has recorded its end time, just before its
  // timer starts: that row is what "asleep" means here.
  const asleep = async () =>
    Number(
      (await c.query("SELECT count(*) AS n FROM dbos.operation_outputs WHERE function_name = 'DBOS.sleep'")).rows[0].n,
    );
  const rss0 = process.memoryUsage().rss;
  const t0 = nowMs();
  await startMany(sleeper, [], n, 1000);
  const createS = (nowMs() - t0) / 1000;
  while ((await asleep()) < n) await new Promise((r) => setTimeout(r, 20));
  const allS = (nowMs() - t0) / 1000;
  const rss1 = process.memoryUsage().rss;
  report('W3 creations/s', n / createS, 'inst/s');
  report('W3 to all sleeping', allS, 's');
  report('W3 RSS before', rss0 / 1048576, 'MiB');
  report('W3 RSS after', rss1 / 1048576, 'MiB');
  report('W3 RSS peak (process)', statusKiB('VmHWM') / 1024, 'MiB');
  report('W3 RSS per sleeper', (rss1 - rss0) / n, 'bytes');
  const bytes = Number((await c.query('SELECT pg_database_size(current_database()) AS b')).rows[0].b);
  report('W3 database size', bytes / 1048576, 'MiB');
  report('W3 database per sleeper', bytes / n, 'bytes');
  await c.end();
}

// A new, empty database for the workload's system database: DBOS would
// otherwise recover the workflows a previous run left in it.
async function freshDatabase(name) {
  const c = new Client({ connectionString: opts.url });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name}`);
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  return databaseUrl(opts.url, name);
}

async function main() {
  const url = await freshDatabase(`dbos_${opts.only.toLowerCase()}`);
  DBOS.setConfig({ name: 'duro-bench', systemDatabaseUrl: url, systemDatabasePoolSize: opts.pool, logLevel: 'warn' });
  await DBOS.launch();
  if (opts.only === 'W1') await w1();
  else if (opts.only === 'W2') await w2(url);
  else await w3(url);
  // W3's sleepers stay pending for their hour: nothing more to wait for.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`bench.js: ${e.stack || e}\n`);
  process.exit(1);
});

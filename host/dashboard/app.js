/* duro's dashboard: a page of the host's own HTTP listener that reads and
 * acts only through the public JSON API (so anything shown here a script
 * can get too).  Views are picked by the URL's hash; the open view polls
 * the API every POLL_MS (an instance's page follows its event stream
 * instead) and updates its data in place (forms and focus are left
 * alone).  On a listener with a token the page asks for it once and
 * keeps it in sessionStorage: for this tab only, gone when it closes. */
'use strict';

const TOKEN_KEY = 'duro.token';
const POLL_MS = 2000;
const PAGE_SIZE = 20;
/* The wait_type of an instance whose build the crash-storm breaker holds. */
const HELD = 'build.crashing';
const STATUSES = ['queued', 'running', 'waiting', 'waitingForPause', 'paused',
                  'complete', 'errored', 'terminated'];
const ENDED = ['complete', 'errored', 'terminated'];

const app = {
  view: null,      /* {refresh(), stop?()} of the open view */
  gen: 0,          /* bumped on navigation: late answers are dropped */
  plugins: null,   /* the last GET /plugins */
  health: null,    /* the last GET /healthz body */
  key: null,       /* GET /key: what the token's key may do (null: anything) */
};

/* Whether the key may do what needs `scope` (admin is everything): a
 * control it may not use is not offered, rather than refused 403. */
function may(scope) {
  const k = app.key;
  return !k || k.scopes.includes('admin') || k.scopes.includes(scope);
}

/* A key limited to some workflows or queues: the host's metrics, which
 * count them all together, are not its to read. */
function limited() {
  const k = app.key;
  return !!(k && (k.workflows || k.queues));
}

/* Whether the key may read workflow wf: a page of another is not linked. */
function sees(wf) {
  const k = app.key;
  return !k || k.scopes.includes('admin') || !k.workflows || k.workflows.includes(wf);
}

/* ---- DOM ---------------------------------------------------------------- */

/* An element with attributes (on* are listeners) and children (strings
 * become text nodes: nothing from the API is parsed as HTML). */
function h(tag, attrs, ...kids) {
  return build(document.createElement(tag), attrs, kids);
}
function svg(tag, attrs, ...kids) {
  return build(document.createElementNS('http://www.w3.org/2000/svg', tag),
               attrs, kids);
}
function build(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    /* through the CSSOM: the page's policy refuses style attributes */
    else if (k === 'style') el.style.cssText = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
function fill(el, ...kids) {
  el.replaceChildren();
  return build(el, null, kids);
}
const $ = (sel) => document.querySelector(sel);

/* ---- formatting --------------------------------------------------------- */

function pad(n, w = 2) { return String(n).padStart(w, '0'); }
function fmtTime(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
function fmtClock(ms) {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
         `.${pad(d.getMilliseconds(), 3)}`;
}
function fmtDur(ms) {
  if (ms === null || ms === undefined || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor(s % 3600 / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor(s % 86400 / 3600)} h`;
}
function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return i ? `${n.toFixed(n < 10 ? 2 : 1)} ${units[i]}` : `${n} B`;
}
function fmtJSON(v) {
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}
function errText(e) {
  if (e === null || e === undefined) return '';
  if (typeof e === 'object' && (e.name || e.message))
    return [e.name, e.message].filter(Boolean).join(': ');
  return fmtJSON(e);
}
function badge(status) {
  return h('span', {class: `badge s-${status}`}, status);
}
const enc = encodeURIComponent;

/* ---- the API ------------------------------------------------------------ */

/* One request: {status, ok, json, text}; status 0 when no answer came.
 * A 401 asks for the token. */
async function api(method, path, body) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = {method, headers};
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    return {status: 0, ok: false, json: null, text: `no answer: ${e.message}`};
  }
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* an empty or text body */ }
  if (res.status === 401)
    askToken(token ? 'The host refused this token.' : '');
  return {status: res.status, ok: res.ok, json, text};
}

/* "HTTP 409 instance.ended: …" for an answer that is an error. */
function describeAnswer(r) {
  if (r.status === 0) return r.text;
  const e = r.json && r.json.error;
  return e ? `HTTP ${r.status} ${e.code}: ${e.message}`
           : `HTTP ${r.status}${r.text ? `: ${r.text}` : ''}`;
}

/* Loads `path` as JSON; an error answer becomes an exception whose message
 * describes it. */
async function load(path) {
  const r = await api('GET', path);
  if (!r.ok) throw new Error(describeAnswer(r));
  return r.json;
}

/* ---- the token ---------------------------------------------------------- */

function askToken(message) {
  const form = $('#token-form');
  if (!form.hidden && !message) return;
  stopView();
  $('#main').hidden = true;
  form.hidden = false;
  $('#token-error').textContent = message || '';
  $('#token-input').focus();
}

$('#token-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('#token-input').value);
  const r = await api('GET', '/healthz');
  if (r.status === 401) return; /* askToken said so */
  $('#token-form').hidden = true;
  $('#main').hidden = false;
  $('#token-input').value = '';
  boot();
});

/* ---- views and polling -------------------------------------------------- */

function stopView() {
  if (app.view && app.view.stop) app.view.stop();
  app.view = null;
  app.gen++;
}

/* Opens a view: `make(main, gen)` builds it and returns {refresh}; its
 * refresh runs now and every POLL_MS until another view opens.  A view
 * with `live` (the path of an event stream) is refreshed on each item of
 * that stream instead, and polled only while the stream is not open. */
function openView(make, title) {
  stopView();
  const gen = app.gen;
  const main = fill($('#main'));
  document.title = `${title} · duro`;
  const view = make(main, gen);
  app.view = view;
  let timer = null, soon = null;
  const run = async () => {
    try {
      await view.refresh();
    } catch (e) {
      if (app.gen === gen) view.error && view.error(e);
    }
  };
  const follow = view.live ? followStream(view.live, gen, () => {
    /* a burst of items (the history at first) is one refresh */
    if (!soon) soon = setTimeout(() => { soon = null; if (app.gen === gen) run(); }, 100);
  }) : null;
  const tick = async () => {
    if (app.gen !== gen) return;
    if (!follow || !follow.open()) await run();
    if (app.gen === gen) timer = setTimeout(tick, POLL_MS);
  };
  view.stop = () => { clearTimeout(timer); clearTimeout(soon); if (follow) follow.stop(); };
  tick();
}

/* Follows the event stream at `path` (server-sent events, read through
 * fetch so that the token goes in a header as on every request): onItem()
 * on each item; a stream that breaks is opened again after POLL_MS with
 * the last id it sent (Last-Event-ID), until the instance has ended or
 * the view closes.  open() says whether the stream is carrying the
 * changes now. */
function followStream(path, gen, onItem) {
  const abort = new AbortController();
  let open = false, lastId = null;
  (async () => {
    let ended = false;
    while (app.gen === gen && !ended) {
      try {
        const headers = {Accept: 'text/event-stream'};
        const token = sessionStorage.getItem(TOKEN_KEY);
        if (token) headers.Authorization = `Bearer ${token}`;
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await fetch(path, {headers, signal: abort.signal});
        if (!res.ok || !res.body) break; /* 404, 401: polling says why */
        open = true;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '', item = {};
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).replace(/\r$/, '');
            buf = buf.slice(nl + 1);
            if (line === '') {
              if (item.id) lastId = item.id;
              if (item.event === 'status' && ENDED.includes(JSON.parse(item.data || '{}').status)) ended = true;
              if (item.data !== undefined) onItem();
              item = {};
              continue;
            }
            const colon = line.indexOf(':');
            if (colon === 0) continue; /* a comment */
            const key = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (key === 'data') item.data = item.data === undefined ? val : `${item.data}\n${val}`;
            else item[key] = val;
          }
        }
      } catch (e) {
        if (abort.signal.aborted) break;
      }
      open = false;
      if (!ended && app.gen === gen) await new Promise((r) => setTimeout(r, POLL_MS));
    }
    open = false;
  })();
  return {open: () => open, stop: () => abort.abort()};
}

/* A paragraph that shows a load failure (role=alert), emptied on success. */
function errorLine() {
  const p = h('p', {class: 'error', role: 'alert'});
  return {
    el: p,
    show(e) { p.textContent = e ? String(e.message || e) : ''; },
  };
}

function route() {
  /* #/wf/NAME?status=…: a view's path, then its filters */
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').map(decodeURIComponent);
  const filters = new URLSearchParams(query || '');
  let nav = 'instances';
  if (parts[0] === 'wf' && parts[1] && parts[2] === 'i' && parts[3])
    openView((m, g) => instanceView(m, g, parts[1], parts[3]), parts[3]);
  else if (parts[0] === 'wf' && parts[1])
    openView((m, g) => listView(m, g, parts[1], filters), parts[1]);
  else if (parts[0] === 'queues') { nav = 'queues'; openView(queuesView, 'Queues'); }
  else if (parts[0] === 'crons') { nav = 'crons'; openView(cronsView, 'Crons'); }
  else if (parts[0] === 'pipelines') { nav = 'pipelines'; openView(pipelinesView, 'Pipelines'); }
  else if (parts[0] === 'plugins') { nav = 'plugins'; openView(pluginsView, 'Plugins'); }
  else if (parts[0] === 'health') { nav = 'health'; openView(healthView, 'Health'); }
  else openView(homeView, 'Workflows');
  for (const a of document.querySelectorAll('[data-nav]'))
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  $('#main').focus({preventScroll: true});
}

/* ---- workflows: the home page ------------------------------------------- */

function workflowNames() {
  const names = [];
  for (const p of (app.plugins && app.plugins.plugins) || [])
    for (const w of (p.serves && p.serves.workflows) || []) names.push(w);
  return names;
}

function countsLine(instances) {
  const parts = STATUSES.filter((s) => instances[s])
                        .map((s) => h('span', null, badge(s), ' ', instances[s]));
  return parts.length ? parts : [h('span', {class: 'muted'}, 'no instances')];
}

/* A workflow's last hour on this host (GET /workflows/{wf}'s last_hour)
 * and its backlog, as figures: what ended and how, run times. */
function hourFigures(s) {
  const lh = s.last_hour, ended = lh.completed + lh.errored + lh.terminated;
  const rt = lh.run_time || {};
  const fig = (name, value, title) => h('div', {class: 'figure', 'data-figure': name, title},
    h('div', {class: 'figure-value'}, value), h('div', {class: 'figure-name'}, name));
  const ms = (v) => v === null || v === undefined ? '—' : fmtDur(v);
  return h('div', {class: 'figures'},
    fig('completed', String(lh.completed), 'instances that completed in the last hour'),
    fig('errored', ended ? `${lh.errored} (${(100 * lh.errored / ended).toFixed(1)} %)` : '0',
        'instances that ended errored in the last hour, and their share of those that ended'),
    fig('terminated', String(lh.terminated), 'instances terminated in the last hour'),
    fig('backlog', String(s.backlog), s.backlog ? `queued; the oldest waited ${fmtDur(s.oldest_queued_age_ms)}`
                                                : 'none queued'),
    fig('p50 run time', ms(rt.p50_ms), 'half of those that ended in the last hour ran no longer (start to end)'),
    fig('p99 run time', ms(rt.p99_ms), `99 % ran no longer; the longest ${ms(rt.max_ms)}`));
}

/* The last hour a minute a bar: completed (green) under errored and
 * terminated (red, grey); each bar's counts on hover. */
function hourChart(name, lh) {
  const W = 340, H = 90, L = 30, B = 16, T = 6;
  const per = lh.per_minute, n = per.completed.length;
  const tot = per.completed.map((c, i) => c + per.errored[i] + per.terminated[i]);
  const max = Math.max(1, ...tot);
  const bw = (W - L - 4) / n;
  const y = (v) => H - B - (H - B - T) * v / max;
  const g = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart hour',
                        'aria-label': `${name}: instances ended a minute over the last hour, at most ${max}`},
    svg('line', {x1: L, y1: H - B, x2: W - 4, y2: H - B, stroke: '#99a'}),
    svg('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#99a'}),
    svg('text', {x: L - 4, y: T + 8, 'text-anchor': 'end'}, String(max)),
    svg('text', {x: L - 4, y: H - B, 'text-anchor': 'end'}, '0'),
    svg('text', {x: L, y: H - 3}, '60 min ago'),
    svg('text', {x: W - 4, y: H - 3, 'text-anchor': 'end'}, 'now'));
  for (let i = 0; i < n; i++) {
    if (!tot[i]) continue;
    const from = lh.start_ms + i * lh.minute_ms;
    const title = `${fmtClock(from).slice(0, 5)}: ${per.completed[i]} completed, ${per.errored[i]} errored, ` +
                  `${per.terminated[i]} terminated, ${per.created[i]} created`;
    let base = 0;
    for (const [k, color] of [['completed', '#2e9e57'], ['errored', '#d2433a'], ['terminated', '#8a8fa3']]) {
      const v = per[k][i];
      if (!v) continue;
      g.append(svg('rect', {x: L + i * bw, y: y(base + v), width: Math.max(bw - 1, 1),
                            height: y(base) - y(base + v), fill: color, 'data-kind': k},
                   svg('title', null, title)));
      base += v;
    }
  }
  return g;
}

function homeView(main, gen) {
  const err = errorLine();
  const list = h('div', {class: 'grid'});
  main.append(h('h1', null, 'Workflows'), err.el, list);
  return {
    error: err.show,
    async refresh() {
      app.plugins = await load('/plugins');
      const names = workflowNames();
      const stats = await Promise.all(names.map((n) =>
          load(`/workflows/${enc(n)}`).catch((e) => ({name: n, failed: e}))));
      if (app.gen !== gen) return;
      err.show(null);
      fill(list, stats.map((s) => h('section', {class: 'card', 'data-workflow': s.name},
        h('h2', null, h('a', {href: `#/wf/${enc(s.name)}`}, s.name)),
        s.failed ? h('p', {class: 'error'}, s.failed.message)
                 : h('div', {class: 'counts'}, countsLine(s.instances)),
        s.failed || !s.last_hour ? null : hourFigures(s),
        s.failed || !s.last_hour ? null : hourChart(s.name, s.last_hour))));
      if (!names.length) list.append(h('p', {class: 'muted'}, 'No workflows are configured.'));
    },
  };
}

/* ---- one workflow's instances ------------------------------------------- */

/* Starts an instance of wf: params as JSON (empty: none), an id or one
 * the host makes; once created, its page opens. */
function startForm(wf) {
  const id = h('input', {id: 'start-id', autocomplete: 'off', placeholder: 'optional: the host makes one'});
  const params = h('textarea', {id: 'start-params', spellcheck: 'false',
    placeholder: 'JSON, e.g. {"orderId": "42"}; empty: none'});
  const bad = h('p', {class: 'error', id: 'start-error', role: 'alert'});
  const conf = confirmer((r) => {
    if (r.ok && r.json && r.json.id) location.hash = `#/wf/${enc(wf)}/i/${enc(r.json.id)}`;
  });
  const start = () => {
    const body = {};
    const text = params.value.trim();
    if (text) {
      try { body.params = JSON.parse(text); } catch (e) {
        bad.textContent = `The params are not JSON: ${e.message}`;
        params.focus();
        return;
      }
    }
    bad.textContent = '';
    if (id.value.trim()) body.id = id.value.trim();
    conf.ask(`Start an instance of ${wf}${body.id ? ` named ${body.id}` : ''}.`, 'POST',
             `/workflows/${enc(wf)}/instances`, body, (r) => `created ${r.json ? r.json.id : ''}`);
  };
  return h('details', {class: 'card', id: 'start'}, h('summary', null, 'Start an instance'),
    h('div', {class: 'row'}, h('div', null, h('label', {for: 'start-id'}, 'Instance id'), id)),
    h('div', null, h('label', {for: 'start-params'}, 'Params (JSON)'), params), bad,
    h('div', {class: 'row'}, h('button', {type: 'button', id: 'act-start', class: 'primary', onclick: start}, 'Start')),
    conf.box, conf.answer);
}

/* A workflow's flow control as GET /workflows/{wf} has it: each rule
 * (`flow`) with its limit, its keys counted now, how many run and wait,
 * and its busiest keys; its singleton (`singleton`: keys with a live
 * instance, those live, starts waiting) and its debounce (`debounce`:
 * instances waiting for a quiet spell, creates merged into them).
 * Hidden for a workflow with none of them. */
function flowPanel() {
  const el = h('section', {class: 'card', id: 'flow', hidden: true});
  function show(stats) {
    const rules = [...(stats.flow || [])];
    const s = stats.singleton, d = stats.debounce;
    if (s) rules.push({rule: 'singleton', key: s.key, text: `one live (${s.mode})`,
                       keys: s.keys, running: s.live, waiting: s.waiting, note: '—'});
    if (d) rules.push({rule: 'debounce', key: d.key,
                       text: `${d.period_ms} ms quiet${d.max_wait_ms ? `, at most ${d.max_wait_ms} ms` : ''}`,
                       keys: '—', running: '—', waiting: d.pending,
                       note: `${d.merged} create${d.merged === 1 ? '' : 's'} merged`});
    el.hidden = !rules.length;
    if (el.hidden) return;
    const limit = (r) => r.text || (r.rule === 'rate'
      ? `${r.limit} a ${r.period_ms} ms${r.burst > 1 ? `, ${r.burst} at once` : ''}`
      : `${r.limit} at once`);
    const busiest = (r) => r.note || (r.busiest || []).map((k) =>
      `${typeof k.value === 'string' ? k.value : JSON.stringify(k.value)}: ` +
      `${r.rule === 'rate' ? '' : `${k.running} running, `}${k.waiting} waiting`).join('; ') || '—';
    fill(el, h('h2', null, 'Flow control'),
      h('div', {class: 'table-wrap'}, h('table', {id: 'flow-rules'},
        h('thead', null, h('tr', null, ['Rule', 'Key', 'Limit', 'Keys', 'Running', 'Waiting', 'Busiest keys']
          .map((t) => h('th', null, t)))),
        h('tbody', null, rules.map((r) => h('tr', {'data-rule': r.rule},
          h('td', null, r.rule), h('td', null, r.key || '(the workflow)'), h('td', null, limit(r)),
          h('td', null, String(r.keys)),
          h('td', null, r.rule === 'rate' ? '—' : String(r.running)),
          h('td', null, String(r.waiting)), h('td', null, busiest(r))))))));
  }
  return {el, show};
}

/* A datetime-local input's value (local time) as ISO 8601 in UTC, '' for
 * none; and back. */
function isoOf(local) { return local ? new Date(local).toISOString() : ''; }
function localOf(iso) {
  const t = iso ? new Date(iso) : null;
  if (!t || isNaN(t)) return '';
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}T${pad(t.getHours())}:${pad(t.getMinutes())}`;
}

/* How long an instance ran (or has run so far): '' before it started. */
/* What a listed instance waits for: the event types (or a hold), else its
 * step's time (a sleep's end, a retry's); '' for none. */
function waitsFor(i) {
  if (ENDED.includes(i.status)) return '';
  if (i.wait_type) return i.wait_type;
  const s = i.step;
  if (s && s.status === 'waiting' && s.wake_ms != null) {
    return `${s.type === 'sleep' ? 'until' : 'retry at'} ${fmtTime(s.wake_ms)}`;
  }
  return '';
}

function ranFor(i) {
  if (i.started_ms == null) return '';
  const end = i.ended_ms != null ? i.ended_ms : Date.now();
  return fmtDur(Math.max(0, end - i.started_ms));
}

/* The bulk actions (POST /workflows/{wf}/bulk): each with what it does
 * to an instance and the statuses it applies to (the job skips the
 * others, as a single request would refuse them). */
const BULK_ACTIONS = [
  {action: 'pause', label: 'Pause', cls: null, what: 'each stops before its next step',
   applies: (s) => ['queued', 'running', 'waiting'].includes(s)},
  {action: 'resume', label: 'Resume', cls: null, what: 'each continues where it paused',
   applies: (s) => s === 'paused' || s === 'waitingForPause'},
  {action: 'terminate', label: 'Terminate', cls: 'danger',
   what: 'each ends now, without its rollbacks, and can only be restarted', applies: (s) => !ENDED.includes(s)},
  {action: 'restart', label: 'Restart', cls: null, what: 'each runs again from its beginning with the same params',
   applies: (s) => ENDED.includes(s)},
  {action: 'delete', label: 'Delete', cls: 'danger',
   what: 'their rows are gone for good (steps, events, logs); those not ended are skipped',
   applies: (s) => ENDED.includes(s)},
];
/* Chosen ids a job takes at most (the API's filter.ids). */
const BULK_IDS = 1000;
const BULK_POLL_MS = 500;

function plural(n, one, many) { return `${n} ${n === 1 ? one : many || `${one}s`}`; }

/* A bulk job's progress as GET /bulk/{id} tells it. */
function bulkProgress(job) {
  const seen = job.done + job.failed + job.skipped;
  return [
    h('p', null, h('strong', null, `Bulk job ${job.id}: ${job.action}`), ' ', badge(job.state === 'done' ? 'complete'
      : job.state === 'cancelled' ? 'terminated' : 'running'), ' ',
      h('span', {'data-field': 'counts'}, `${seen} of ${job.matched} · ${job.done} done, ${job.skipped} skipped, ` +
        `${job.failed} failed`), job.state === 'running' ? '' : ` · ${job.state}`),
    h('progress', {max: Math.max(job.matched, 1), value: job.matched ? seen : 1,
                   'aria-label': `bulk job ${job.id}: ${seen} of ${job.matched}`}),
    (job.errors || []).length ? h('ul', {class: 'error'}, job.errors.map((e) => h('li', null, `${e.instance}: ${e.error}`)))
                              : ''];
}

/* The list's bulk actions: on the rows selected (their ids, filter.ids)
 * or on every instance the list's filter passes (a dry run counts them
 * first); each confirmed, then its job followed (GET /bulk/{id}) until
 * it ends, when the list is read again.  filter() gives the list's
 * filter as the API's body takes it; refresh() reads the list again. */
function bulkPanel(wf, gen, filter, refresh) {
  const url = `/workflows/${enc(wf)}/bulk`;
  const selected = new Map(); /* id -> its status as last listed */
  const conf = confirmer(follow, 'bulk-');
  const count = h('strong', {id: 'bulk-count'});
  const buttons = BULK_ACTIONS.map((a) => h('button', {type: 'button', id: `bulk-${a.action}`, class: a.cls,
    onclick: () => askSelected(a)}, a.label));
  const clear = h('button', {type: 'button', id: 'bulk-clear', onclick: () => { selected.clear(); changed(); }},
                  'Clear selection');
  const bar = h('div', {class: 'actions bulk-bar', id: 'bulk-selected', role: 'group',
                        'aria-label': 'Act on the selected instances', hidden: true}, count, buttons, clear);
  const allAction = h('select', {id: 'bulk-all-action'}, BULK_ACTIONS.map((a) => h('option', {value: a.action}, a.label)));
  const all = h('details', {id: 'bulk-all'}, h('summary', null, 'Act on every instance the filter passes'),
    h('div', {class: 'row'},
      h('div', null, h('label', {for: 'bulk-all-action'}, 'Action'), allAction),
      h('button', {type: 'button', id: 'bulk-all-count', onclick: askAll}, 'Count, then confirm')));
  const progress = h('div', {id: 'bulk-progress', role: 'status', 'aria-live': 'polite', tabindex: -1});
  /* a key without operate is offered no bulk action (nor rows to pick) */
  const el = h('section', {class: 'card', id: 'bulk', hidden: !may('operate')}, bar, all, conf.box, conf.answer,
               progress);
  let onChange = () => {};

  function changed() {
    const n = selected.size;
    bar.hidden = !n;
    count.textContent = `${n} selected`;
    const statuses = [...selected.values()];
    BULK_ACTIONS.forEach((a, i) => { buttons[i].hidden = !statuses.some(a.applies); });
    onChange();
  }

  function askSelected(a) {
    const ids = [...selected.keys()];
    if (ids.length > BULK_IDS) {
      fill(conf.answer, h('strong', null, 'Refused: '), `at most ${BULK_IDS} selected instances at once`);
      conf.answer.className = 'answer bad';
      return;
    }
    const skipped = [...selected.values()].filter((s) => !a.applies(s));
    const why = [...new Set(skipped)].join(', ');
    conf.ask(`${a.label} ${plural(ids.length, 'selected instance')} of ${wf}: ${a.what}.` +
             (skipped.length ? ` ${skipped.length} of them ${skipped.length === 1 ? 'is' : 'are'} skipped ` +
                               `(${a.action} does not apply to ${why}).` : ''),
             'POST', url, {action: a.action, filter: {ids}},
             (r) => `job ${r.json.id} made, ${plural(r.json.matched, 'instance')} matched.`);
  }

  /* Every instance the filter passes: the dry run's count, then the job. */
  async function askAll() {
    const a = BULK_ACTIONS.find((x) => x.action === allAction.value);
    const body = {action: a.action, filter: filter()};
    const r = await api('POST', url, {...body, dry_run: true});
    if (app.gen !== gen) return;
    if (!r.ok) {
      conf.answer.className = 'answer bad';
      fill(conf.answer, h('strong', null, 'Refused: '), describeAnswer(r));
      return;
    }
    const terms = Object.entries(body.filter).map(([k, v]) => `${k.replace('_', ' ')} ${[].concat(v).join(' ')}`);
    conf.ask(`${a.label} every instance of ${wf}${terms.length ? ` with ${terms.join(', ')}` : ''}: ` +
             `${plural(r.json.matched, 'instance matches', 'instances match')} now (those created later are not ` +
             `touched); ${a.what}.`, 'POST', url, body,
             (r2) => `job ${r2.json.id} made, ${plural(r2.json.matched, 'instance')} matched.`);
  }

  /* A job made: its progress until it ends, then the list again. */
  async function follow(r) {
    if (!r.ok || !r.json || !r.json.id) return;
    const path = `/bulk/${enc(r.json.id)}`;
    for (;;) {
      const j = await api('GET', path);
      if (app.gen !== gen) return;
      if (!j.ok) { fill(progress, h('p', {class: 'error'}, describeAnswer(j))); return; }
      fill(progress, bulkProgress(j.json));
      if (j.json.state !== 'running') break;
      await new Promise((res) => setTimeout(res, BULK_POLL_MS));
    }
    /* the bar goes with the selection: the focus it held moves to the
     * progress, not back to the top of the page */
    const held = bar.contains(document.activeElement);
    selected.clear();
    changed();
    if (held) progress.focus();
    refresh();
  }

  return {
    el,
    has: (id) => selected.has(id),
    /* the rows of the page: their statuses kept for those selected */
    seen(instances) {
      for (const i of instances) if (selected.has(i.id)) selected.set(i.id, i.status);
      changed();
    },
    /* instances picked (yes) or let go of */
    pick(instances, yes) {
      for (const i of instances) if (yes) selected.set(i.id, i.status); else selected.delete(i.id);
      changed();
    },
    clear() { selected.clear(); changed(); },
    set onChange(fn) { onChange = fn; },
  };
}

/* A workflow's instances: filters by status, id prefix, creation time and
 * search attributes (terms such as customer:c42 amount>100, each a
 * `where` of the API), answered by the API and kept in the URL
 * (#/wf/NAME?status=…&prefix=…&where=…), so a filtered list can be
 * bookmarked and shared. */
function listView(main, gen, wf, filters) {
  const st = {status: filters.get('status') || '', prefix: filters.get('prefix') || '',
              after: filters.get('created_after') || '', before: filters.get('created_before') || '',
              where: filters.getAll('where'), cursors: [''], page: 0};
  const err = errorLine();
  const counts = h('div', {class: 'counts', role: 'group', 'aria-label': 'Counts by status'});
  const select = h('select', {id: 'status-filter', onchange: () => { st.status = select.value; restart(); }},
    h('option', {value: ''}, 'any status'),
    STATUSES.map((s) => h('option', {value: s}, s)));
  select.value = st.status;
  const prefix = h('input', {id: 'id-prefix', type: 'search', placeholder: 'id prefix', autocomplete: 'off'});
  prefix.value = st.prefix;
  const after = h('input', {id: 'created-after', type: 'datetime-local'});
  const before = h('input', {id: 'created-before', type: 'datetime-local'});
  after.value = localOf(st.after);
  before.value = localOf(st.before);
  const where = h('input', {id: 'where-filter', type: 'search', placeholder: 'customer:c42 amount>100',
    autocomplete: 'off'});
  where.value = st.where.join(' ');
  const searchForm = h('form', {class: 'row', role: 'search', onsubmit: (ev) => {
      ev.preventDefault();
      st.prefix = prefix.value.trim();
      st.after = isoOf(after.value);
      st.before = isoOf(before.value);
      st.where = where.value.split(/\s+/).filter((t) => t);
      restart(); }},
    h('div', null, h('label', {for: 'status-filter'}, 'Status'), select),
    h('div', null, h('label', {for: 'id-prefix'}, 'Id starts with'), prefix),
    h('div', null, h('label', {for: 'created-after'}, 'Created from'), after),
    h('div', null, h('label', {for: 'created-before'}, 'Created before'), before),
    h('div', null, h('label', {for: 'where-filter'}, 'Attributes'), where),
    h('button', {type: 'submit', id: 'find'}, 'Find'));
  const tbody = h('tbody', {id: 'instance-rows'});
  const note = h('p', {class: 'muted', id: 'list-note', 'aria-live': 'polite'});
  const newer = h('button', {type: 'button', id: 'page-newer', onclick: () => { st.page--; view.refresh(); }}, '← Newer');
  const older = h('button', {type: 'button', id: 'page-older', onclick: () => { st.page++; view.refresh(); }}, 'Older →');
  const pageNo = h('span', {class: 'muted'});
  const flow = flowPanel();
  const COLUMNS = ['', 'Instance', 'Status', 'Created', 'Started', 'Ran for', 'Step', 'Attempts',
    'Waiting for'];
  const bulk = bulkPanel(wf, gen, filterBody, () => view.refresh().catch(err.show));
  let listed = []; /* the rows of the page shown */
  const pickPage = h('input', {type: 'checkbox', id: 'select-page', 'aria-label': 'Select every instance on this page',
    onchange: () => bulk.pick(listed, pickPage.checked)});
  bulk.onChange = () => {
    for (const box of tbody.querySelectorAll('input.pick')) box.checked = bulk.has(box.dataset.id);
    const n = listed.filter((i) => bulk.has(i.id)).length;
    pickPage.checked = n > 0 && n === listed.length;
    pickPage.disabled = !listed.length;
    pickPage.indeterminate = n > 0 && n < listed.length;
  };
  main.append(
    h('p', null, h('a', {href: '#/'}, '← Workflows')),
    h('h1', null, wf), err.el, counts, flow.el, may('operate') ? startForm(wf) : '', searchForm, bulk.el,
    h('div', {class: 'table-wrap'}, h('table', {id: 'instances'},
      h('thead', null, h('tr', null, h('th', {class: 'pick', hidden: !may('operate')}, pickPage),
                                     COLUMNS.slice(1).map((c) => h('th', null, c)))),
      tbody)),
    h('div', {class: 'pager'}, newer, older, pageNo), note);

  /* The filters as a bulk action's body takes them. */
  function filterBody() {
    const f = {};
    if (st.status) f.status = st.status;
    if (st.prefix) f.prefix = st.prefix;
    if (st.after) f.created_after = st.after;
    if (st.before) f.created_before = st.before;
    if (st.where.length) f.where = st.where;
    return f;
  }

  /* The filters as the API's query (and the URL's). */
  function query() {
    const q = new URLSearchParams();
    if (st.status) q.set('status', st.status);
    if (st.prefix) q.set('prefix', st.prefix);
    if (st.after) q.set('created_after', st.after);
    if (st.before) q.set('created_before', st.before);
    for (const t of st.where) q.append('where', t);
    return q;
  }

  function restart() {
    st.cursors = ['']; st.page = 0;
    bulk.clear(); /* the selection was of the rows another filter showed */
    const q = query().toString();
    history.replaceState(null, '', `#/wf/${enc(wf)}${q ? `?${q}` : ''}`);
    view.refresh();
  }

  function pressCount(s) { st.status = s; select.value = s; restart(); }

  const view = {
    error: err.show,
    async refresh() {
      const q = query();
      q.set('limit', String(PAGE_SIZE));
      if (st.cursors[st.page]) q.set('cursor', st.cursors[st.page]);
      const [stats, page] = await Promise.all([load(`/workflows/${enc(wf)}`),
        load(`/workflows/${enc(wf)}/instances?${q}`)]);
      if (app.gen !== gen) return;
      st.cursors[st.page + 1] = page.cursor || null;
      err.show(null);
      flow.show(stats);
      const total = Object.values(stats.instances).reduce((a, b) => a + b, 0);
      fill(counts, [['', 'all', total], ...STATUSES.map((s) => [s, s, stats.instances[s] || 0])]
        .filter(([s, , n]) => !s || n || s === st.status)
        .map(([s, label, n]) => h('button', {type: 'button', 'aria-pressed': String(st.status === s),
          'data-status': s || 'all', onclick: () => pressCount(s)}, `${label} ${n}`)));
      /* drawn anew each poll: the focus stays on its row's control */
      const focused = tbody.contains(document.activeElement) ? document.activeElement.dataset.focus : null;
      listed = page.instances;
      fill(tbody, page.instances.map((i) => h('tr', {'data-id': i.id},
        h('td', {class: 'pick', hidden: !may('operate')}, h('input', {type: 'checkbox', class: 'pick', 'data-id': i.id, 'data-focus': `pick:${i.id}`,
          'aria-label': `Select ${i.id}`, checked: bulk.has(i.id),
          onchange: (ev) => bulk.pick([i], ev.target.checked)})),
        h('td', null, h('a', {href: `#/wf/${enc(wf)}/i/${enc(i.id)}`, 'data-focus': `link:${i.id}`}, i.id)),
        h('td', null, badge(i.status)),
        h('td', null, fmtTime(i.created_ms)),
        h('td', null, i.started_ms != null ? fmtTime(i.started_ms) : ''),
        h('td', {class: 'num'}, ranFor(i)),
        h('td', null, i.step ? i.step.key : ''),
        h('td', {class: 'num'}, i.step ? String(i.step.attempts) : ''),
        h('td', null, waitsFor(i)))));
      if (!page.instances.length)
        tbody.append(h('tr', null, h('td', {colspan: COLUMNS.length, class: 'muted'}, 'No instances match.')));
      bulk.seen(page.instances);
      if (focused) {
        const again = tbody.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
        if (again) again.focus();
      }
      newer.disabled = st.page === 0;
      older.disabled = !page.cursor;
      pageNo.textContent = `page ${st.page + 1} · updated ${fmtClock(Date.now()).slice(0, 8)}`;
      const q2 = query();
      note.textContent = [...q2.keys()].length
        ? `Filtered by ${[...q2.entries()].map(([k, v]) => `${k.replace('_', ' ')} ${v}`).join(', ')}.` : '';
    },
  };
  return view;
}

/* ---- confirming an action ---------------------------------------------- */

/* A confirmation panel and the answer line under it: ask(what, method,
 * url, body) shows what the request will do and the request itself, sends
 * it on Confirm and shows the API's answer, errors included; done(r) runs
 * after.  Its elements' ids start with `name` ('' for the page's one;
 * the list's bulk actions have one of their own beside the start form's). */
function confirmer(done, name = '') {
  const box = h('div', {class: 'panel confirm', id: `${name}confirm`, hidden: true});
  const answer = h('div', {id: `${name}answer`, class: 'answer', role: 'status', 'aria-live': 'polite'});
  function ask(what, method, url, body, describe) {
    const yes = h('button', {type: 'button', id: `${name}confirm-yes`, class: 'primary'}, 'Confirm');
    const no = h('button', {type: 'button', id: `${name}confirm-no`}, 'Cancel');
    const shown = body === undefined ? '' : `\n${typeof body === 'string' ? body : JSON.stringify(body)}`;
    fill(box, h('p', {id: `${name}confirm-text`}, what), h('pre', null, `${method} ${url}${shown}`),
      h('div', {class: 'actions'}, yes, no));
    box.hidden = false;
    const opener = document.activeElement;
    yes.focus();
    no.onclick = () => { box.hidden = true; if (opener) opener.focus(); };
    yes.onclick = async () => {
      yes.disabled = no.disabled = true;
      const r = await api(method, url, body);
      box.hidden = true;
      answer.className = `answer ${r.ok ? 'good' : 'bad'}`;
      answer.setAttribute('role', r.ok ? 'status' : 'alert');
      fill(answer, h('strong', null, r.ok ? 'Done: ' : 'Refused: '),
        r.ok ? (describe ? describe(r) : `HTTP ${r.status} ${r.text}`) : describeAnswer(r));
      if (opener) opener.focus();
      if (done) done(r);
    };
  }
  return {box, answer, ask};
}

/* ---- one instance ------------------------------------------------------- */


/* The actions the engine takes for an instance of this status (the rest
 * it refuses, 409): pause what runs or waits (waitingForPause is asked
 * already); resume a paused one, or withdraw a pause not yet taken
 * (waitingForPause); terminate (with its rollbacks or not) and send
 * events to any that has not ended;
 * restart only an ended one, from a step when it has steps. */
function allowedActions(inst) {
  const s = inst.status, ended = ENDED.includes(s);
  return {
    pause: ['queued', 'running', 'waiting'].includes(s),
    resume: s === 'paused' || s === 'waitingForPause',
    terminate: !ended,
    'terminate-rollback': !ended,
    restart: ended,
    'restart-from': ended && inst.steps.length > 0,
    event: !ended,
  };
}

function instanceView(main, gen, wf, id) {
  const path = `/workflows/${enc(wf)}/instances/${enc(id)}`;
  const err = errorLine();
  const head = h('div');
  const facts = h('dl', {class: 'kv'});
  const data = h('div');
  const timeline = h('div', {id: 'timeline'});
  const steps = h('div', {id: 'steps'});
  const events = h('div', {id: 'events'});
  /* once it is deleted, its page has nothing to show: back to the list */
  let deleting = false;
  const conf = confirmer((r) => {
    if (deleting && r.ok) location.hash = `#/wf/${enc(wf)}`;
    else view.refresh().catch(err.show);
    deleting = false;
  });
  const confirmThen = conf.ask;
  const deleteButton = h('button', {type: 'button', id: 'act-delete', class: 'danger', onclick: () => {
    const live = !ENDED.includes(deleteButton.dataset.status);
    deleting = true;
    confirmThen(live ? `Delete ${id}: it has not ended, so it is terminated first (no rollbacks), then its ` +
                       'rows are gone for good: steps, events, logs.'
                     : `Delete ${id}: its rows are gone for good: steps, events, logs.`,
                'DELETE', live ? `${path}?terminate=true` : path, undefined, () => `deleted ${id}`);
  }}, 'Delete');

  const statusUrl = `${path}/status`;
  const action = (label, status, what, cls) => h('button', {type: 'button', id: `act-${status}`, class: cls,
    onclick: () => confirmThen(what, 'PATCH', statusUrl, {status})}, label);
  const fromStep = h('select', {id: 'restart-from'});
  /* The type is the one the instance waits for (wait_type), until the
   * user types another. */
  const evType = h('input', {id: 'event-type', autocomplete: 'off', placeholder: 'event type',
    oninput: () => { evType.dataset.typed = 'yes'; }});
  const evHint = h('span', {id: 'event-hint', class: 'muted'});
  const evPayload = h('textarea', {id: 'event-payload', spellcheck: 'false',
    placeholder: 'JSON, e.g. {"approved": true}; empty sends null'});
  const restartRow = h('div', {class: 'row', id: 'restart-from-row'});
  const eventForm = h('div', {id: 'event-form'});
  const actions = h('section', {class: 'card', id: 'actions'},
    h('h2', null, 'Actions'),
    h('div', {class: 'actions'},
      action('Pause', 'pause', `Pause ${id}: it stops before its next step (a running attempt finishes).`),
      action('Resume', 'resume', `Resume ${id}: it continues where it paused.`),
      action('Terminate', 'terminate', `Terminate ${id}: it ends now and cannot be resumed (only restarted).`, 'danger'),
      h('button', {type: 'button', id: 'act-terminate-rollback', class: 'danger',
        onclick: () => confirmThen(`Terminate ${id} after its rollbacks: what its completed steps did is undone, newest first, then it ends.`,
                                   'PATCH', statusUrl, {status: 'terminate', rollback: true})},
        'Terminate with rollback'),
      action('Restart', 'restart', `Restart ${id} from its beginning: every step runs again with the same params.`),
      deleteButton),
    build(restartRow, null, [
      h('div', null, h('label', {for: 'restart-from'}, 'Restart from step'), fromStep),
      h('button', {type: 'button', id: 'act-restart-from', onclick: () => {
        const [name, count] = JSON.parse(fromStep.value || '[null]');
        if (!name) return;
        confirmThen(`Restart ${id} from step “${name}” (#${count}): the steps before it keep their results, it and the ones after run again.`,
                    'PATCH', statusUrl, {status: 'restart', from: {name, count}});
      }}, 'Restart from step')]),
    build(eventForm, null, [
      h('div', {class: 'row'},
        h('div', null, h('label', {for: 'event-type'}, 'Event type'), evType), evHint),
      h('div', null, h('label', {for: 'event-payload'}, 'Payload (JSON)'), evPayload),
      h('div', {class: 'row'}, h('button', {type: 'button', id: 'act-event', onclick: () => {
        const type = evType.value.trim();
        if (!type) { evType.focus(); return; }
        confirmThen(`Send the event “${type}” to ${id} with this payload.`, 'POST',
                    `${path}/events/${enc(type)}`, evPayload.value.trim() || 'null');
      }}, 'Send event'))]),
    conf.box, conf.answer);
  actions.hidden = true; /* until the status is known */

  /* Shows the actions the status allows.  Focus on one that goes moves to
   * the first one left, so the keyboard does not fall back to the top. */
  function showActions(inst) {
    const allowed = allowedActions(inst);
    deleteButton.dataset.status = inst.status;
    deleteButton.hidden = !may('operate');
    const focused = document.activeElement;
    /* an event needs the key's events scope, every other action operate */
    const offered = (name) => allowed[name] && may(name === 'event' ? 'events' : 'operate');
    actions.hidden = !Object.keys(allowed).some(offered) && deleteButton.hidden;
    for (const name of Object.keys(allowed)) {
      const el = name === 'restart-from' ? restartRow : name === 'event' ? eventForm
                                                                   : actions.querySelector(`#act-${name}`);
      el.hidden = !offered(name);
    }
    if (focused && actions.contains(focused) && focused.closest('[hidden]')) {
      const first = [...actions.querySelectorAll('button')].find((b) => !b.closest('[hidden]'));
      if (first) first.focus();
    }
    /* A wait for any of several types has them joined with '|'. */
    const waits = inst.wait_type && inst.wait_type !== HELD ? inst.wait_type.split('|') : [];
    if (!evType.dataset.typed && focused !== evType) evType.value = waits[0] || '';
    evHint.textContent = waits.length ? `it waits for ${waits.map((t) => `“${t}”`).join(' or ')}`
                                      : 'it waits for no event now';
  }

  main.append(h('p', null, h('a', {href: `#/wf/${enc(wf)}`}, `← ${wf}`)), head, err.el,
    h('section', {class: 'card'}, facts, data), actions,
    h('section', {class: 'card'}, h('h2', null, 'Timeline'), timeline, steps),
    h('section', {class: 'card'}, h('h2', null, 'Events received'), events));

  let drawn = null; /* what the page shows, as JSON */
  const view = {
    error: err.show,
    live: `${path}/events/stream`, /* refreshed as it commits, not polled */
    async refresh() {
      /* its log lines (the newest 1000 it keeps at most, by default) */
      const [inst, logs] = await Promise.all([load(path), load(`${path}/logs?limit=1000`)]);
      if (app.gen !== gen) return;
      err.show(null);
      /* drawn again only when something changed: a link or a button under
       * the pointer is not replaced by its twin */
      const seen = JSON.stringify([inst, logs]);
      if (seen === drawn) return;
      drawn = seen;
      fill(head, h('h1', null, inst.id, ' ', h('span', {id: 'instance-status'}, badge(inst.status))));
      const attrs = Object.entries(inst.attributes || {});
      fill(facts,
        h('dt', null, 'Workflow'), h('dd', null, inst.workflow),
        /* its search attributes (the workflow's index:), name → value */
        attrs.length ? [h('dt', null, 'Attributes'), h('dd', {id: 'instance-attributes'},
          h('ul', {class: 'attrs'}, attrs.map(([k, v]) => h('li', {'data-attr': k},
            h('span', {class: 'muted'}, k), ' ', h('code', null, typeof v === 'string' ? v : JSON.stringify(v))))))]
                     : null,
        h('dt', null, 'Created'), h('dd', null, fmtTime(inst.created_ms)),
        h('dt', null, 'Started'), h('dd', null, fmtTime(inst.started_ms)),
        h('dt', null, 'Ended'), h('dd', null, fmtTime(inst.ended_ms)),
        inst.wake_ms ? [h('dt', null, 'Wakes'), h('dd', null, fmtTime(inst.wake_ms))] : null,
        /* The crash-storm breaker holds its build: say why and the way out. */
        inst.status === 'waiting' && inst.wait_type === HELD
          ? [h('dt', null, 'Held'),
             h('dd', {id: 'instance-held'}, `${HELD}: its build crashed too often; ` +
               'deploy a new build or run `duro plugins resume PLUGIN`')]
          : null,
        /* queued for a flow rule's turn: which rule and key hold it */
        inst.waiting_for ? [h('dt', null, 'Held by'),
          h('dd', {id: 'instance-waiting-for'}, inst.waiting_for)] : null,
        inst.deadline_ms ? [h('dt', null, 'Deadline'), h('dd', {id: 'instance-deadline'}, fmtTime(inst.deadline_ms))] : null,
        /* A child workflow's parent, a parent's children (the first 50). */
        inst.parent ? [h('dt', null, 'Parent'), h('dd', {id: 'instance-parent'},
          sees(inst.parent.workflow)
            ? h('a', {href: `#/wf/${enc(inst.parent.workflow)}/i/${enc(inst.parent.id)}`},
                `${inst.parent.workflow}/${inst.parent.id}`)
            : `${inst.parent.workflow}/${inst.parent.id}`)] : null,
        (inst.children || []).length
          ? [h('dt', null, 'Children'), h('dd', {id: 'instance-children'},
              inst.children.slice(0, 50).map((c, k) => [k ? ' ' : '',
                h('a', {class: 'child', href: `#/wf/${enc(c.workflow)}/i/${enc(c.id)}`}, c.id), ' ', badge(c.status)]),
              inst.children.length > 50 ? ` and ${inst.children.length - 50} more` : '')]
          : null,
        h('dt', null, 'Restarts'), h('dd', null, inst.restarts),
        h('dt', null, 'Builds'), h('dd', null, (inst.builds || []).join(', ') || inst.build || '—'));
      fill(data,
        h('h2', null, 'Params'), h('pre', {id: 'params'}, fmtJSON(inst.params)),
        inst.error !== null ? [h('h2', null, 'Error'), h('pre', {id: 'error', class: 'error'}, fmtJSON(inst.error))]
                            : [h('h2', null, 'Output'), h('pre', {id: 'output'}, inst.output === null ? '—' : fmtJSON(inst.output))]);
      /* rebuilt only when the steps changed: an open or chosen option stays */
      const choices = inst.steps.filter((s) => s.type !== 'rollback').map((s) => [s.name, s.count]);
      if (document.activeElement !== fromStep && fromStep.dataset.choices !== JSON.stringify(choices)) {
        const keep = fromStep.value;
        fill(fromStep, choices.map(([name, count]) => h('option', {value: JSON.stringify([name, count])},
          `${name}${count > 1 ? ` #${count}` : ''}`)));
        fromStep.dataset.choices = JSON.stringify(choices);
        if (keep) fromStep.value = keep;
      }
      showActions(inst);
      fill(timeline, drawTimeline(inst));
      fill(steps, stepList(inst, logsByAttempt(logs.logs)));
      fill(events, eventList(inst));
    },
  };
  return view;
}

/* The events the instance received, oldest first: type, when, payload,
 * and the step that consumed it (by its key) or "pending". */
function eventList(inst) {
  const evs = inst.events || [];
  if (!evs.length) return h('p', {class: 'muted'}, 'No events received.');
  const byKey = new Map(inst.steps.map((s) => [s.key, s]));
  return h('ol', {class: 'events'}, evs.map((ev) => {
    const step = ev.consumed_by && byKey.get(ev.consumed_by);
    return h('li', {class: 'event', 'data-type': ev.type, 'data-consumed': ev.consumed_by ? 'yes' : 'no'},
      h('strong', null, ev.type), ` · sent ${fmtTime(ev.sent_ms)} · `,
      ev.consumed_by === null ? badge('pending')
        : ['consumed by ', h('strong', null, step ? `${step.name}${step.count > 1 ? ` #${step.count}` : ''}` : ev.consumed_by)],
      h('pre', null, fmtJSON(ev.payload)));
  }));
}

/* The spans of an instance's timeline, per step: attempts, back-off waits,
 * sleeps and event waits, each {kind, from, to, label}. */
function spansOf(step, now) {
  const out = [];
  if (step.type === 'do') {
    const att = step.attempts || [];
    att.forEach((a, k) => {
      const end = a.ended_ms ?? now;
      const failed = a.error !== null && a.error !== undefined;
      out.push({kind: a.ended_ms === null ? 'running' : failed ? 'failed' : 'ok', from: a.started_ms, to: end,
                label: `attempt ${a.number}: ${fmtClock(a.started_ms)}, ${fmtDur(end - a.started_ms)}` +
                       (failed ? `, ${errText(a.error)}` : a.ended_ms === null ? ', running' : ', ok') +
                       (a.build ? `, build ${a.build}` : '')});
      const next = att[k + 1];
      const waitEnd = next ? next.started_ms : (failed && step.status !== 'errored' ? (step.wake_ms ?? now) : null);
      if (failed && a.ended_ms !== null && waitEnd !== null && waitEnd > a.ended_ms)
        out.push({kind: 'backoff', from: a.ended_ms, to: waitEnd,
                  label: `back-off ${fmtDur(waitEnd - a.ended_ms)}${next ? '' : ' (next attempt pending)'}`});
    });
  } else if (step.started_ms !== null) {
    const to = step.ended_ms ?? (step.type === 'sleep' ? (step.wake_ms ?? now) : now);
    out.push({kind: step.type === 'sleep' ? 'sleep' : 'event', from: step.started_ms, to,
              label: `${step.type === 'sleep' ? 'sleep' : 'waiting for an event'}: ${fmtDur(to - step.started_ms)}` +
                     (step.ended_ms === null ? ' so far' : '')});
  }
  return out;
}

const SPAN_COLORS = {ok: '#2e9e57', failed: '#d2433a', running: '#2456c7', backoff: '#e8c36a',
                     sleep: '#9c86cf', event: '#e48a2f'};

function drawTimeline(inst) {
  const now = Date.now();
  const rows = inst.steps.map((s) => ({step: s, spans: spansOf(s, now)}));
  const t0 = inst.created_ms;
  let t1 = inst.ended_ms ?? now;
  for (const r of rows) for (const sp of r.spans) t1 = Math.max(t1, sp.to);
  const W = 960, L = 180, R = 10, RH = 24, TOP = 22;
  const span = Math.max(t1 - t0, 1);
  const x = (t) => L + (W - L - R) * (t - t0) / span;
  const H = TOP + RH * Math.max(rows.length, 1) + 8;
  const g = svg('svg', {viewBox: `0 0 ${W} ${H}`, class: 'timeline', role: 'img',
                        'aria-label': `Timeline of ${inst.steps.length} steps over ${fmtDur(span)}`});
  g.append(svg('text', {x: L, y: 14}, fmtClock(t0)),
           svg('text', {x: W - R, y: 14, 'text-anchor': 'end'}, `+${fmtDur(span)}`),
           svg('line', {x1: L, y1: TOP - 4, x2: W - R, y2: TOP - 4, stroke: '#ccd'}));
  rows.forEach((r, i) => {
    const y = TOP + i * RH;
    const name = r.step.name.length > 24 ? `${r.step.name.slice(0, 23)}…` : r.step.name;
    g.append(svg('text', {x: 4, y: y + 15}, name + (r.step.count > 1 ? ` #${r.step.count}` : '')));
    for (const sp of r.spans) {
      const x1 = x(sp.from), w = Math.max(x(sp.to) - x1, 2);
      const half = sp.kind === 'backoff' || sp.kind === 'sleep' || sp.kind === 'event';
      g.append(svg('rect', {x: x1, y: y + (half ? 7 : 3), width: w, height: half ? 8 : 16, rx: 2,
                            fill: SPAN_COLORS[sp.kind], class: `span span-${sp.kind}`},
                   svg('title', null, `${r.step.name}: ${sp.label}`)));
    }
  });
  const legend = h('div', {class: 'legend'}, Object.entries({ok: 'attempt ok', failed: 'attempt failed',
    running: 'running', backoff: 'back-off', sleep: 'sleep', event: 'event wait'})
    .map(([k, v]) => h('span', null, h('i', {style: `background:${SPAN_COLORS[k]}`}), v)));
  return [h('div', {class: 'table-wrap'}, g), legend];
}

/* An event wait (waitForEvent, waitAny) whose timeout came: an outcome
 * the workflow may have handled (it took its timeout branch), not shown
 * as a failure. */
function waitTimedOut(s) {
  return (s.type === 'waitForEvent' || s.type === 'waitAny') && s.status === 'errored' && s.error &&
    s.error.name === 'TimeoutError';
}

/* The steps in call order, each rollback (a step of its own, keyed
 * "<its step's key>/rollback") right after the step it undoes rather than
 * where it ran (newest first, after them all); one whose step is not
 * listed stays where it ran. */
function nestRollbacks(steps) {
  const undo = new Map();
  for (const s of steps)
    if (s.type === 'rollback' && s.key.endsWith('/rollback')) undo.set(s.key.slice(0, -'/rollback'.length), s);
  const placed = new Set();
  const out = [];
  for (const s of steps) {
    if (s.type === 'rollback') continue;
    out.push(s);
    const u = undo.get(s.key);
    if (u) { out.push(u); placed.add(u); }
  }
  return out.concat(steps.filter((s) => s.type === 'rollback' && !placed.has(s)));
}

/* The log lines by the attempt that wrote them ("key#attempt"; run()'s
 * under "run"). */
function logsByAttempt(lines) {
  const by = new Map();
  for (const l of lines || []) {
    const k = l.step === null ? 'run' : `${l.step}#${l.attempt}`;
    if (!by.has(k)) by.set(k, []);
    by.get(k).push(l);
  }
  return by;
}

function logList(lines) {
  return lines && lines.length
    ? h('ol', {class: 'logs'}, lines.map((l) => h('li', {class: `log l-${l.level}`},
        `${fmtClock(l.time_ms)} ${l.level} `, h('span', {class: 'message'}, l.message))))
    : '';
}

/* Each step with its attempts in order, as text, and under each attempt
 * the lines it logged.  A rollback reads as what it undoes, indented
 * under that step. */
function stepList(inst, logs) {
  logs = logs || new Map();
  const ran = logs.has('run') ? h('div', {class: 'step', id: 'run-logs'},
    h('h3', null, 'run()', ' ', h('span', {class: 'muted'}, 'logged')), logList(logs.get('run'))) : '';
  if (!inst.steps.length) return [h('p', {class: 'muted'}, 'No steps yet.'), ran];
  const attempted = (s) => s.type === 'do' || s.type === 'rollback';
  return nestRollbacks(inst.steps).map((s) => h('div', {class: s.type === 'rollback' ? 'step undoes' : 'step', 'data-step': s.name},
    h('h3', null, s.type === 'rollback' ? `undoes ${s.name}` : s.name,
      s.count > 1 ? ` #${s.count}` : '', ' ',
      waitTimedOut(s) ? h('span', {class: 'badge s-timedout'}, 'timed out') : badge(s.status), ' ',
      h('span', {class: 'muted'}, s.type)),
    attempted(s) ? h('ol', {class: 'attempts'}, (s.attempts || []).map((a, k, all) => {
      const failed = a.error !== null && a.error !== undefined;
      const next = all[k + 1];
      return h('li', {class: 'attempt', 'data-number': a.number},
        `#${a.number} · started ${fmtClock(a.started_ms)} · `,
        a.ended_ms === null ? 'running' : fmtDur(a.ended_ms - a.started_ms), ' · ',
        failed ? h('span', {class: 'error'}, errText(a.error))
               : a.ended_ms === null ? '' : h('span', null, 'ok'),
        a.build ? h('span', {class: 'muted'}, ` · build ${a.build}`) : '',
        failed && next && a.ended_ms !== null ? h('div', {class: 'muted'}, `waited ${fmtDur(next.started_ms - a.ended_ms)} (back-off)`) : '',
        logList(logs.get(`${s.key}#${a.number}`)));
    })) : h('p', {class: 'muted'},
      s.type === 'sleep' ? `slept from ${fmtTime(s.started_ms)}, until ${fmtTime(s.wake_ms ?? s.ended_ms)}`
                         : `waited from ${fmtTime(s.started_ms)}${s.ended_ms ? ` to ${fmtTime(s.ended_ms)}` : ''}`),
    s.status === 'complete' && attempted(s) ? h('pre', {class: 'result'}, fmtJSON(s.result)) : '',
    s.error && !attempted(s) ? h('p', {class: waitTimedOut(s) ? 'muted' : 'error'},
                                   waitTimedOut(s) ? s.error.message : errText(s.error)) : '')).concat(ran);
}

/* ---- queues ------------------------------------------------------------- */

/* Queues no plugin consumes (dead-letter queues): the ones whose messages
 * the page lists and can send back. */
function consumedQueues() {
  const set = new Set();
  for (const p of (app.plugins && app.plugins.plugins) || [])
    for (const q of (p.serves && p.serves.queues) || []) set.add(q);
  return set;
}

const QUEUE_COLUMNS = ['Queue', 'Ready', 'Delayed', 'In flight', 'Dead-lettered', 'Dropped',
                       'Oldest', 'Lag', ''];

/* Cells labelled with their column, for the stacked rows of a narrow
 * screen (style.css: table.stack). */
function labelled(row, columns) {
  [...row.children].forEach((td, i) => { if (columns[i]) td.dataset.label = columns[i]; });
  return row;
}

function queuesView(main, gen) {
  const err = errorLine();
  const tbody = h('tbody', {id: 'queue-rows'});
  const detail = h('div', {id: 'queue-detail'});
  main.append(h('h1', null, 'Queues'), err.el,
    h('div', {class: 'table-wrap'}, h('table', {class: 'stack'}, h('thead', null, h('tr', null,
      QUEUE_COLUMNS.map((t, i) => h('th', {class: i && i < 8 ? 'num' : null}, t)))), tbody)),
    detail);

  async function browse(q) {
    /* A look, not a pull: no lease, so no attempts count changes. */
    const r = await api('GET', `/queues/${enc(q)}/messages?limit=20`);
    const conf = confirmer(() => view.refresh().catch(err.show));
    const count = h('input', {id: 'redrive-count', type: 'number', min: 1, max: 100, value: 10});
    fill(detail, h('section', {class: 'card'},
      h('h2', null, `Dead-letter queue ${q}`),
      h('p', {class: 'muted'}, 'The oldest 20 messages. Browsing leaves them as they are: nothing is pulled.'),
      r.ok ? (r.json.messages.length ? h('ol', {id: 'dlq-messages'}, r.json.messages.map((m) => h('li', null,
                `#${m.id} · sent ${fmtTime(m.sent_ms)} · attempts: ${m.attempts}`,
                m.leased ? ` · leased until ${fmtTime(m.visible_ms)}` : '',
                m.last_error ? h('div', {class: 'error'}, m.last_error) : '',
                h('pre', null, fmtJSON(m.body)))))
                                   : h('p', {class: 'muted'}, 'Empty.'))
           : h('p', {class: 'error', role: 'alert'}, describeAnswer(r)),
      h('div', {class: 'row', hidden: !may('operate')},
        h('div', null, h('label', {for: 'redrive-count'}, 'How many (oldest first)'), count),
        h('button', {type: 'button', id: 'redrive', onclick: () => {
          const n = Number(count.value);
          conf.ask(`Send the ${n} oldest messages of ${q} back to the queue that dead-lettered them, as new messages with no attempts.`,
                   'POST', `/queues/${enc(q)}/messages/redrive`, {batch_size: n},
                   (a) => `sent ${a.json.moved.length} back to ${a.json.to}.`);
        }}, 'Send back')), conf.box, conf.answer));
    detail.querySelector('h2').scrollIntoView({block: 'nearest'});
  }

  const view = {
    error: err.show,
    async refresh() {
      const [queues, plugins] = await Promise.all([load('/queues'), load('/plugins')]);
      if (app.gen !== gen) return;
      app.plugins = plugins;
      err.show(null);
      const consumed = consumedQueues();
      fill(tbody, queues.map((q) => labelled(h('tr', {'data-queue': q.name},
        h('td', null, q.name, consumed.has(q.name) ? '' : h('span', {class: 'muted'}, ' (not consumed)')),
        [q.ready, q.delayed, q.in_flight, q.dead_lettered, q.dropped].map((n) => h('td', {class: 'num'}, n)),
        h('td', {class: 'num'}, q.oldest_age_ms ? fmtDur(q.oldest_age_ms) : '—'),
        h('td', {class: 'num'}, q.lag_ms ? fmtDur(q.lag_ms) : '—'),
        h('td', null, consumed.has(q.name) ? ''
          : h('button', {type: 'button', 'data-browse': q.name, onclick: () => browse(q.name)}, 'Browse'))),
        QUEUE_COLUMNS)));
      if (!queues.length) tbody.append(h('tr', null, h('td', {colspan: 9, class: 'muted'}, 'No queues.')));
    },
  };
  return view;
}

/* ---- crons -------------------------------------------------------------- */

const CRON_COLUMNS = ['Trigger', 'Next fires', 'Last tick', 'Running', 'Complete', 'Failed',
                      'Missed', 'Skipped'];

function cronsView(main, gen) {
  const err = errorLine();
  const tbody = h('tbody', {id: 'cron-rows'});
  main.append(h('h1', null, 'Cron triggers'), err.el,
    h('div', {class: 'table-wrap'}, h('table', {class: 'stack'}, h('thead', null, h('tr', null,
      CRON_COLUMNS.map((t, i) => h('th', {class: i > 2 ? 'num' : null}, t)))), tbody)));
  return {
    error: err.show,
    async refresh() {
      const crons = await load('/crons');
      if (app.gen !== gen) return;
      err.show(null);
      fill(tbody, crons.map((c) => labelled(h('tr', null,
        h('td', null, h('code', null, c.schedule), ` ${c.timezone || 'UTC'}`, h('br'),
          h('span', {class: 'muted'}, `${c.plugin} → ${c.workflow ? `workflow ${c.workflow}` : 'handler'}`)),
        h('td', null, (c.next || []).slice(0, 3).map((t) => h('div', null, fmtTime(t)))),
        h('td', null, c.last ? [fmtTime(c.last.tick_ms), ' ', badge(c.last.state),
          c.last.instance && c.workflow ? [' ', h('a', {href: `#/wf/${enc(c.workflow)}/i/${enc(c.last.instance)}`}, c.last.instance)]
                                        : c.last.instance ? ` ${c.last.instance}` : '',
          c.last.error ? h('div', {class: 'error'}, errText(c.last.error)) : ''] : h('span', {class: 'muted'}, 'never')),
        [c.running, c.complete, c.failed, c.missed, c.skipped].map((n) => h('td', {class: 'num'}, n ?? 0))),
        CRON_COLUMNS)));
      if (!crons.length) tbody.append(h('tr', null, h('td', {colspan: 8, class: 'muted'}, 'No cron triggers.')));
    },
  };
}

/* ---- pipelines: a card each --------------------------------------------- */

/* One pipeline of GET /pipelines: its records and bytes so far, what
 * waits to be written, its files and its last write. */
function pipelineCard(p) {
  const kv = (k, v) => [h('dt', null, k), h('dd', {'data-field': k.toLowerCase()}, v)];
  return h('section', {class: 'card', 'data-pipeline': p.name},
    h('h2', null, p.name, ' ', p.last_error ? h('span', {class: 'badge s-errored'}, 'failing')
                                            : h('span', {class: 'badge s-complete'}, 'ok')),
    h('dl', {class: 'kv'},
      kv('Accepted', `${p.accepted} records, ${fmtBytes(p.accepted_bytes)}`),
      kv('Written', `${p.written} records, ${fmtBytes(p.written_bytes)}`),
      kv('Backlog', [`${p.backlog.records} records, ${fmtBytes(p.backlog.bytes)}`,
        p.oldest_ms !== null ? h('span', {class: 'muted'},
          ` (oldest sent ${fmtTime(p.oldest_ms)})`) : '']),
      kv('Files', p.files),
      kv('Last flush', p.last_flush_ms !== null ? fmtTime(p.last_flush_ms) : 'never'),
      kv('Last error', p.last_error ? h('span', {class: 'error'}, p.last_error) : '—')),
    h('p', {class: 'muted'}, h('code', null, p.sink.path), ` · ${p.sink.partition} · ${p.sink.format}`,
      p.sink.columns ? ` (${p.sink.columns.join(', ')})` : '', ` · ${p.sink.compression}`,
      p.writing ? ` · writing records ${p.writing.first}–${p.writing.last}` : ''));
}

function pipelinesView(main, gen) {
  const err = errorLine();
  const list = h('div', {class: 'grid', id: 'pipeline-list'});
  main.append(h('h1', null, 'Pipelines'), err.el, list);
  return {
    error: err.show,
    async refresh() {
      const pipelines = await load('/pipelines');
      if (app.gen !== gen) return;
      err.show(null);
      fill(list, pipelines.map(pipelineCard));
      if (!pipelines.length) list.append(h('p', {class: 'muted'}, 'No pipelines are configured.'));
    },
  };
}

/* ---- plugins ------------------------------------------------------------ */

function pluginsView(main, gen) {
  const err = errorLine();
  const list = h('div', {id: 'plugin-list'});
  main.append(h('h1', null, 'Plugins'), err.el, list);
  return {
    error: err.show,
    async refresh() {
      const r = await load('/plugins');
      if (app.gen !== gen) return;
      app.plugins = r;
      err.show(null);
      fill(list, r.plugins.map((p) => h('section', {class: 'card', 'data-plugin': p.name},
        h('h2', null, p.name), h('p', {class: 'muted'}, h('code', null, p.path)),
        h('div', {class: 'table-wrap'}, h('table', null,
          h('thead', null, h('tr', null, h('th', null, 'Build'), h('th', null, 'Loaded'),
            h('th', {class: 'num'}, 'Instances pinned'))),
          h('tbody', null, p.builds.map((b) => h('tr', null,
            h('td', null, h('code', null, b.build), b.newest ? ' (newest)' : ''),
            h('td', null, fmtTime(b.loaded_ms)), h('td', {class: 'num'}, b.instances)))))),
        h('dl', {class: 'kv'},
          h('dt', null, 'Workflows'), h('dd', null, p.serves.workflows.length
            ? p.serves.workflows.map((w, i) => [i ? ', ' : '', h('a', {href: `#/wf/${enc(w)}`}, w)]) : '—'),
          h('dt', null, 'Consumes'), h('dd', null, p.serves.queues.join(', ') || '—'),
          h('dt', null, 'Crons'), h('dd', null, p.serves.crons.join(', ') || '—')))));
    },
  };
}

/* ---- health: the engine's counters, drawn ------------------------------- */

const SERIES = [
  ['steps_completed', 'Steps completed /s'],
  ['attempts_failed', 'Failed attempts /s'],
  ['retries_scheduled', 'Retries /s'],
  ['instances_created', 'Instances created /s'],
  ['activations', 'Activations /s'],
  ['events_sent', 'Events sent /s'],
];

/* Reads /healthz every POLL_MS whatever view is open, for the header's
 * dot and the Health page. */
async function sample() {
  const hz = await api('GET', '/healthz');
  app.health = hz.json || (hz.status === 401 ? null : {status: 'down'});
  const dot = $('#health-dot');
  const status = app.health ? app.health.status : 'unknown';
  dot.className = `dot ${status}`;
  dot.setAttribute('aria-label', `health ${status}`);
  dot.title = `health: ${status}`;
}

/* One counter of GET /metrics/history as a bar chart: a bar per bucket,
 * its count per second (the newest bucket, still filling, over the time
 * it has had so far). */
function rateChart(hist, name, label) {
  const W = 340, H = 130, L = 30, B = 18, T = 8;
  const counts = hist.series[name] || [];
  const n = counts.length, bucket = hist.bucket_ms, span = n * bucket;
  const pts = counts.map((c, i) => {
    const from = hist.start_ms + i * bucket;
    const secs = Math.max(Math.min(hist.now_ms - from, bucket), 1000) / 1000;
    return {from, c, v: c / secs};
  });
  const max = Math.max(1, ...pts.map((p) => p.v));
  const x = (t) => L + (W - L - 4) * (t - hist.start_ms) / span;
  const y = (v) => H - B - (H - B - T) * v / max;
  const cur = pts.length ? pts[pts.length - 1].v : 0;
  const minutes = Math.round(span / 60000);
  const g = svg('svg', {viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart', 'data-series': name,
                        'aria-label': `${label}: ${cur.toFixed(2)} now, at most ${max.toFixed(2)} over ${minutes} minutes`},
    svg('line', {x1: L, y1: H - B, x2: W - 4, y2: H - B, stroke: '#99a'}),
    svg('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#99a'}),
    svg('text', {x: L - 4, y: T + 8, 'text-anchor': 'end'}, max >= 10 ? max.toFixed(0) : max.toFixed(1)),
    svg('text', {x: L - 4, y: H - B, 'text-anchor': 'end'}, '0'),
    svg('text', {x: L, y: H - 4}, `${minutes} min ago`),
    svg('text', {x: W - 4, y: H - 4, 'text-anchor': 'end'}, 'now'));
  const color = name.includes('fail') ? '#d2433a' : name.includes('retr') ? '#e8a33a' : '#2456c7';
  for (const p of pts) {
    if (!p.c) continue;
    g.append(svg('rect', {x: x(p.from), y: y(p.v), width: Math.max(x(p.from + bucket) - x(p.from) - 1, 1),
                          height: H - B - y(p.v), fill: color},
                 svg('title', null, `${fmtClock(p.from).slice(0, 8)}: ${p.c} (${p.v.toFixed(2)}/s)`)));
  }
  return h('section', {class: 'card'}, h('h2', null, label, ' ',
    h('span', {class: 'muted'}, `${cur.toFixed(2)} now`)), g);
}

/* GET /hosts: the hosts sharing the store, this one marked; on SQLite
 * this one alone. */
/* Each host with its counts as it last gave them (a host gives them with
 * each renewal of its lease), and on a shared database the totals. */
function hostsTable(hl) {
  const state = (x) => x.dead ? 'dead' : x.alive ? 'alive' : 'lease lapsed';
  const num = (v) => h('td', {class: 'num'}, v === undefined || v === null ? '–' : String(v));
  const counted = (c) => [num(c && c.backlog), num(c && c.in_flight), num(c && c.steps_completed),
                          num(c && c.attempts_failed)];
  const columns = ['Id', 'Machine', 'Pid', 'State', 'Instances', 'Backlog', 'In flight', 'Steps done',
                   'Failed attempts', 'Started', ...(hl.shared ? ['Heartbeat'] : [])];
  const t = hl.totals;
  const rows = hl.hosts.map((x) => h('tr', {'data-host': String(x.id), class: x.me ? 'me' : ''},
    h('td', null, String(x.id), x.me ? ' (this one)' : ''), h('td', null, x.name),
    num(x.pid),
    h('td', null, h('span', {class: `badge ${x.dead ? 's-errored' : x.alive ? 's-complete' : 's-waiting'}`},
                    state(x))),
    num(x.instances), ...counted(x.counts), h('td', null, fmtTime(x.started_ms)),
    hl.shared ? h('td', null, `${fmtDur(x.heartbeat_age_ms)} ago (lease ${fmtDur(x.lease_ms)})`) : null));
  rows.forEach((r) => labelled(r, columns));
  const total = hl.shared && t ? h('tfoot', null, labelled(h('tr', {id: 'host-totals'},
    h('th', {colspan: '4', scope: 'row'}, 'All hosts'), num(t.instances), ...counted(t),
    h('td', {colspan: '2', class: 'muted'}, 'counts of live hosts; steps and failures of all')),
    ['', 'Instances', 'Backlog', 'In flight', 'Steps done', 'Failed attempts'])) : null;
  return [h('h2', null, hl.shared ? 'Hosts of the database' : 'Host'),
    h('div', {class: 'table-wrap'}, h('table', {id: 'host-rows', class: 'stack'},
      h('thead', null, h('tr', null, columns.map((c) => h('th', null, c)))),
      h('tbody', null, rows), total))];
}

function healthView(main, gen) {
  const err = errorLine();
  const status = h('p', {id: 'health-status'});
  const charts = h('div', {class: 'grid', id: 'charts'});
  const hosts = h('section', {class: 'card', id: 'hosts'});
  /* the counters are of every workflow and queue: a limited key's
   * page has none (GET /metrics/history refuses it) */
  const counters = limited()
    ? h('p', {class: 'muted', id: 'charts-note'}, 'The engine\'s counters are of every workflow and queue: ' +
        'a key limited to some of them does not read them.')
    : h('p', {class: 'muted'}, 'The engine\'s own counters over the last 10 minutes, one bar per 10 s ' +
        '(GET /metrics/history); the host keeps them, so they are there as soon as the page opens.');
  main.append(h('h1', null, 'Health'), err.el, status, hosts, charts, counters);
  return {
    error: err.show,
    async refresh() {
      const [hist, hl] = await Promise.all([limited() ? null : load('/metrics/history'), load('/hosts')]);
      if (app.gen !== gen) return;
      fill(hosts, hostsTable(hl));
      err.show(null);
      const hz = app.health;
      fill(status, 'Host: ', hz ? h('span', {class: `badge ${hz.status === 'ok' ? 's-complete' : 's-errored'}`}, hz.status)
                                : h('span', {class: 'muted'}, 'unknown'),
        hz && hz.status !== 'ok' ? h('pre', {class: 'error'}, fmtJSON(hz)) : '');
      if (hist) fill(charts, SERIES.map(([n, l]) => rateChart(hist, n, l)));
    },
  };
}

/* ---- start -------------------------------------------------------------- */

let sampling = null;

async function boot() {
  const r = await api('GET', '/healthz');
  if (r.status === 401) return;
  const k = await api('GET', '/key');
  app.key = k.ok ? k.json : null;
  const [q, c, pl] = await Promise.all([api('GET', '/queues'), api('GET', '/crons'),
                                        api('GET', '/pipelines'),
                                        load('/plugins').then((p) => { app.plugins = p; }).catch(() => {})]);
  $('[data-nav="queues"]').hidden = !(q.ok && q.json.length);
  $('[data-nav="crons"]').hidden = !(c.ok && c.json.length);
  $('[data-nav="pipelines"]').hidden = !(pl.ok && pl.json.length);
  if (!sampling) {
    const loop = async () => { await sample(); sampling = setTimeout(loop, POLL_MS); };
    loop();
  }
  route();
}

window.addEventListener('hashchange', route);
boot();

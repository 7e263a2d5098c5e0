// The sluice dev page: renders the snapshots and log lines the server streams (server-sent events).
/* global dagre */
'use strict';

const $ = (sel) => document.querySelector(sel);
const esc = (v) => String(v).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const time = (ms) => (ms === null || ms === undefined ? '—' : ms >= 2 ** 51 ? 'end of input' : new Date(ms).toISOString().replace('T', ' ').replace('Z', ''));
const bytes = (n) => (n === undefined ? '' : n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`);
const row = (cells) => `<tr>${cells.join('')}</tr>`;
const td = (v, cls = '') => `<td class="${cls}">${v}</td>`;

let snapshot;
let graphKey = '';
let currentSink;
const logs = [];

function renderGraph(s) {
  const key = JSON.stringify([s.generation, s.stages.map((x) => [x.id, x.parallelism])]);
  if (key === graphKey) return updateGraphLabels(s);
  graphKey = key;
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 20, ranksep: 50, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  const box = (id, lines) => g.setNode(id, { lines, width: 12 + 7 * Math.max(...lines.map((l) => l.length)), height: 18 + 15 * lines.length });
  for (const src of s.sources) box(`src:${src.name}`, [`source ${src.name}`, `${src.shards} shards`]);
  for (const st of s.stages) {
    box(st.id, [`${st.id}: ${st.operators.map((o) => o.name).join(' → ')}`, `${st.parallelism} shards · ${st.rate.toFixed(1)} rec/s`]);
    if (st.input.length === 0) for (const src of s.sources.filter((x) => x.stream === st.stream)) g.setEdge(`src:${src.name}`, st.id);
    for (const from of st.input) g.setEdge(from, st.id);
  }
  for (const sink of s.sinks) {
    box(`sink:${sink.name}`, [`sink ${sink.name}`, sink.kind]);
    if (sink.stage) g.setEdge(sink.stage, `sink:${sink.name}`);
  }
  dagre.layout(g);
  const svg = $('#graph');
  const { width, height } = g.graph();
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.style.height = `${Math.max(120, height)}px`;
  let out = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#888"/></marker></defs>';
  for (const e of g.edges()) {
    const pts = g.edge(e).points;
    out += `<path class="edge" d="M${pts.map((p) => `${p.x},${p.y}`).join('L')}"/>`;
  }
  for (const id of g.nodes()) {
    const n = g.node(id);
    out += `<g class="node" data-id="${esc(id)}" transform="translate(${n.x - n.width / 2},${n.y - n.height / 2})"><rect width="${n.width}" height="${n.height}"/>`;
    n.lines.forEach((l, i) => (out += `<text x="6" y="${16 + 15 * i}" data-line="${i}">${esc(l)}</text>`));
    out += '</g>';
  }
  svg.innerHTML = out;
}

function updateGraphLabels(s) {
  for (const st of s.stages) {
    const t = document.querySelector(`#graph g[data-id="${st.id}"] text[data-line="1"]`);
    if (t) t.textContent = `${st.parallelism} shards · ${st.rate.toFixed(1)} rec/s`;
  }
}

function render(s) {
  snapshot = s;
  $('#job').textContent = s.job;
  $('#meta').textContent = `prefix ${s.prefix} · generation ${s.generation}`;
  $('#event-time').textContent = `event time: ${time(s.eventTime)}`;
  renderGraph(s);

  $('#stages tbody').innerHTML = s.stages
    .map((st) =>
      row([
        td(esc(st.id)),
        td(esc(st.operators.map((o) => o.name).join(' → '))),
        td(st.rate.toFixed(1), 'num rate'),
        td(st.records, 'num'),
        td(esc(time(st.watermark)), 'watermark'),
        td(st.shards.map((sh) => `<span class="shard">${esc(sh.id.replace('shardId-', ''))}: <b class="${sh.lag ? 'lag-n' : 'lag-0'}">${sh.lag}</b></span>`).join('')),
      ]).replace('<tr>', `<tr data-stage="${esc(st.id)}">`),
    )
    .join('');

  $('#watermarks tbody').innerHTML = s.stages
    .flatMap((st) => st.operators.map((o) => row([td(esc(st.id)), td(`${esc(o.name)} <small>${esc(o.id)}</small>`), td(esc(time(o.watermark)), 'watermark')])))
    .join('');

  const cps = s.checkpoints;
  const maxMs = Math.max(1, ...cps.map((c) => c.durationMs ?? 0));
  $('#timeline').innerHTML = cps
    .map((c) => `<div class="cp ${esc(c.status)}" style="height:${Math.max(5, (60 * (c.durationMs ?? 0)) / maxMs)}px" title="#${c.checkpointId} ${esc(c.status)} ${c.durationMs ?? ''} ms${c.reason ? ` — ${esc(c.reason)}` : ''}"></div>`)
    .join('');
  $('#checkpoints tbody').innerHTML = cps
    .slice()
    .reverse()
    .map((c) =>
      row([
        td(c.checkpointId, 'num'),
        td(esc(c.status + (c.savepointId ? ` (savepoint ${c.savepointId})` : '') + (c.restoredFrom ? ` (restored from ${c.restoredFrom})` : '')), `status-${c.status}`),
        td(esc(c.startedAt.slice(11, 23))),
        td(c.durationMs !== undefined ? `${c.durationMs} ms` : '', 'num'),
        td(bytes(c.bytes), 'num'),
        td(c.keys ?? '', 'num'),
        td(
          c.reason
            ? `<span class="reason">${esc(c.reason)}</span>`
            : Object.entries(c.instances ?? {})
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([id, i]) => `${esc(id)}: ${bytes(i.bytes ?? 0)}, ${i.keys ?? 0} keys`)
                .join('<br>'),
        ),
      ]),
    )
    .join('');

  $('#dead-letter-count').textContent = `(${s.deadLetters.length})`;
  $('#dead-letters tbody').innerHTML = s.deadLetters
    .slice(0, 200)
    .map((l) =>
      row([
        td(esc(l.file !== undefined ? `${l.file}:${l.line}` : `${l.source ? `source ${l.source}, ` : ''}stage ${l.stage} ${l.shardId} #${l.sequenceNumber}/${l.subSequence}`)),
        td(esc(l.reason)),
        td(`<code>${esc(l.data.slice(0, 120))}</code>`),
      ]),
    )
    .join('');

  const tabs = s.sinks.map((k) => `<button data-sink="${esc(k.name)}" class="${k.name === currentSink ? 'active' : ''}">${esc(k.name)} <small>(${esc(k.kind)})</small></button>`).join('');
  if ($('#sink-tabs').dataset.tabs !== tabs) {
    $('#sink-tabs').innerHTML = tabs;
    $('#sink-tabs').dataset.tabs = tabs;
  }
  if (currentSink === undefined && s.sinks.length) currentSink = s.sinks[0].name;
  if (currentSink !== undefined) void loadSink();

  const every = s.stateTableEvery;
  $('#state-as-of').textContent = every === 1 ? 'as of the last completed checkpoint (the state table is written at every checkpoint)' : `as of the last checkpoint that wrote the state table (every ${every} checkpoints: the job's checkpoint.materializeEvery)`;
  const ops = s.keyedOperators;
  const opSel = $('#state-operator');
  if (opSel.options.length !== ops.length) {
    opSel.innerHTML = ops.map((o) => `<option value="${esc(o.name)}">${esc(o.name)}</option>`).join('');
    fillStates();
  }
  const stageSel = $('#log-stage');
  if (stageSel.options.length !== s.stages.length + 1) {
    stageSel.innerHTML = `<option value="">all stages</option>${s.stages.map((st) => `<option value="${esc(st.id)}">${esc(st.id)}</option>`).join('')}`;
  }
}

function fillStates() {
  const op = snapshot?.keyedOperators.find((o) => o.name === $('#state-operator').value);
  $('#state-name').innerHTML = (op?.state ?? []).map((n) => `<option>${esc(n)}</option>`).join('');
}

let sinkLoading = false;
async function loadSink() {
  if (sinkLoading) return;
  sinkLoading = true;
  try {
    const r = await (await fetch(`/api/sinks/${encodeURIComponent(currentSink)}?limit=50`)).json();
    if (r.error) {
      $('#sink-rows').textContent = r.error;
      return;
    }
    const cols = [...new Set(r.rows.flatMap((x) => (x && typeof x === 'object' ? Object.keys(x) : ['value'])))];
    $('#sink-rows').innerHTML =
      `<p>${r.total} records; the latest ${r.rows.length}:</p><table><thead><tr>${cols.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody>` +
      r.rows.map((x) => row(cols.map((c) => td(esc(JSON.stringify(x && typeof x === 'object' ? x[c] : x) ?? ''))))).join('') +
      '</tbody></table>';
  } finally {
    sinkLoading = false;
  }
}

function logLine(l) {
  const f = Object.entries(l.fields).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
  return `<div class="${esc(l.level)}" data-stage="${esc(l.stage ?? '')}">${esc(l.time.slice(11, 23))} ${esc(l.level.padEnd(5))} ${esc(l.stage ?? '-')} ${esc(l.message)} <small>${esc(f)}</small></div>`;
}

function visible(l) {
  const stage = $('#log-stage').value;
  return (!stage || l.stage === stage) && (l.level !== 'DEBUG' || $('#log-debug').checked);
}

function renderLogs() {
  $('#logs').innerHTML = logs.filter(visible).slice(-300).map(logLine).join('');
  $('#logs').scrollTop = $('#logs').scrollHeight;
}

function addLog(l) {
  // a reconnected stream starts with recent lines again
  if (logs.length && l.seq <= logs[logs.length - 1].seq) return;
  logs.push(l);
  if (logs.length > 3000) logs.splice(0, logs.length - 3000);
  if (!visible(l)) return;
  const box = $('#logs');
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 5;
  box.insertAdjacentHTML('beforeend', logLine(l));
  while (box.childElementCount > 300) box.firstElementChild.remove();
  if (atBottom) box.scrollTop = box.scrollHeight;
}

$('#sink-tabs').addEventListener('click', (e) => {
  const b = e.target.closest('button[data-sink]');
  if (!b) return;
  currentSink = b.dataset.sink;
  $('#sink-tabs').dataset.tabs = '';
  if (snapshot) render(snapshot);
});
$('#state-operator').addEventListener('change', fillStates);
$('#state-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const q = new URLSearchParams({ operator: $('#state-operator').value, state: $('#state-name').value, key: $('#state-key').value });
  const r = await (await fetch(`/api/state?${q}`)).json();
  $('#state-result').textContent = r.error ? r.error : r.found ? JSON.stringify(r.value, null, 2) : 'no value for this key (as of the checkpoint above)';
});
$('#log-stage').addEventListener('change', renderLogs);
$('#log-debug').addEventListener('change', renderLogs);

const events = new EventSource('/api/events');
events.addEventListener('open', () => {
  $('#conn').textContent = 'live';
  $('#conn').className = 'conn live';
});
events.addEventListener('error', () => {
  $('#conn').textContent = 'disconnected (is sluice dev still running?)';
  $('#conn').className = 'conn lost';
});
events.addEventListener('snapshot', (e) => render(JSON.parse(e.data)));
events.addEventListener('log', (e) => addLog(JSON.parse(e.data)));

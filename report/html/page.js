// The glue of tpusim's HTML pages (report/html_page.h): reads the inlined data and
// hands each chart to Apache ECharts. No plotting here, only options and text.
'use strict';
const data = JSON.parse(document.getElementById('tpusim-data').textContent);
const page = { charts: {}, placementMarks: 0, placementKind: '' };  // read by tests/e2e/html_page_test.py
window.tpusimPage = page;

const $ = (id) => document.getElementById(id);
const range = (n) => Array.from({ length: n }, (_, i) => String(i));
const fmt = (v, digits = 3) => (v === null || v === undefined ? '-' : Number(v).toPrecision(digits));
const ms = (s) => (s * 1e3).toFixed(3);
const para = (parent, text, cls = 'line') => {
  const p = document.createElement('div');
  p.className = cls;
  p.textContent = text;
  parent.appendChild(p);
  return p;
};
const chart = (id, option) => {
  const c = echarts.init($(id), null, { renderer: 'canvas' });
  c.setOption(Object.assign({ animation: false, tooltip: {} }, option));
  window.addEventListener('resize', () => c.resize());
  page.charts[id] = c;
  return c;
};
const verdictClass = (v) => (v.startsWith('not input-bound') ? 'fed' : v.startsWith('input-bound') ? 'bound' : 'unknown');

function showAnswer(r) {
  const answer = $('answer'), measured = $('measured');
  let target = answer;
  if (data.answer_lines.length === 0) para(answer, 'verdict: ' + r.verdict, 'verdict ' + verdictClass(r.verdict));
  for (const line of data.answer_lines) {
    if (line.startsWith('== measured')) target = measured;
    if (line.startsWith('== ')) {
      const h = document.createElement(target === answer ? 'h1' : 'h2');
      h.textContent = line.replace(/^== | ==$/g, '');
      target.appendChild(h);
    } else if (line.startsWith('verdict: ')) {
      para(target, line, 'verdict ' + verdictClass(line.slice(9)));
    } else {
      para(target, line);
    }
  }
  const au = r.accelerator_utilization;
  para(measured, 'measured verdict (this machine): ' + r.verdict);
  if (au) para(measured, `accelerator utilization: mean ${fmt(au.mean)}, min ${fmt(au.min)} (core ${au.worst_core.host}/${au.worst_core.ordinal})`);
  para(measured, `total ${fmt(r.totals.examples_per_s, 4)} examples/s, ${fmt(r.totals.bytes_per_s / 1e6, 4)} MB/s; step ${ms(r.step.mean_step_s)} ms mean, infeed ${fmt(r.step.infeed_percent)}% (max over cores)`);
  para(measured, `window: ${r.window.infeed_steps} infeed steps from step ${r.window.first_infeed_step}, ${fmt(r.window.seconds)} s` + (r.window.steady ? '' : '; not steady: ' + r.window.steady_note));
}

// Each stage's capacity on the binding host, and min / median / max over the hosts.
function showBottleneck(pod) {
  if (!pod || !pod.hosts || pod.hosts.length === 0) { $('bottleneck-note').textContent = 'no pod projection in this report'; return; }
  const bound = pod.hosts.find((h) => h.host === pod.bound_host) || pod.hosts[0];
  const stages = bound.stages.map((s) => s.stage);
  const spread = stages.map((name) => {
    const caps = pod.hosts.map((h) => (h.stages.find((s) => s.stage === name) || {}).capacity_examples_per_s).filter((c) => c != null).sort((a, b) => a - b);
    return caps.length ? [caps[0], caps[Math.floor((caps.length - 1) / 2)], caps[caps.length - 1]] : [null, null, null];
  });
  const demand = pod.demand_examples_per_s_per_host;
  $('bottleneck-note').textContent = `binding host ${bound.host} (bound by ${bound.bound_by}); the points are the min / median / max over ${pod.hosts.length} building hosts; a stage without a bar costs nothing and is unlimited; log scale`;
  const unit = (v) => (v == null ? 'unlimited' : fmt(v, 4) + ' examples/s');
  chart('bottleneck', {
    legend: {}, grid: { left: 80, right: 30, bottom: 60 },
    tooltip: { trigger: 'axis', formatter: (ps) => `stage ${ps[0].name}<br>` + ps.map((p) => `${p.seriesName}: ${unit(p.value)}`).join('<br>') + (demand ? `<br>demand: ${fmt(demand, 4)} examples/s per host` : '') },
    xAxis: { type: 'category', data: stages, axisLabel: { interval: 0, rotate: 20 } },
    yAxis: { type: 'log', name: 'examples/s per host' },
    series: [
      { name: `host ${bound.host} (binding)`, type: 'bar', data: bound.stages.map((s) => s.capacity_examples_per_s),
        markLine: demand ? { symbol: 'none', label: { formatter: 'demand ' + fmt(demand, 4) }, lineStyle: { color: '#c0392b', width: 2 }, data: [{ yAxis: demand }] } : undefined },
      ...['min', 'median', 'max'].map((n, i) => ({ name: n + ' over hosts', type: 'scatter', symbolSize: 9, data: spread.map((s) => s[i]) })),
    ],
  });
}

const kParts = [
  ['infeed wait', (m) => m.infeed_wait_s], ['compute', (m) => m.compute_s + m.embedding_lookup_s + m.embedding_exchange_s],
  ['CRS', (m) => m.crs_s], ['apply', (m) => m.apply_s], ['device', (m) => m.device_s],
  ['outfeed', (m) => m.outfeed_s + m.post_loop_s], ['idle', (m, p) => p.idle_s],
];

// Stacked step parts per point, AU per point and per loop, the warm-up shaded.
function showSteps(t) {
  if (!t) { $('steps-note').textContent = 'this report has no timeline'; return; }
  const label = (p) => (p.steps > 1 ? `${p.first_step}-${p.first_step + p.steps - 1}` : String(p.first_step));
  const x = t.points.map(label);
  const loopAu = new Map(t.loops.map((l) => [l.loop, l.au]));
  const warm = t.points.filter((p) => !p.in_window);
  $('steps-note').textContent = `${t.note}; ${t.cores} step cores; ${t.infeed_steps_per_loop} infeed steps per loop` + (warm.length ? '; shaded: warm-up (outside the report\'s window)' : '');
  chart('steps', {
    legend: {}, grid: { left: 70, right: 70, bottom: 50 },
    tooltip: { trigger: 'axis', formatter: (ps) => `steps ${ps[0].name} (loop ${t.points[ps[0].dataIndex].loop})<br>` + ps.map((p) => `${p.seriesName}: ${p.seriesIndex < kParts.length ? p.value.toFixed(3) + ' ms' : fmt(p.value)}`).join('<br>') },
    xAxis: { type: 'category', data: x, name: 'infeed step' },
    yAxis: [{ type: 'value', name: 'ms per step (mean over cores)' }, { type: 'value', name: 'AU', min: 0, max: 1 }],
    series: [
      ...kParts.map(([name, get], i) => ({ name, type: 'bar', stack: 'step', data: t.points.map((p) => get(p.mean, p) * 1e3),
        markArea: i === 0 && warm.length ? { itemStyle: { color: 'rgba(120,120,120,0.12)' }, data: [[{ xAxis: label(warm[0]) }, { xAxis: label(warm[warm.length - 1]) }]] } : undefined })),
      { name: 'AU per point', type: 'line', yAxisIndex: 1, data: t.points.map((p) => p.au) },
      { name: 'AU per loop', type: 'line', step: 'middle', yAxisIndex: 1, lineStyle: { type: 'dashed' }, data: t.points.map((p) => loopAu.get(p.loop)) },
    ],
  });
}

function showQueues(t, depth) {
  if (!t || t.queues.length === 0) { $('queues-note').textContent = 'no fed core in this report\'s timeline'; return; }
  const cells = [];
  t.queues.forEach((q, y) => q.occupancy.forEach((v, x) => cells.push([x, y, v])));
  $('queues-note').textContent = `mean queue slots already full at each dequeue (infeed.queue_depth ${depth}); one row per fed core (${t.queues.length}), one column per point`;
  chart('queues', {
    grid: { left: 90, right: 30, bottom: 70 },
    tooltip: { formatter: (p) => `host ${t.queues[p.value[1]].host}, core ${t.queues[p.value[1]].ordinal}<br>steps ${t.points[p.value[0]].first_step}+${t.points[p.value[0]].steps}<br>occupancy ${fmt(p.value[2])} slots` },
    xAxis: { type: 'category', data: t.points.map((p) => p.first_step), name: 'infeed step' },
    yAxis: { type: 'category', data: t.queues.map((q) => `h${q.host}/c${q.ordinal}`), axisLabel: { show: t.queues.length <= 64 } },
    visualMap: { min: 0, max: Math.max(1, depth), calculable: true, orient: 'horizontal', left: 'center', bottom: 0 },
    series: [{ type: 'heatmap', data: cells }],
  });
}

// hosts x cores (or the mesh's positions), coloured by the host that fed each core.
function showPlacement(p) {
  if (!p) { $('placement-note').textContent = 'this report has no placement section'; return; }
  const mesh = p.mesh.length > 0;
  const fedBy = (c) => (c.fed_by.length ? c.fed_by[0] : -1);
  const odd = (c) => c.fed_by.length > 1 || (c.fed_by.length === 1 && c.fed_by[0] !== c.host);
  const describe = (c) => `host ${c.host}, core ${c.ordinal}` + (c.replica >= 0 ? `, replica ${c.replica}, logical core ${c.logical_core}` : '') +
    (c.mesh_position ? `<br>mesh position (${c.mesh_position.join(', ')})` : '') + `<br>fed by: ${c.fed_by.length ? 'host ' + c.fed_by.join(', ') : 'no infeed'}`;
  const aggregate = p.cores.length >= 256;
  let cells, xName, yName;
  if (aggregate) {  // one cell per host: its cores on hover
    const hosts = new Map();
    for (const c of p.cores) { if (!hosts.has(c.host)) hosts.set(c.host, []); hosts.get(c.host).push(c); }
    const side = Math.ceil(Math.sqrt(hosts.size));
    cells = [...hosts.entries()].map(([h, cs], i) => ({ value: [i % side, Math.floor(i / side), fedBy(cs[0])], cores: cs, odd: cs.some(odd) }));
    xName = 'host (row-major)'; yName = '';
    page.placementKind = 'host';
  } else {
    const pos = (c) => (mesh ? [c.mesh_position.slice(1).reduce((a, v, i) => a * p.mesh[i + 1].size + v, 0), c.mesh_position[0]] : [c.ordinal, c.host]);
    cells = p.cores.map((c) => ({ value: [...pos(c), fedBy(c)], cores: [c], odd: odd(c) }));
    xName = mesh ? p.mesh.slice(1).map((a) => a.name).join(' x ') || '-' : 'core on host';
    yName = mesh ? p.mesh[0].name : 'host';
    page.placementKind = 'core';
  }
  page.placementMarks = cells.length;
  const hosts = Math.max(...p.cores.map((c) => c.host)) + 1;
  $('placement-note').textContent = (mesh ? `JAX mesh ${p.mesh.map((a) => a.name + '=' + a.size).join(',')}: rows the first axis, columns the others; ` : '') +
    (aggregate ? `${p.cores.length} cores: one cell per host (hover for its cores); ` : '') +
    `colour: the host that fed the core; a red edge: fed by a host other than its own. Audit: ${p.audit}`;
  chart('placement', {
    grid: { left: 70, right: 30, bottom: 80 },
    tooltip: { formatter: (q) => q.data.cores.map(describe).join('<hr>') },
    xAxis: { type: 'category', name: xName, data: range(Math.max(...cells.map((c) => c.value[0])) + 1) },
    yAxis: { type: 'category', name: yName, inverse: true, data: range(Math.max(...cells.map((c) => c.value[1])) + 1) },
    visualMap: { min: -1, max: Math.max(0, hosts - 1), dimension: 2, orient: 'horizontal', left: 'center', bottom: 0, text: ['fed by host ' + (hosts - 1), 'not fed (-1)'] },
    series: [{ type: 'scatter', symbol: 'rect', symbolSize: aggregate ? 22 : 18,
      data: cells.map((c) => Object.assign(c, { itemStyle: c.odd ? { borderColor: '#d0021b', borderWidth: 2 } : {} })) }],
  });
}

function showAssumptions(r) {
  const out = $('assumptions');
  const pod = r.pod_projection, a = r.answer;
  if (a && a.assumes) { para(out, 'the answer assumes:', 'note'); a.assumes.forEach((l) => para(out, '  - ' + l)); }
  if (pod && pod.target_host) {
    const table = document.createElement('table');
    table.innerHTML = '<tr><th>target host</th><th>value</th><th>source</th></tr>';
    for (const [key, v] of Object.entries(pod.target_host)) {
      const row = table.insertRow();
      [key, v && typeof v === 'object' ? v.value : v, v && typeof v === 'object' ? v.source : ''].forEach((t) => { row.insertCell().textContent = String(t); });
    }
    out.appendChild(table);
  }
  if (pod && pod.assumes) { para(out, 'the pod projection assumes:', 'note'); pod.assumes.forEach((l) => para(out, '  - ' + l)); }
}

function showReport() {
  const r = data.report;
  if (data.read_note) para($('lacks'), data.read_note, 'lacks');
  data.lacks.forEach((l) => para($('lacks'), 'this report lacks ' + l, 'lacks'));
  showAnswer(r);
  showBottleneck(r.pod_projection);
  showSteps(r.timeline);
  showQueues(r.timeline, r.config && r.config.infeed ? r.config.infeed.queue_depth : 0);
  showPlacement(r.placement);
  showAssumptions(r);
  $('footer').textContent = `tpusim report version ${r.version}` + (r.provenance ? `, commit ${r.provenance.git_commit}, written ${r.provenance.created_utc}` : '') + `; charts: Apache ECharts ${data.echarts_version}, inlined`;
}

// AU (measured and projected) against the varied keys, the target and the chosen value.
function showSweep() {
  if (data.keys.length === 1 && data.points.every((p) => !isNaN(parseFloat(p.values[0])))) {
    data.points.sort((a, b) => parseFloat(a.values[0]) - parseFloat(b.values[0]));  // capacity's trials by value
  }
  $('title').textContent = data.title;
  const x = data.points.map((p) => p.values.map((v, i) => (data.keys.length > 1 ? data.keys[i] + '=' : '') + v).join(', '));
  const chosen = data.chosen === null ? null : data.points.findIndex((p) => p.values[0] === data.chosen);
  $('sweep-note').textContent = `varied: ${data.keys.join(' x ')}; the line is the target AU ${data.target_au}; ${data.au_source} AU decides` + (chosen !== null && chosen >= 0 ? `; chosen: ${data.keys[0]}=${data.chosen}` : '') + '; click a point to open its own page';
  const c = chart('sweep', {
    legend: {}, grid: { left: 70, right: 30, bottom: 70 },
    tooltip: { trigger: 'axis', formatter: (ps) => `${data.keys.join(', ')}: ${ps[0].name}<br>` + ps.map((p) => `${p.seriesName}: ${fmt(p.value)}`).join('<br>') + `<br>${data.points[ps[0].dataIndex].run}: ${data.points[ps[0].dataIndex].verdict || 'failed'}` },
    xAxis: { type: 'category', data: x, name: data.keys.join(' x '), axisLabel: { rotate: x.length > 8 ? 30 : 0 } },
    yAxis: { type: 'value', name: 'AU', min: 0, max: 1 },
    series: [
      { name: 'measured AU (this machine)', type: 'line', symbolSize: 9, data: data.points.map((p) => p.measured_au),
        markLine: { symbol: 'none', label: { formatter: 'target ' + data.target_au }, data: [{ yAxis: data.target_au }] },
        markPoint: chosen !== null && chosen >= 0 ? { symbol: 'pin', data: [{ name: 'chosen', coord: [chosen, data.points[chosen][data.au_source + '_au']], value: 'chosen' }] } : undefined },
      { name: 'projected AU (target pod)', type: 'line', symbolSize: 9, data: data.points.map((p) => p.projected_au) },
    ],
  });
  c.on('click', (e) => { if (e.dataIndex !== undefined && data.points[e.dataIndex]) window.location.href = data.points[e.dataIndex].page; });
  const table = $('points');
  table.innerHTML = `<tr><th>run</th>${data.keys.map((k) => `<th>${k}</th>`).join('')}<th>measured AU</th><th>projected AU</th><th>verdict</th><th>projected verdict</th></tr>`;
  data.points.forEach((p) => {
    const row = table.insertRow();
    const a = document.createElement('a');
    a.href = p.page;
    a.textContent = p.run;
    row.insertCell().appendChild(a);
    [...p.values, fmt(p.measured_au), fmt(p.projected_au), p.exit_code === 0 ? p.verdict : `failed (exit ${p.exit_code})`, p.projected_verdict].forEach((t) => { row.insertCell().textContent = t; });
  });
  page.placementMarks = data.points.length;
  $('footer').textContent = `charts: Apache ECharts ${data.echarts_version}, inlined`;
}

if (data.kind === 'sweep') showSweep(); else showReport();

// Names and numbers as a person reads them.

// Each kind's readable name. The metric that selects a job's best epoch is
// not here: every EpochMetrics carries it, named by the server (selection).
const KIND_NAMES = {
  TASK_KIND_SEQUENCE_CLASSIFICATION: 'Classification',
  TASK_KIND_MULTI_LABEL_CLASSIFICATION: 'Multi-label',
  TASK_KIND_REGRESSION: 'Regression',
  TASK_KIND_TOKEN_CLASSIFICATION: 'Token classification',
  TASK_KIND_EXTRACTIVE_QA: 'Extractive QA',
};

// Tasks and jobs stored before kinds existed read as sequence classification;
// a kind this page does not know reads as its API name.
export function kindName(kind) {
  if (KIND_NAMES[kind]) return KIND_NAMES[kind];
  return kind === 'TASK_KIND_UNSPECIFIED' || !kind ? KIND_NAMES.TASK_KIND_SEQUENCE_CLASSIFICATION : kind;
}

// An epoch's selection metric as the server named it: {label, value,
// fraction}; a server from before EpochMetrics.selection gives none.
export function selectionOf(m) {
  const s = m && m.selection;
  if (!s || !s.label) return { label: 'val metric', value: NaN, fraction: false };
  return { label: String(s.label), value: num(s.value), fraction: Boolean(s.fraction) };
}

// "JOB_STATE_SUCCEEDED" -> "Succeeded", "TASK_STATE_READY" -> "Ready".
export function stateName(state) {
  if (!state) return 'Unknown';
  const s = String(state).replace(/^(JOB|TASK)_STATE_/, '').toLowerCase().replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// int64 fields arrive as JSON strings; absent means 0.
export function num(v) {
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
}

// Three significant digits (1.23 kB, 12.3 kB, 123 kB), the unit chosen after
// rounding: 999 999 B is 1.00 MB, not 1000 kB.
export function bytes(n) {
  n = num(n);
  if (n <= 0) return '—';
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let i = 0;
  n /= 1000;
  while (Number(n.toPrecision(3)) >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${Number(n.toPrecision(3)) < 1000 ? n.toPrecision(3) : n.toFixed(0)} ${units[i]}`;
}

export function percent(x, digits = 1) {
  return `${(num(x) * 100).toFixed(digits)}%`;
}

// A selection metric's value: a percentage for a fraction, three decimals
// for a correlation; a dash when there is none.
export function metricValue(selection, v) {
  if (Number.isNaN(v)) return '—';
  return selection.fraction ? percent(v) : num(v).toFixed(3);
}

// "val accuracy 81.3%": an epoch's selection metric with its value.
export function selectionText(m) {
  const s = selectionOf(m);
  return `${s.label} ${metricValue(s, s.value)}`;
}

export function micros(t) {
  const n = num(t);
  if (!n) return '—';
  const d = new Date(n / 1000);
  return d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

export function microsTime(t) {
  const n = num(t);
  if (!n) return '';
  return new Date(n / 1000).toLocaleTimeString(undefined, { hour12: false });
}

// Whether the job has a best epoch to report.
export function bestMetricText(job) {
  const m = job.bestMetrics;
  if (!m || num(m.epoch) === 0) return '—';
  return `${selectionText(m)} (epoch ${num(m.epoch)})`;
}

// An element: h('td', {class: 'num', text: '3'}, child, ...). Text is always
// set as text (textContent), never parsed as markup.
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

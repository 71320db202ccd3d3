// Names and numbers as a person reads them.

// Each kind's readable name and the EpochMetrics field that selects its best
// epoch (docs/API.md, "Task kinds").
const KINDS = {
  TASK_KIND_SEQUENCE_CLASSIFICATION: {
    name: 'Classification', metric: 'valAccuracy', metricName: 'val accuracy', percent: true,
  },
  TASK_KIND_MULTI_LABEL_CLASSIFICATION: {
    name: 'Multi-label', metric: 'microF1', metricName: 'val micro-F1', percent: true,
  },
  TASK_KIND_REGRESSION: {
    name: 'Regression', metric: 'spearman', metricName: 'val Spearman', percent: false,
  },
  TASK_KIND_TOKEN_CLASSIFICATION: {
    name: 'Token classification', metric: 'f1', metricName: 'val entity F1', percent: true,
  },
  TASK_KIND_EXTRACTIVE_QA: {
    name: 'Extractive QA', metric: 'f1', metricName: 'val F1 (SQuAD)', percent: true,
  },
};

// Tasks and jobs stored before kinds existed read as sequence classification.
export function kindInfo(kind) {
  return KINDS[kind] || KINDS.TASK_KIND_SEQUENCE_CLASSIFICATION;
}

export function kindName(kind) {
  return KINDS[kind] ? KINDS[kind].name : kind === 'TASK_KIND_UNSPECIFIED' || !kind ? KINDS.TASK_KIND_SEQUENCE_CLASSIFICATION.name : kind;
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

export function metricValue(info, v) {
  return info.percent ? percent(v) : num(v).toFixed(3);
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
  const info = kindInfo(job.taskKind);
  return `${info.metricName} ${metricValue(info, m[info.metric])} (epoch ${num(m.epoch)})`;
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

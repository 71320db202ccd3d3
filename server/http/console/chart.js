// The job chart: training and validation loss (left axis) and the job's
// selection metric (right axis: named by the server in each EpochMetrics) against optimiser steps or epochs, drawn as
// plain SVG. Every point is a <circle class="pt"> with a <title>; the
// training's current step is a dashed line.
//
// Data (what the trainer emits, server/training/job_runner.cc):
//   - EpochMetrics at each epoch's end: epoch, step, trainLoss (the epoch's
//     mean), valLoss and selection (the metric's label, value and form);
//   - JobProgress every 10 optimiser steps: step, totalSteps, epoch,
//     totalEpochs (no loss); a progress event that carries a `trainLoss` is
//     drawn as a per-step curve too.

import { metricValue, num, selectionOf } from './format.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 720;
const H = 300;
const M = { left: 56, right: 60, top: 14, bottom: 42 };

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

function text(parent, x, y, content, cls, anchor = 'middle') {
  const t = el('text', { x: x.toFixed(1), y: y.toFixed(1), class: cls, 'text-anchor': anchor }, parent);
  t.textContent = content;
  return t;
}

// About `count` round tick values covering [lo, hi].
export function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 && out.length < 50; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  }
  return out;
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const t = ticks(0, v * 1.05, 4);
  const last = t[t.length - 1];
  return last >= v ? last : v * 1.05;
}

function label(v) {
  if (Math.abs(v) >= 1000) return `${+(v / 1000).toFixed(1)}k`;
  return String(+v.toFixed(3));
}

// series: [{key, name, cls, points: [{x, y, title}], axis: 'loss'|'metric', dots}]
// Returns the summary used as the chart's aria-label.
export function renderChart(svg, { epochs, progress, stepLosses, xMode }) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  // The metric's name and form, from the latest epoch (a fraction on a
  // 0-100% axis before the first).
  const latest = epochs.length ? selectionOf(epochs[epochs.length - 1]) : { label: 'val metric', fraction: true };
  const info = { metricName: latest.label, fraction: latest.fraction };
  const byStep = xMode !== 'epoch';
  const totalSteps = num(progress && progress.totalSteps);
  const totalEpochs = num(progress && progress.totalEpochs);
  const step = num(progress && progress.step);

  const ep = epochs.map((m) => ({
    epoch: num(m.epoch), step: num(m.step), trainLoss: num(m.trainLoss), valLoss: num(m.valLoss),
    metric: selectionOf(m).value,
  }));
  const xOf = (m) => (byStep ? m.step : m.epoch);
  const pt = (m, y, name, value) => ({
    x: xOf(m), y, title: `epoch ${m.epoch}, step ${m.step}: ${name} ${value}`,
  });
  const series = [
    { key: 'train', name: 'train loss (epoch mean)', cls: 's-train', axis: 'loss', dots: true,
      points: ep.map((m) => pt(m, m.trainLoss, 'train loss', m.trainLoss.toFixed(4))) },
    { key: 'val', name: 'validation loss', cls: 's-val', axis: 'loss', dots: true,
      points: ep.map((m) => pt(m, m.valLoss, 'validation loss', m.valLoss.toFixed(4))) },
    { key: 'metric', name: info.metricName, cls: 's-metric', axis: 'metric', dots: true,
      points: ep.map((m) => pt(m, m.metric, info.metricName, metricValue(info, m.metric))) },
  ];
  if (byStep && stepLosses.length) {
    series.unshift({ key: 'step', name: 'train loss (per step)', cls: 's-step', axis: 'loss', dots: false,
      points: stepLosses.map((p) => ({ x: p.step, y: p.loss, title: `step ${p.step}: train loss ${p.loss.toFixed(4)}` })) });
  }
  for (const s of series) s.points = s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));

  // Domains. x: the whole job (so the chart fills as it trains).
  let xMax = byStep ? Math.max(totalSteps, step, 1) : Math.max(totalEpochs, 1);
  for (const s of series) for (const p of s.points) xMax = Math.max(xMax, p.x);
  const xMin = 0;
  let lossMax = 0;
  for (const s of series) if (s.axis === 'loss') for (const p of s.points) lossMax = Math.max(lossMax, p.y);
  lossMax = niceMax(lossMax);
  let mMin = 0;
  let mMax = 1;
  if (!info.fraction) {
    // Spearman lies in [-1, 1]; show the negative half only when needed.
    const metric = series.find((s) => s.key === 'metric');
    if (metric.points.some((p) => p.y < 0)) mMin = -1;
  }

  const px = (x) => M.left + ((x - xMin) / (xMax - xMin || 1)) * (W - M.left - M.right);
  const pyLoss = (y) => H - M.bottom - (y / lossMax) * (H - M.top - M.bottom);
  const pyMetric = (y) => H - M.bottom - ((y - mMin) / (mMax - mMin)) * (H - M.top - M.bottom);

  // Grid and axes.
  const grid = el('g', { class: 'grid' }, svg);
  const axes = el('g', { class: 'axes' }, svg);
  for (const t of ticks(0, lossMax, 5)) {
    const y = pyLoss(t);
    el('line', { x1: M.left, x2: W - M.right, y1: y.toFixed(1), y2: y.toFixed(1) }, grid);
    text(axes, M.left - 6, y + 4, label(t), 'tick', 'end');
  }
  for (const t of ticks(mMin, mMax, 4)) {
    text(axes, W - M.right + 6, pyMetric(t) + 4, info.fraction ? `${Math.round(t * 100)}%` : label(t), 'tick metric-tick', 'start');
  }
  const xTicks = byStep ? ticks(xMin, xMax, 6) : ticks(xMin, xMax, Math.min(10, xMax)).filter((t) => Number.isInteger(t));
  for (const t of xTicks) {
    const x = px(t);
    el('line', { x1: x.toFixed(1), x2: x.toFixed(1), y1: M.top, y2: H - M.bottom }, grid);
    text(axes, x, H - M.bottom + 16, label(t), 'tick');
  }
  el('line', { x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom, class: 'axis' }, axes);
  el('line', { x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom, class: 'axis' }, axes);
  el('line', { x1: W - M.right, x2: W - M.right, y1: M.top, y2: H - M.bottom, class: 'axis' }, axes);
  text(axes, (M.left + W - M.right) / 2, H - 6, byStep ? 'optimiser step' : 'epoch', 'axis-title');
  const ly = text(axes, 14, (M.top + H - M.bottom) / 2, 'loss', 'axis-title');
  ly.setAttribute('transform', `rotate(-90 14 ${((M.top + H - M.bottom) / 2).toFixed(1)})`);
  const ry = text(axes, W - 12, (M.top + H - M.bottom) / 2, info.metricName, 'axis-title');
  ry.setAttribute('transform', `rotate(90 ${W - 12} ${((M.top + H - M.bottom) / 2).toFixed(1)})`);

  // Where training is now.
  if (byStep && step > 0 && step <= xMax) {
    const x = px(step).toFixed(1);
    el('line', { x1: x, x2: x, y1: M.top, y2: H - M.bottom, class: 'now' }, svg);
  }

  // Series.
  for (const s of series) {
    const g = el('g', { class: `series ${s.cls}`, 'data-series': s.key }, svg);
    const py = s.axis === 'loss' ? pyLoss : pyMetric;
    const pts = [...s.points].sort((a, b) => a.x - b.x);
    if (pts.length > 1) {
      const d = pts.map((p, i) => `${i ? 'L' : 'M'}${px(p.x).toFixed(1)} ${py(p.y).toFixed(1)}`).join(' ');
      el('path', { d, class: 'line' }, g);
    }
    if (s.dots) {
      for (const p of pts) {
        const c = el('circle', { cx: px(p.x).toFixed(1), cy: py(p.y).toFixed(1), r: 3.2, class: 'pt' }, g);
        el('title', {}, c).textContent = p.title;
      }
    }
  }

  if (!ep.length && !stepLosses.length) {
    text(svg, (M.left + W - M.right) / 2, (M.top + H - M.bottom) / 2,
      step > 0 ? `training: step ${step} of ${totalSteps}; the first epoch's metrics come at its end` : 'no epoch finished yet',
      'empty-note');
  }
  return { series, summary: summarize(info, ep, progress) };
}

function summarize(info, ep, progress) {
  const step = num(progress && progress.step);
  const total = num(progress && progress.totalSteps);
  const where = total ? ` Step ${step} of ${total}.` : '';
  if (!ep.length) return `Training chart: no epoch finished yet.${where}`;
  const last = ep[ep.length - 1];
  let best = ep[0];
  for (const m of ep) if (m.metric > best.metric) best = m;
  return `Training chart of ${ep.length} epoch${ep.length === 1 ? '' : 's'}: at epoch ${last.epoch} ` +
    `train loss ${last.trainLoss.toFixed(3)}, validation loss ${last.valLoss.toFixed(3)}, ` +
    `${info.metricName} ${metricValue(info, last.metric)}; best ${info.metricName} ` +
    `${metricValue(info, best.metric)} at epoch ${best.epoch}.${where}`;
}

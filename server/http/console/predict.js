// Predict results as a person reads them: label bars for classification and
// multi-label, entities marked in the text, the answer marked in its context,
// the value for regression. Everything is built with DOM calls (text never
// becomes markup). Offsets from the server are Unicode code points, so texts
// are sliced as arrays of code points (Array.from), not UTF-16 units.

import { h, num, percent } from './format.js';


// A stable colour class per entity type (the stylesheet defines ent-0..7).
function typeClass(label) {
  let hash = 0;
  for (const ch of String(label)) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return `ent-${hash % 8}`;
}

// Label bars, highest score first. `chosen`: labels to mark as chosen.
function bars(scores, chosen, caption) {
  const sorted = [...scores].sort((a, b) => num(b.score) - num(a.score));
  const list = h('ul', { class: 'bars', 'aria-label': caption });
  for (const s of sorted) {
    const score = Math.max(0, Math.min(1, num(s.score)));
    const fill = h('span', { class: 'bar-fill' });
    fill.style.width = `${(score * 100).toFixed(1)}%`;
    const isChosen = chosen.has(s.label);
    list.append(h('li', { class: isChosen ? 'bar chosen' : 'bar', 'data-label': s.label },
      h('span', { class: 'bar-label', text: s.label }),
      h('span', { class: 'bar-track', 'aria-hidden': 'true' }, fill),
      h('span', { class: 'bar-score', text: `${percent(score)}${isChosen ? ' ✓' : ''}` })));
  }
  return list;
}

// `text` with the spans [start, end) (code points) marked; spans in order and
// not overlapping (later overlapping ones are skipped).
export function marked(text, spans, className) {
  const cps = Array.from(text);
  const out = h('p', { class: className });
  let at = 0;
  const sorted = [...spans].sort((a, b) => num(a.start) - num(b.start));
  for (const s of sorted) {
    const start = num(s.start);
    const end = num(s.end);
    if (start < at || end <= start || end > cps.length) continue;
    if (start > at) out.append(cps.slice(at, start).join(''));
    const mark = h('mark', { class: `span ${s.cls || ''}`.trim(), 'data-label': s.label || '',
      title: s.title || '' }, cps.slice(start, end).join(''));
    if (s.label) mark.append(h('span', { class: 'tag', text: s.label }));
    out.append(mark);
    at = end;
  }
  if (at < cps.length) out.append(cps.slice(at).join(''));
  return out;
}

function sequence(p) {
  const box = h('div', { class: 'result' });
  box.append(h('p', { class: 'headline' }, 'Label ', h('strong', { class: 'label', text: p.label }),
    ` (${percent(p.score)})`));
  const scores = p.allScores && p.allScores.length ? p.allScores : [{ label: p.label, score: p.score }];
  box.append(bars(scores, new Set([p.label]), 'Every label\u2019s probability'));
  return box;
}

function multiLabel(p, threshold) {
  const box = h('div', { class: 'result' });
  const chosen = p.labels || [];
  box.append(h('p', { class: 'headline' },
    chosen.length ? `Labels at or over ${threshold}: ` : `No label reaches ${threshold}.`,
    ...chosen.flatMap((l, i) => [i ? ', ' : '', h('strong', { class: 'label', text: l.label }),
      ` (${percent(l.score)})`])));
  const scores = p.allScores && p.allScores.length ? p.allScores : chosen;
  box.append(bars(scores, new Set(chosen.map((l) => l.label)), 'Every label\u2019s probability'));
  return box;
}

function regression(p) {
  const box = h('div', { class: 'result' });
  const v = num(p.value);
  box.append(h('p', { class: 'headline' }, 'Value ',
    h('strong', { class: 'value', text: Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(4) : String(+v.toFixed(4)) })));
  return box;
}

function tokens(p, text) {
  const box = h('div', { class: 'result' });
  const entities = p.entities || [];
  box.append(h('p', { class: 'headline' },
    entities.length ? `${entities.length} entit${entities.length === 1 ? 'y' : 'ies'} found` : 'No entities found'));
  box.append(marked(text, entities.map((e) => ({
    start: e.start, end: e.end, label: e.label, cls: typeClass(e.label),
    title: `${e.label} ${percent(e.score)}`,
  })), 'marked-text'));
  if (entities.length) {
    const table = h('table', { class: 'entities' },
      h('caption', { class: 'visually-hidden', text: 'Entities' }),
      h('thead', {}, h('tr', {}, ...['Entity', 'Type', 'Score', 'Code points'].map((c) => h('th', { scope: 'col', text: c })))));
    const body = h('tbody');
    for (const e of entities) {
      body.append(h('tr', {}, h('td', { text: e.text }), h('td', { text: e.label }), h('td', { text: percent(e.score) }),
        h('td', { text: `${num(e.start)}–${num(e.end)}` })));
    }
    table.append(body);
    box.append(table);
  }
  return box;
}

function qa(p, context) {
  const box = h('div', { class: 'result' });
  const answers = p.answers || [];
  const real = answers.filter((a) => a.text !== '' || num(a.end) > 0);
  const best = answers[0];
  if (!best || (best.text === '' && num(best.end) === 0)) {
    box.append(h('p', { class: 'headline' }, best ? `No answer in the context (${percent(best.score)}).` : 'No answer.'));
  } else {
    box.append(h('p', { class: 'headline' }, 'Answer ', h('strong', { class: 'answer', text: best.text }),
      ` (${percent(best.score)})`));
  }
  if (best && real.includes(best)) {
    box.append(marked(context, [{ start: best.start, end: best.end, cls: 'answer-mark', title: `answer ${percent(best.score)}` }],
      'marked-text context'));
  }
  if (answers.length > 1) {
    const list = h('ol', { class: 'answers', 'aria-label': 'Answers, best first' });
    for (const a of answers) {
      const empty = a.text === '' && num(a.end) === 0;
      list.append(h('li', {}, empty ? h('em', { text: 'no answer' }) : h('span', { class: 'answer', text: a.text }),
        ` ${percent(a.score)}`));
    }
    box.append(list);
  }
  return box;
}

// The result of one Predict of one text.
export function renderPrediction(response, { text, pair, threshold }) {
  const p = (response.predictions || [])[0] || {};
  const kind = response.taskKind;
  let body;
  if (kind === 'TASK_KIND_MULTI_LABEL_CLASSIFICATION') body = multiLabel(p, threshold);
  else if (kind === 'TASK_KIND_REGRESSION') body = regression(p);
  else if (kind === 'TASK_KIND_TOKEN_CLASSIFICATION') body = tokens(p, text);
  else if (kind === 'TASK_KIND_EXTRACTIVE_QA') body = qa(p, pair);
  else body = sequence(p);
  body.append(h('p', { class: 'hint', text: `Served by version ${num(response.version)}.` }));
  return body;
}

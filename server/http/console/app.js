// The adapterd web console: tasks, training jobs (followed live through
// WatchTrainingJob) and Predict, over the REST gateway (docs/API.md).

import { api, ApiError, JobWatch, getApiKey, isTerminal, setApiKey } from './api.js';
import { renderChart } from './chart.js';
import {
  bestMetricText, bytes, h, kindName, micros, microsTime, num, selectionText, stateName,
} from './format.js';
import { renderPrediction } from './predict.js';

const REFRESH_MS = 5000;
const MAX_LOG_ENTRIES = 2000;

const $ = (id) => document.getElementById(id);

const state = {
  tasks: new Map(),     // taskId -> Task
  sizes: new Map(),     // "taskId@version" -> adapter bytes (ListTasks leaves them out; GetTask has them)
  jobs: new Map(),      // jobId -> TrainingJob
  selectedTask: '',
  selectedJob: '',
  tasksTruncated: false,
  jobsTruncated: false,
  authBlocked: false,   // a 401/403: stop polling until the key changes
  job: null,            // the followed job: {id, job, epochs, stepLosses, watch, seqs}
};

// ---------------------------------------------------------------------------
// Messages

function showError(what, error) {
  let text;
  if (error instanceof ApiError) {
    const http = error.httpStatus ? `, HTTP ${error.httpStatus}` : '';
    text = `${what}: ${error.message} (${error.codeName}${http})`;
    if (error.unauthenticated) text += '. Type a valid API key above.';
  } else {
    text = `${what}: ${error && error.message ? error.message : String(error)}`;
  }
  $('alert-text').textContent = text;
  $('alert').hidden = false;
}

function clearError() {
  $('alert').hidden = true;
  $('alert-text').textContent = '';
}

function announce(text) {
  $('status').textContent = text;
}

// A failed poll: show it, and stop polling on a bad key.
function pollFailed(what, error) {
  if (error instanceof ApiError && error.unauthenticated) state.authBlocked = true;
  showError(what, error);
}

// ---------------------------------------------------------------------------
// Small DOM helpers (h: format.js)

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// Keeps tbody's rows keyed by id: existing rows are updated in place (focus
// and selection survive a refresh); rows are reordered only when the order
// changed.
function syncRows(tbody, items, idOf, create, update, emptyText, columns) {
  const rows = new Map();
  for (const tr of Array.from(tbody.rows)) {
    if (tr.dataset.id !== undefined) rows.set(tr.dataset.id, tr);
    else tr.remove();
  }
  const wanted = [];
  for (const item of items) {
    const id = idOf(item);
    let tr = rows.get(id);
    if (!tr) {
      tr = create(item);
      tr.dataset.id = id;
    }
    rows.delete(id);
    update(tr, item);
    wanted.push(tr);
  }
  for (const tr of rows.values()) tr.remove();
  const current = Array.from(tbody.rows);
  if (current.length !== wanted.length || current.some((tr, i) => tr !== wanted[i])) {
    for (const tr of wanted) tbody.append(tr);
  }
  if (!items.length) {
    tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: String(columns), text: emptyText })));
  }
}

function selectButton(text, label, onClick) {
  const b = h('button', { type: 'button', class: 'link', 'aria-label': label, text });
  b.addEventListener('click', onClick);
  return b;
}

function stateBadge(cell, s) {
  let badge = cell.firstChild;
  if (!badge) {
    badge = h('span', { class: 'state' });
    cell.append(badge);
  }
  badge.dataset.state = s || '';
  setText(badge, stateName(s));
}

// ---------------------------------------------------------------------------
// Tasks

function renderTasks() {
  const tasks = Array.from(state.tasks.values());
  syncRows($('tasks-table').tBodies[0], tasks, (t) => t.taskId,
    (t) => {
      const tr = h('tr', {}, h('td'), h('td'), h('td'), h('td', { class: 'labels' }), h('td', { class: 'num' }),
        h('td', { class: 'num' }));
      tr.cells[0].append(selectButton(t.taskId, `Select task ${t.taskId}`, () => selectTask(t.taskId)));
      return tr;
    },
    (tr, t) => {
      tr.classList.toggle('selected', t.taskId === state.selectedTask);
      const button = tr.cells[0].firstChild;
      button.setAttribute('aria-pressed', String(t.taskId === state.selectedTask));
      setText(tr.cells[1], kindName(t.taskKind));
      stateBadge(tr.cells[2], t.state);
      const labels = t.labels || [];
      const shown = labels.length > 8 ? `${labels.slice(0, 8).join(', ')}, … (${labels.length})` : labels.join(', ');
      setText(tr.cells[3], shown || '—');
      tr.cells[3].title = labels.join(', ');
      const versions = (t.versions || []).map(num);
      setText(tr.cells[4], num(t.currentVersion)
        ? `v${num(t.currentVersion)} of ${versions.length ? versions.map((v) => `v${v}`).join(', ') : '—'}` : '—');
      setText(tr.cells[5], bytes(num(t.adapterBytes) || state.sizes.get(`${t.taskId}@${num(t.currentVersion)}`)));
    },
    'No tasks yet: train one (adapterctl train, or POST /v1/trainingJobs).', 6);
  $('tasks-note').textContent = state.tasksTruncated ? `Showing the first ${tasks.length} tasks.` : '';
}

// ListTasks does not read the adapters, so it reports no size: GetTask
// does. Sizes are read once per task version, a few per refresh.
async function fillSizes() {
  const missing = Array.from(state.tasks.values()).filter((t) => num(t.currentVersion) > 0 && !num(t.adapterBytes) &&
    !state.sizes.has(`${t.taskId}@${num(t.currentVersion)}`)).slice(0, 12);
  let changed = false;
  for (let i = 0; i < missing.length; i += 4) {
    await Promise.all(missing.slice(i, i + 4).map(async (t) => {
      try {
        const full = await api.getTask(t.taskId);
        state.sizes.set(`${full.taskId}@${num(full.currentVersion)}`, num(full.adapterBytes));
        changed = true;
      } catch {
        // Deleted meanwhile, or a transient error: the next refresh tries again.
      }
    }));
  }
  return changed;
}

async function refreshTasks() {
  const { items, truncated } = await api.listTasks();
  state.tasks = new Map(items.map((t) => [t.taskId, t]));
  state.tasksTruncated = truncated;
  renderTasks();
  const ids = Array.from(state.tasks.keys());
  const list = $('task-ids');
  if (list.childElementCount !== ids.length || ids.some((id, i) => list.children[i].value !== id)) {
    list.replaceChildren(...ids.map((id) => h('option', { value: id })));
  }
  if (await fillSizes()) renderTasks();
  $('tasks-updated').textContent = `updated ${new Date().toLocaleTimeString(undefined, { hour12: false })}`;
  if (state.selectedTask) renderPredictForm();
}

function selectTask(taskId) {
  state.selectedTask = taskId;
  renderTasks();
  renderPredictForm(true);
  $('predict-result').replaceChildren();
  announce(`Task ${taskId} selected for Predict.`);
  $('predict-text').focus();
}

// ---------------------------------------------------------------------------
// Predict

let renderedFormFor = '';

function renderPredictForm(fresh = false) {
  const task = state.tasks.get(state.selectedTask);
  const form = $('predict-form');
  if (!task) {
    form.hidden = true;
    $('predict-empty').hidden = false;
    $('predict-empty').textContent = state.selectedTask
      ? `Task ${state.selectedTask} no longer exists.` : 'Select a task above to try it.';
    return;
  }
  $('predict-empty').hidden = true;
  form.hidden = false;
  const kind = task.taskKind;
  const ready = task.state === 'TASK_STATE_READY';
  setText($('predict-task'), `${task.taskId}: ${kindName(kind)}, ${ready ? `version ${num(task.currentVersion)}`
    : 'no version ready yet (its first training runs)'}`);
  $('predict-submit').disabled = !ready;
  if (!fresh && renderedFormFor === `${task.taskId}/${kind}`) return;
  renderedFormFor = `${task.taskId}/${kind}`;
  const isQa = kind === 'TASK_KIND_EXTRACTIVE_QA';
  const isTokens = kind === 'TASK_KIND_TOKEN_CLASSIFICATION';
  $('predict-text-label').textContent = isQa ? 'Question' : isTokens ? 'Text to tag' : 'Text';
  $('predict-pair-field').hidden = isTokens;
  $('predict-pair-label').textContent = isQa ? 'Context (the answer is a span of it)' : 'Second text (optional, for pair tasks)';
  $('predict-pair').required = isQa;
  $('predict-pair').rows = isQa ? 6 : 2;
  $('predict-threshold-field').hidden = kind !== 'TASK_KIND_MULTI_LABEL_CLASSIFICATION';
  $('predict-topk-field').hidden = !isQa;
}

async function predict(event) {
  event.preventDefault();
  const task = state.tasks.get(state.selectedTask);
  if (!task) return;
  const kind = task.taskKind;
  const text = $('predict-text').value;
  const pair = $('predict-pair').value;
  const result = $('predict-result');
  if (!text.trim()) {
    showError('Predict', new Error(kind === 'TASK_KIND_EXTRACTIVE_QA' ? 'type a question' : 'type a text'));
    $('predict-text').focus();
    return;
  }
  const request = { texts: [text], returnAllScores: true };
  let threshold = 0.5;
  if (kind === 'TASK_KIND_EXTRACTIVE_QA') {
    if (!pair.trim()) {
      showError('Predict', new Error('a question needs a context'));
      $('predict-pair').focus();
      return;
    }
    request.textPairs = [pair];
    const k = Number($('predict-topk').value);
    if (!Number.isInteger(k) || k < 1 || k > 20) {
      showError('Predict', new Error('answers must be a whole number from 1 to 20'));
      $('predict-topk').focus();
      return;
    }
    request.topKAnswers = k;
  } else if (kind !== 'TASK_KIND_TOKEN_CLASSIFICATION' && pair !== '') {
    request.textPairs = [pair];
  }
  if (kind === 'TASK_KIND_MULTI_LABEL_CLASSIFICATION') {
    threshold = Number($('predict-threshold').value);
    if (!(threshold > 0 && threshold <= 1)) {
      showError('Predict', new Error('the threshold must be over 0 and at most 1'));
      $('predict-threshold').focus();
      return;
    }
    request.threshold = threshold;
  }
  const submit = $('predict-submit');
  submit.disabled = true;
  result.setAttribute('aria-busy', 'true');
  try {
    const response = await api.predict(task.taskId, request);
    clearError();
    result.replaceChildren(renderPrediction(response, { text, pair, threshold }));
    announce(`Prediction of task ${task.taskId} shown.`);
  } catch (e) {
    result.replaceChildren();
    showError(`Predict with task ${task.taskId}`, e);
  } finally {
    result.removeAttribute('aria-busy');
    const now = state.tasks.get(task.taskId);
    submit.disabled = !now || now.state !== 'TASK_STATE_READY';
  }
}

// ---------------------------------------------------------------------------
// Jobs

function progressOf(job) {
  const p = job.progress || {};
  return { step: num(p.step), total: num(p.totalSteps), epoch: num(p.epoch), epochs: num(p.totalEpochs) };
}

function setProgress(progress, textNode, job) {
  const p = progressOf(job);
  const done = job.state === 'JOB_STATE_SUCCEEDED';
  if (p.total > 0) {
    progress.max = p.total;
    progress.value = done ? p.total : Math.min(p.step, p.total);
  } else if (done) {
    progress.max = 1;
    progress.value = 1;
  } else if (job.state === 'JOB_STATE_RUNNING') {
    progress.removeAttribute('value');  // indeterminate until the first progress
  } else {
    progress.max = 1;
    progress.value = 0;
  }
  const text = p.total > 0 ? `step ${Math.min(p.step, p.total)} of ${p.total}` +
    (p.epochs ? `, epoch ${Math.max(1, p.epoch)} of ${p.epochs}` : '') : done ? 'done' : 'not started';
  setText(textNode, text);
}

function renderJobs() {
  const jobs = Array.from(state.jobs.values()).reverse();  // newest first
  syncRows($('jobs-table').tBodies[0], jobs, (j) => j.jobId,
    (j) => {
      const tr = h('tr', {}, h('td', { class: 'id' }), h('td'), h('td'), h('td'), h('td', { class: 'progress-cell' }),
        h('td'), h('td'));
      tr.cells[0].append(selectButton(j.jobId, `Follow job ${j.jobId}`, () => selectJob(j.jobId)));
      const bar = h('progress', { max: '1', value: '0' });
      const text = h('span', { class: 'progress-text' });
      bar.id = `progress-${Math.random().toString(36).slice(2)}`;
      text.id = `${bar.id}-text`;
      bar.setAttribute('aria-labelledby', text.id);
      tr.cells[4].append(bar, text);
      return tr;
    },
    (tr, j) => {
      tr.classList.toggle('selected', j.jobId === state.selectedJob);
      tr.cells[0].firstChild.setAttribute('aria-pressed', String(j.jobId === state.selectedJob));
      setText(tr.cells[1], j.taskId);
      setText(tr.cells[2], kindName(j.taskKind));
      stateBadge(tr.cells[3], j.state);
      setProgress(tr.cells[4].querySelector('progress'), tr.cells[4].querySelector('.progress-text'), j);
      setText(tr.cells[5], bestMetricText(j));
      setText(tr.cells[6], micros(j.createdAtMicros));
    },
    jobFilter.taskId || jobFilter.state ? 'No job matches the filter.' : 'No training jobs yet.', 7);
  $('jobs-note').textContent = state.jobsTruncated
    ? `Showing the oldest ${state.jobs.size} matching jobs: filter by task or state to see others.` : '';
}

// The jobs table's filters (ListTrainingJobs' task_id and state).
const jobFilter = { taskId: '', state: '' };

async function refreshJobs() {
  const filter = { ...jobFilter };
  const { items, truncated } = await api.listJobs({ query: filter });
  if (filter.taskId !== jobFilter.taskId || filter.state !== jobFilter.state) return;  // changed meanwhile
  const followed = state.job && state.job.job;
  state.jobs = new Map(items.map((j) => [j.jobId, j]));
  // The watched job's stream is newer than a list read that raced it.
  if (followed && state.jobs.has(followed.jobId) && newer(followed, state.jobs.get(followed.jobId))) {
    state.jobs.set(followed.jobId, followed);
  }
  state.jobsTruncated = truncated;
  renderJobs();
  $('jobs-updated').textContent = `updated ${new Date().toLocaleTimeString(undefined, { hour12: false })}`;
}

function newer(a, b) {
  return num(a.updatedAtMicros) > num(b.updatedAtMicros) || (isTerminal(a.state) && !isTerminal(b.state));
}

// ---------------------------------------------------------------------------
// The followed job: live state, chart and event log

function selectJob(jobId) {
  if (state.job && state.job.id === jobId && state.job.watch) return;
  if (state.job && state.job.watch) state.job.watch.stop();
  state.selectedJob = jobId;
  const known = state.jobs.get(jobId) || null;
  state.job = { id: jobId, job: known, epochs: [], stepLosses: [], seqs: new Set(), watch: null };
  renderJobs();
  $('job-panel').hidden = false;
  $('job-title').textContent = `Job ${jobId}`;
  $('job-log').replaceChildren();
  $('job-error').hidden = true;
  if (known) renderJobDetail();
  drawChart();
  startWatch();
  announce(`Following job ${jobId}.`);
  $('job-title').scrollIntoView({ block: 'nearest' });
}

function startWatch() {
  const followed = state.job;
  setText($('job-watch'), 'connecting…');
  followed.watch = new JobWatch(followed.id, {
    onUpdate: (job, events) => {
      if (state.job !== followed) return;
      if (job) {
        followed.job = job;
        state.jobs.set(job.jobId, job);
      }
      addEvents(events);
      scheduleRender(followed);
    },
    onStatus: (text) => {
      if (state.job === followed) setText($('job-watch'), text);
    },
    onEnd: async (error) => {
      if (state.job !== followed) return;
      followed.watch = null;
      if (error) {
        setText($('job-watch'), `stopped: ${error.message}`);
        showError(`Watching job ${followed.id}`, error);
        return;
      }
      setText($('job-watch'), 'finished');
      // The stream's last message holds the terminal job; read it once more
      // for anything set with the last transition.
      try {
        const job = await api.getJob(followed.id);
        if (state.job !== followed) return;
        followed.job = job;
        state.jobs.set(job.jobId, job);
        renderJobDetail();
        drawChart();
        renderJobs();
      } catch (e) {
        showError(`Reading job ${followed.id}`, e);
      }
    },
  }).start();
}

// The job's panel, chart and row are redrawn at most once a frame, however
// fast events arrive (and not at all in a hidden tab until it shows again).
let renderFrame = 0;
function scheduleRender(followed) {
  if (renderFrame) return;
  renderFrame = requestAnimationFrame(() => {
    renderFrame = 0;
    if (state.job !== followed) return;
    renderJobDetail();
    drawChart();
    renderJobs();
  });
}

function addEvent(e) {
  const followed = state.job;
  const seq = num(e.seq);
  if (followed.seqs.has(seq)) return null;
  followed.seqs.add(seq);
  let text;
  let cls;
  if (e.stateChange) {
    const c = e.stateChange;
    cls = 'ev-state';
    const from = !c.from || c.from === 'JOB_STATE_UNSPECIFIED' ? '' : `${stateName(c.from)} → `;
    text = `${from}${stateName(c.to)}${c.reason ? `: ${c.reason}` : ''}`;
  } else if (e.epochMetrics) {
    const m = e.epochMetrics;
    followed.epochs = followed.epochs.filter((x) => num(x.epoch) !== num(m.epoch));
    followed.epochs.push(m);
    followed.epochs.sort((a, b) => num(a.step) - num(b.step));
    cls = 'ev-epoch';
    text = `epoch ${num(m.epoch)} (step ${num(m.step)}): train loss ${num(m.trainLoss).toFixed(4)}, ` +
      `val loss ${num(m.valLoss).toFixed(4)}, ${selectionText(m)}, ` +
      `${num(m.examplesPerSecond).toFixed(0)} examples/s`;
  } else if (e.warning) {
    cls = 'ev-warning';
    text = `warning${e.warning.kind ? ` (${e.warning.kind})` : ''}: ${e.warning.message}`;
  } else if (e.progress) {
    const p = e.progress;
    // Progress events come every 10 steps: they move the bar and the chart's
    // "now" line, and stay out of the log. A loss they carry is drawn.
    const loss = Number(p.trainLoss);
    if (p.trainLoss !== undefined && Number.isFinite(loss)) followed.stepLosses.push({ step: num(p.step), loss });
    return null;
  } else {
    return null;
  }
  if (e.stateChange) announce(`Job ${followed.id}: ${stateName(e.stateChange.to)}.`);
  return h('li', { class: cls, 'data-seq': String(seq) },
    h('time', { datetime: new Date(num(e.timeMicros) / 1000).toISOString(), text: microsTime(e.timeMicros) }), ' ', text);
}

// Appends a message's events to the log (one layout for the whole batch),
// following the log's end unless the reader scrolled up.
function addEvents(events) {
  const log = $('job-log');
  const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  const items = events.map(addEvent).filter(Boolean);
  if (!items.length) return;
  log.append(...items);
  while (log.childElementCount > MAX_LOG_ENTRIES) log.firstElementChild.remove();
  if (atBottom) log.scrollTop = log.scrollHeight;
}

function renderJobDetail() {
  const followed = state.job;
  const job = followed && followed.job;
  if (!job) return;
  const s = $('job-state');
  s.dataset.state = job.state;
  setText(s, stateName(job.state));
  setProgress($('job-progress'), $('job-progress-text'), job);
  setText($('job-best'), bestMetricText(job));
  setText($('job-task'), `${job.taskId} (${kindName(job.taskKind)})` +
    (num(job.resultVersion) ? `, produced version ${num(job.resultVersion)}` : ''));
  const data = `${(job.datasetIds || []).join(', ')}${job.validationDatasetId ? `; validation ${job.validationDatasetId}` : ''}` +
    ` (${num(job.numTrainExamples)} train, ${num(job.numValidationExamples)} validation examples)`;
  setText($('job-data'), data);
  const hp = job.hyperparameters || {};
  setText($('job-hp'), `learning rate ${hp.learningRate}, ${num(hp.epochs)} epochs, batch ${num(hp.batchSize)}, ` +
    `bottleneck ${num(hp.bottleneckSize)}, ${hp.activation || '—'}, max ${num(hp.maxSeqLen)} word pieces` +
    (num(job.attempts) > 1 ? `; attempt ${num(job.attempts)}` : ''));
  const err = $('job-error');
  err.hidden = !job.errorMessage;
  setText(err, job.errorMessage ? `${stateName(job.state)}: ${job.errorMessage}` : '');
  $('job-cancel').hidden = isTerminal(job.state) || job.state === 'JOB_STATE_CANCELLING';
}

function drawChart() {
  const followed = state.job;
  if (!followed) return;
  const job = followed.job || {};
  const xMode = document.querySelector('input[name="chart-x"]:checked').value;
  const { series, summary } = renderChart($('job-chart'), {
    epochs: followed.epochs, progress: job.progress, stepLosses: followed.stepLosses, xMode,
  });
  $('job-chart').setAttribute('aria-label', summary);
  const legend = $('chart-legend');
  legend.replaceChildren(...series.map((s) => h('li', { class: s.cls },
    h('span', { class: 'swatch', 'aria-hidden': 'true' }), s.name)),
  h('li', { class: 's-now' }, h('span', { class: 'swatch', 'aria-hidden': 'true' }), 'current step'));
}

async function cancelJob() {
  const followed = state.job;
  if (!followed) return;
  $('job-cancel').disabled = true;
  try {
    const job = await api.cancelJob(followed.id);
    clearError();
    if (state.job === followed) {
      followed.job = job;
      renderJobDetail();
    }
    announce(`Cancel requested for job ${followed.id}.`);
  } catch (e) {
    showError(`Cancelling job ${followed.id}`, e);
  } finally {
    $('job-cancel').disabled = false;
  }
}

// ---------------------------------------------------------------------------
// Polling: one round at a time; the next starts REFRESH_MS after the last
// one ended, so slow answers never pile up requests.

let polling = null;  // the round in flight
let pollTimer = null;

async function health() {
  const node = $('health');
  try {
    const r = await api.health();
    node.dataset.health = r.ok ? 'serving' : 'not-serving';
    setText(node, r.ok ? `Server: ${r.status || 'serving'}` : `Server: not serving (HTTP ${r.httpStatus}${r.status ? `, ${r.status}` : ''})`);
  } catch {
    node.dataset.health = 'unreachable';
    setText(node, 'Server: unreachable');
  }
}

async function pollOnce() {
  await health();
  if (state.authBlocked) return;
  const results = await Promise.allSettled([refreshTasks(), refreshJobs()]);
  const [tasks, jobs] = results;
  if (tasks.status === 'rejected') pollFailed('Listing tasks', tasks.reason);
  if (jobs.status === 'rejected') pollFailed('Listing jobs', jobs.reason);
}

let pollAgain = false;  // asked for while a round was in flight: one more at once

function refreshNow() {
  clearTimeout(pollTimer);
  if (polling) {
    pollAgain = true;
    return polling;
  }
  polling = pollOnce().finally(() => {
    polling = null;
    if (pollAgain) {
      pollAgain = false;
      refreshNow();
    } else {
      schedule();
    }
  });
  return polling;
}

function schedule() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(() => {
    if (document.hidden) {
      schedule();  // a background tab does not poll
      return;
    }
    refreshNow();
  }, REFRESH_MS);
}

async function manualRefresh(button) {
  button.disabled = true;
  try {
    state.authBlocked = false;
    await refreshNow();
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------

function init() {
  $('api-key').value = getApiKey();
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    setApiKey($('api-key').value.trim());
    state.authBlocked = false;
    clearError();
    announce(getApiKey() ? 'API key set for this tab.' : 'No API key.');
    refreshNow();
  });
  $('api-key').addEventListener('change', () => {
    setApiKey($('api-key').value.trim());
    state.authBlocked = false;
  });
  $('forget-key').addEventListener('click', () => {
    $('api-key').value = '';
    setApiKey('');
    announce('API key forgotten.');
  });
  $('alert-dismiss').addEventListener('click', clearError);
  $('refresh-tasks').addEventListener('click', (e) => manualRefresh(e.currentTarget));
  $('refresh-jobs').addEventListener('click', (e) => manualRefresh(e.currentTarget));
  $('predict-form').addEventListener('submit', predict);
  $('job-cancel').addEventListener('click', cancelJob);
  $('jobs-filter').addEventListener('submit', (e) => {
    e.preventDefault();
    jobFilter.taskId = $('jobs-task').value.trim();
    jobFilter.state = $('jobs-state').value;
    state.jobs = new Map();
    renderJobs();
    refreshNow();
  });
  $('jobs-state').addEventListener('change', () => $('jobs-filter').requestSubmit());
  for (const radio of document.querySelectorAll('input[name="chart-x"]')) radio.addEventListener('change', drawChart);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refreshNow();
  });
  refreshNow();
}

init();

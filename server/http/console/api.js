// The adapterd REST gateway, as the console calls it: JSON over fetch() with
// the API key as a bearer token, google.rpc.Status errors turned into
// ApiError, and WatchTrainingJob's Server-Sent Events read with fetch()
// (EventSource cannot send an Authorization header) and re-watched from the
// last event seen when the stream drops.

const KEY_STORAGE = 'adapterd.console.apiKey';

// gRPC status codes by number (google.rpc.Code).
export const CODE_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND',
  'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED',
  'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED',
];
const UNAVAILABLE = 14;

export class ApiError extends Error {
  // httpStatus: 0 when no HTTP answer arrived (network error, timeout).
  constructor(message, { code = 2, httpStatus = 0 } = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.httpStatus = httpStatus;
  }

  get codeName() {
    return CODE_NAMES[this.code] || `code ${this.code}`;
  }

  // Worth retrying later: no answer, UNAVAILABLE, overloaded or timed out.
  get transient() {
    return this.httpStatus === 0 || [429, 502, 503, 504].includes(this.httpStatus) ||
      this.code === UNAVAILABLE;
  }

  get unauthenticated() {
    return this.httpStatus === 401 || this.httpStatus === 403;
  }
}

// The API key lives in sessionStorage only: never localStorage, never a URL.
export function getApiKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE) || '';
  } catch {
    return '';
  }
}

export function setApiKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    // Storage disabled: the key then lasts as long as the page.
  }
  memoryKey = key;
}
let memoryKey = '';

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const key = getApiKey() || memoryKey;
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function errorFrom(response) {
  let text = '';
  try {
    text = await response.text();
  } catch {
    // The body could not be read; the status line still says enough.
  }
  let code = 2;
  let message = '';
  try {
    const status = JSON.parse(text);
    if (status && typeof status === 'object') {
      if (Number.isInteger(status.code)) code = status.code;
      if (typeof status.message === 'string') message = status.message;
    }
  } catch {
    message = text.trim().slice(0, 500);
  }
  if (!message) message = response.statusText || `HTTP ${response.status}`;
  return new ApiError(message, { code, httpStatus: response.status });
}

// One JSON call. `timeoutMs` bounds the whole call (answer and body).
export async function call(method, path, { body, query, timeoutMs = 30000, signal } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += `?${s}`;
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const onAbort = () => controller.abort();
  if (signal) signal.addEventListener('abort', onAbort, { once: true });
  try {
    const init = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      signal: controller.signal, cache: 'no-store' };
    if (body !== undefined) init.body = JSON.stringify(body);
    let response;
    try {
      response = await fetch(url, init);
    } catch (e) {
      if (signal && signal.aborted) throw e;
      const why = controller.signal.aborted ? `no answer within ${timeoutMs / 1000} s` : 'the server cannot be reached';
      throw new ApiError(why, { code: controller.signal.aborted ? 4 : UNAVAILABLE, httpStatus: 0 });
    }
    if (!response.ok) throw await errorFrom(response);
    const text = await response.text();
    return text ? JSON.parse(text) : {};
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

const enc = encodeURIComponent;

// Every page of a listing, up to `maxItems` (the console shows the first
// ones and says so when there are more).
async function listAll(path, field, { pageSize = 200, maxItems = 1000, query = {}, signal } = {}) {
  const items = [];
  let pageToken = '';
  let more = false;
  for (let page = 0; page < Math.ceil(maxItems / pageSize); page++) {
    const r = await call('GET', path, { query: { ...query, pageSize, pageToken }, signal });
    items.push(...(r[field] || []));
    pageToken = r.nextPageToken || '';
    if (!pageToken) break;
    more = true;
  }
  return { items, truncated: more && pageToken !== '' };
}

export const api = {
  health: (opts) => fetch('/healthz', { cache: 'no-store', ...opts }).then(async (r) => {
    let status = '';
    try {
      status = (await r.json()).status || '';
    } catch {
      // Not JSON: the HTTP status says it.
    }
    return { ok: r.ok, httpStatus: r.status, status };
  }),
  listTasks: (opts) => listAll('/v1/tasks', 'tasks', opts),
  getTask: (taskId) => call('GET', `/v1/tasks/${enc(taskId)}`),
  listJobs: (opts) => listAll('/v1/trainingJobs', 'jobs', opts),
  getJob: (jobId) => call('GET', `/v1/trainingJobs/${enc(jobId)}`),
  // No body: the request message has nothing but the path's job id.
  cancelJob: (jobId) => call('POST', `/v1/trainingJobs/${enc(jobId)}:cancel`),
  predict: (taskId, request) => call('POST', `/v1/tasks/${enc(taskId)}:predict`, { body: request, timeoutMs: 60000 }),
};

// Parses a text/event-stream incrementally (the WHATWG rules: lines end in
// \n, \r\n or \r; a blank line dispatches; `data:` lines join with \n;
// lines starting with ':' are comments).
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = '';
    this.reset();
  }

  reset() {
    this.event = '';
    this.data = [];
    this.id = null;
  }

  push(chunk) {
    this.buffer += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) break;
      // A lone \r at the very end may be the first half of \r\n.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  line(line) {
    if (line === '') {
      if (this.data.length || this.event) {
        this.onEvent({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
      }
      this.reset();
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
  }
}

const TERMINAL = new Set(['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED']);
export const isTerminal = (state) => TERMINAL.has(state);

// Watches one job until it is terminal. Calls
//   onUpdate(job, events)  for every WatchTrainingJobResponse (events only
//                          those not seen yet),
//   onStatus(text)         with what the watch is doing ("live",
//                          "reconnecting in 2 s", ...),
//   onEnd(error|null)      once: null when the job finished and the stream
//                          ended OK, an ApiError when it gave up.
// A dropped stream, an `end` with UNAVAILABLE, or a stream silent for longer
// than `stallMs` (the server sends a keepalive every ~15 s) is watched again
// from the last seq seen, after a backoff, at most `maxRetries` times in a
// row (a message that arrives resets the count).
export class JobWatch {
  constructor(jobId, { onUpdate, onStatus = () => {}, onEnd = () => {}, maxRetries = 6, stallMs = 45000 } = {}) {
    this.jobId = jobId;
    this.onUpdate = onUpdate;
    this.onStatus = onStatus;
    this.onEnd = onEnd;
    this.maxRetries = maxRetries;
    this.stallMs = stallMs;
    this.lastSeq = 0;
    this.stopped = false;
    this.controller = null;
    this.retryTimer = null;
  }

  start() {
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    if (this.controller) this.controller.abort();
  }

  async run() {
    let failures = 0;
    while (!this.stopped) {
      let result;
      try {
        result = await this.once();
      } catch (e) {
        result = { error: e instanceof ApiError ? e : new ApiError(String(e && e.message || e), { code: UNAVAILABLE }) };
      }
      if (this.stopped) return;
      if (result.progressed) failures = 0;
      if (result.done) {
        this.finish(null);
        return;
      }
      const error = result.error;
      if (error && !error.transient) {
        this.finish(error);
        return;
      }
      failures++;
      if (failures > this.maxRetries) {
        this.finish(error || new ApiError('the watch stream keeps dropping', { code: UNAVAILABLE }));
        return;
      }
      const delay = Math.min(15000, 500 * 2 ** (failures - 1)) * (0.8 + 0.4 * Math.random());
      this.onStatus(`reconnecting in ${(delay / 1000).toFixed(1)} s (try ${failures} of ${this.maxRetries})`);
      await new Promise((resolve) => {
        this.retryTimer = setTimeout(resolve, delay);
      });
    }
  }

  finish(error) {
    if (this.stopped) return;
    this.stopped = true;
    this.onEnd(error);
  }

  // One watch call. Resolves {done, progressed, error}.
  async once() {
    const controller = new AbortController();
    this.controller = controller;
    let stalled = false;
    let stallTimer = null;
    const arm = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => {
        stalled = true;
        controller.abort();
      }, this.stallMs);
    };
    arm();
    let progressed = false;
    let ended = null;  // the `end` event's status
    try {
      let response;
      try {
        response = await fetch(`/v1/trainingJobs/${enc(this.jobId)}:watch?afterSeq=${this.lastSeq}`, {
          headers: headers({ Accept: 'text/event-stream' }), signal: controller.signal, cache: 'no-store',
        });
      } catch {
        if (this.stopped) return { done: false };
        return { error: new ApiError(stalled ? 'no answer to the watch' : 'the server cannot be reached',
          { code: UNAVAILABLE }) };
      }
      if (!response.ok) return { error: await errorFrom(response) };
      this.onStatus('live');
      const parser = new SseParser((ev) => {
        if (ev.event === 'update') {
          const message = JSON.parse(ev.data);
          const fresh = (message.events || []).filter((e) => Number(e.seq) > this.lastSeq);
          for (const e of fresh) this.lastSeq = Math.max(this.lastSeq, Number(e.seq));
          if (ev.id && /^\d+$/.test(ev.id)) this.lastSeq = Math.max(this.lastSeq, Number(ev.id));
          progressed = true;
          this.onUpdate(message.job || null, fresh);
        } else if (ev.event === 'end') {
          try {
            ended = JSON.parse(ev.data);
          } catch {
            ended = { code: 2, message: `unreadable end of stream: ${ev.data.slice(0, 200)}` };
          }
        }
      });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch {
          break;  // dropped (or stalled and aborted): watch again
        }
        if (chunk.done) break;
        arm();
        parser.push(decoder.decode(chunk.value, { stream: true }));
        // After `end` the server closes the stream: read on to its close
        // rather than cancel it (a cancelled body is a failed request).
      }
      parser.push(decoder.decode());
      if (ended) {
        if (!ended.code) return { done: true, progressed };
        return { progressed, error: new ApiError(ended.message || 'the watch failed', { code: ended.code, httpStatus: 200 }) };
      }
      if (this.stopped) return { done: false };
      return { progressed, error: new ApiError(stalled ? 'the watch went silent' : 'the watch stream dropped',
        { code: UNAVAILABLE }) };
    } finally {
      clearTimeout(stallTimer);
    }
  }
}

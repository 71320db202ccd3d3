// The console's REST client (server/http/console/api.js) against a fake
// fetch(): requests as the gateway expects them, google.rpc.Status errors as
// ApiError, listings over every page, and a job watch over Server-Sent Events
// that resumes from the last event seen and gives up when it should.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';

import { ApiError, JobWatch, api, call, isTerminal, setApiKey } from '../../../server/http/console/api.js';

const realFetch = globalThis.fetch;
let requests;
let handlers;

// The next requests are answered by `hs`, one each, in order.
function answer(...hs) {
  handlers.push(...hs);
}

beforeEach(() => {
  requests = [];
  handlers = [];
  globalThis.fetch = async (url, init = {}) => {
    requests.push({ url, init });
    const h = handlers.shift();
    if (!h) throw new Error(`unexpected request ${url}`);
    return h(url, init);
  };
});

afterEach(() => {
  globalThis.fetch = realFetch;
  setApiKey('');
});

const json = (status, body, statusText = '') => () =>
  new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, statusText });

// An event stream of `chunks` (strings, or bytes); closes after them unless
// `open`. Aborting the request errors the body, as a real fetch does.
const sse = (chunks, { open = false } = {}) => (url, init) => {
  const body = new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(typeof c === 'string' ? new TextEncoder().encode(c) : c);
      if (!open) controller.close();
      init.signal.addEventListener('abort', () => controller.error(new DOMException('aborted', 'AbortError')));
    },
  });
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
};

const update = (seqs, extra = {}) => {
  const m = { job: { jobId: 'j1', state: 'JOB_STATE_RUNNING' }, events: seqs.map((s) => ({ seq: String(s) })), ...extra };
  return `event: update\n${seqs.length ? `id: ${seqs[seqs.length - 1]}\n` : ''}data: ${JSON.stringify(m)}\n\n`;
};
const end = (code = 0, message = '') => `event: end\ndata: ${JSON.stringify({ code, message })}\n\n`;

// Starts a watch of j1; `ended` resolves with what onEnd got.
function watch(opts = {}) {
  const seen = { updates: [], statuses: [] };
  seen.ended = new Promise((resolve) => {
    seen.watch = new JobWatch('j1', {
      onUpdate: (job, events) => seen.updates.push(events.map((e) => Number(e.seq))),
      onStatus: (s) => seen.statuses.push(s),
      onEnd: resolve,
      ...opts,
    }).start();
  });
  return seen;
}

// --- call() ------------------------------------------------------------------

test('a GET: the query without empty values, JSON accepted, nothing cached', async () => {
  answer(json(200, { tasks: [{ taskId: 't' }] }));
  const r = await call('GET', '/v1/tasks', { query: { pageSize: 2, pageToken: '', a: undefined, b: null, name: 'a b&c' } });
  assert.deepEqual(r, { tasks: [{ taskId: 't' }] });
  assert.equal(requests[0].url, '/v1/tasks?pageSize=2&name=a+b%26c');
  assert.equal(requests[0].init.method, 'GET');
  assert.equal(requests[0].init.cache, 'no-store');
  assert.deepEqual(requests[0].init.headers, { Accept: 'application/json' });
  assert.equal(requests[0].init.body, undefined);
});

test('a POST sends its body as JSON; an empty answer is {}', async () => {
  answer(json(200, ''));
  assert.deepEqual(await call('POST', '/v1/trainingJobs/j1:cancel', { body: { reason: 'x' } }), {});
  assert.equal(requests[0].init.body, '{"reason":"x"}');
  assert.equal(requests[0].init.headers['Content-Type'], 'application/json');
});

test('the API key goes as a bearer token, and not once forgotten', async () => {
  answer(json(200, {}), json(200, {}));
  setApiKey('s3cret');
  await call('GET', '/v1/tasks');
  setApiKey('');
  await call('GET', '/v1/tasks');
  assert.equal(requests[0].init.headers.Authorization, 'Bearer s3cret');
  assert.equal(requests[1].init.headers.Authorization, undefined);
});

test('path ids are escaped', async () => {
  answer(json(200, {}), json(200, {}));
  await api.getTask('a/b?c');
  await api.predict('t 1', { texts: ['x'] });
  assert.equal(requests[0].url, '/v1/tasks/a%2Fb%3Fc');
  assert.equal(requests[1].url, '/v1/tasks/t%201:predict');
  assert.equal(requests[1].init.body, '{"texts":["x"]}');
});

test('a google.rpc.Status error is an ApiError with its code and message', async () => {
  answer(json(404, { code: 5, message: 'task "x" not found' }));
  const e = await call('GET', '/v1/tasks/x').catch((err) => err);
  assert.ok(e instanceof ApiError);
  assert.equal(e.message, 'task "x" not found');
  assert.equal(e.code, 5);
  assert.equal(e.codeName, 'NOT_FOUND');
  assert.equal(e.httpStatus, 404);
  assert.equal(e.transient, false);
  assert.equal(e.unauthenticated, false);
});

test('401 and 403 are unauthenticated', async () => {
  answer(json(401, { code: 16, message: 'no key' }), json(403, { code: 7, message: 'not yours' }));
  for (const name of ['UNAUTHENTICATED', 'PERMISSION_DENIED']) {
    const e = await call('GET', '/v1/tasks').catch((err) => err);
    assert.equal(e.codeName, name);
    assert.equal(e.unauthenticated, true);
    assert.equal(e.transient, false);
  }
});

test('an error body that is not JSON: its text, trimmed, code UNKNOWN', async () => {
  answer(json(502, '  <html>bad gateway</html>\n'));
  const e = await call('GET', '/v1/tasks').catch((err) => err);
  assert.equal(e.message, '<html>bad gateway</html>');
  assert.equal(e.codeName, 'UNKNOWN');
  assert.equal(e.transient, true);
});

test('an empty error body: the status line', async () => {
  answer(json(500, '', 'Internal Server Error'), json(500, ''));
  assert.equal((await call('GET', '/v1/tasks').catch((err) => err)).message, 'Internal Server Error');
  assert.equal((await call('GET', '/v1/tasks').catch((err) => err)).message, 'HTTP 500');
});

test('UNAVAILABLE, 429, 503 and 504 are worth retrying; INVALID_ARGUMENT is not', async () => {
  assert.equal(new ApiError('x', { code: 14, httpStatus: 200 }).transient, true);
  for (const s of [429, 503, 504]) assert.equal(new ApiError('x', { code: 8, httpStatus: s }).transient, true, String(s));
  assert.equal(new ApiError('x', { code: 3, httpStatus: 400 }).transient, false);
  assert.equal(new ApiError('x', { code: 99, httpStatus: 400 }).codeName, 'code 99');
});

test('no answer at all: UNAVAILABLE, HTTP status 0, worth retrying', async () => {
  answer(() => {
    throw new TypeError('fetch failed');
  });
  const e = await call('GET', '/v1/tasks').catch((err) => err);
  assert.ok(e instanceof ApiError);
  assert.equal(e.message, 'the server cannot be reached');
  assert.equal(e.codeName, 'UNAVAILABLE');
  assert.equal(e.httpStatus, 0);
  assert.equal(e.transient, true);
});

test('no answer within timeoutMs: DEADLINE_EXCEEDED, the request aborted', async () => {
  answer((url, init) => new Promise((resolve, reject) => {
    init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
  }));
  const e = await call('GET', '/v1/tasks', { timeoutMs: 20 }).catch((err) => err);
  assert.equal(e.codeName, 'DEADLINE_EXCEEDED');
  assert.equal(e.message, 'no answer within 0.02 s');
  assert.equal(requests[0].init.signal.aborted, true);
});

test('aborted by the caller: the abort itself, not an ApiError', async () => {
  answer((url, init) => new Promise((resolve, reject) => {
    init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
  }));
  const caller = new AbortController();
  const pending = call('GET', '/v1/tasks', { signal: caller.signal });
  caller.abort();
  const e = await pending.catch((err) => err);
  assert.equal(e.name, 'AbortError');
  assert.ok(!(e instanceof ApiError));
});

// --- listings ----------------------------------------------------------------

test('a listing follows nextPageToken to the last page', async () => {
  answer(json(200, { tasks: [{ taskId: 'a' }, { taskId: 'b' }], nextPageToken: 'p2' }),
    json(200, { tasks: [{ taskId: 'c' }] }));
  const r = await api.listTasks({ pageSize: 2 });
  assert.deepEqual(r.items.map((t) => t.taskId), ['a', 'b', 'c']);
  assert.equal(r.truncated, false);
  assert.equal(requests[0].url, '/v1/tasks?pageSize=2');
  assert.equal(requests[1].url, '/v1/tasks?pageSize=2&pageToken=p2');
});

test('a listing stops at maxItems and says it is truncated', async () => {
  answer(json(200, { jobs: [{ jobId: '1' }, { jobId: '2' }], nextPageToken: 'p2' }),
    json(200, { jobs: [{ jobId: '3' }, { jobId: '4' }], nextPageToken: 'p3' }));
  const r = await api.listJobs({ pageSize: 2, maxItems: 4 });
  assert.deepEqual(r.items.map((j) => j.jobId), ['1', '2', '3', '4']);
  assert.equal(r.truncated, true);
  assert.equal(requests.length, 2);
});

test('an empty listing (the field left out)', async () => {
  answer(json(200, {}));
  assert.deepEqual(await api.listTasks(), { items: [], truncated: false });
});

// --- JobWatch ------------------------------------------------------------------

test('terminal states', () => {
  for (const s of ['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED']) assert.equal(isTerminal(s), true, s);
  for (const s of ['JOB_STATE_RUNNING', 'JOB_STATE_CANCELLING', undefined]) assert.equal(isTerminal(s), false, String(s));
});

test('a watch hands over each event once and ends with the stream\'s OK end', async () => {
  answer(sse([': keepalive\n\n', update([1, 2]), update([2, 3]), update([]), end()]));
  const seen = watch();
  assert.equal(await seen.ended, null);
  assert.deepEqual(seen.updates, [[1, 2], [3], []]);
  assert.deepEqual(seen.statuses, ['live']);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].url, '/v1/trainingJobs/j1:watch?afterSeq=0');
  assert.equal(requests[0].init.headers.Accept, 'text/event-stream');
});

test('a dropped stream is watched again from the last seq seen', async () => {
  answer(sse([update([1, 2]), update([2, 3]).slice(0, 20)]), sse([update([3, 4]), end()]));
  const seen = watch();
  assert.equal(await seen.ended, null);
  // The update cut off by the drop never arrived: 3 comes with the second stream.
  assert.deepEqual(seen.updates, [[1, 2], [3, 4]]);
  assert.equal(requests.length, 2);
  assert.equal(requests[1].url, '/v1/trainingJobs/j1:watch?afterSeq=2');
  assert.match(seen.statuses[1], /^reconnecting in \d+\.\d s \(try 1 of 6\)$/);
  assert.equal(seen.statuses[2], 'live');
});

test('an end with UNAVAILABLE is watched again too', async () => {
  answer(sse([update([5]), end(14, 'draining')]), sse([end()]));
  const seen = watch();
  assert.equal(await seen.ended, null);
  assert.equal(requests[1].url, '/v1/trainingJobs/j1:watch?afterSeq=5');
});

test('an end with another error code ends the watch with it', async () => {
  answer(sse([update([1]), end(9, 'the dataset was deleted')]));
  const seen = watch();
  const e = await seen.ended;
  assert.ok(e instanceof ApiError);
  assert.equal(e.codeName, 'FAILED_PRECONDITION');
  assert.equal(e.message, 'the dataset was deleted');
  assert.equal(requests.length, 1);
});

test('an unreadable end is an error, not a success', async () => {
  answer(sse(['event: end\ndata: {oops\n\n']));
  const e = await watch().ended;
  assert.equal(e.codeName, 'UNKNOWN');
  assert.match(e.message, /^unreadable end of stream: \{oops/);
});

test('an HTTP error on the watch ends it with the server\'s status', async () => {
  answer(json(404, { code: 5, message: 'job "j1" not found' }));
  const e = await watch().ended;
  assert.equal(e.codeName, 'NOT_FOUND');
  assert.equal(e.httpStatus, 404);
  assert.equal(requests.length, 1);
});

test('after maxRetries drops in a row the watch gives up', async () => {
  answer(sse([]), () => {
    throw new TypeError('fetch failed');
  });
  const seen = watch({ maxRetries: 1 });
  const e = await seen.ended;
  assert.equal(e.codeName, 'UNAVAILABLE');
  assert.equal(e.message, 'the server cannot be reached');
  assert.equal(requests.length, 2);
});

test('a stream silent for stallMs is dropped as stalled', async () => {
  answer(sse([update([1])], { open: true }));
  const seen = watch({ maxRetries: 0, stallMs: 50 });
  const e = await seen.ended;
  assert.equal(e.message, 'the watch went silent');
  assert.equal(e.transient, true);
  assert.deepEqual(seen.updates, [[1]]);
  assert.equal(requests[0].init.signal.aborted, true);
});

test('UTF-8 cut between chunks arrives whole', async () => {
  const bytes = new TextEncoder().encode(update([1], { job: { jobId: 'j1', errorMessage: 'café 😀' } }) + end());
  const at = bytes.indexOf(0xf0) + 2;  // inside the emoji's four bytes
  answer(sse([bytes.slice(0, bytes.indexOf(0xc3) + 1), bytes.slice(bytes.indexOf(0xc3) + 1, at), bytes.slice(at)]));
  let job;
  const seen = watch({ onUpdate: (j) => { job = j; } });
  assert.equal(await seen.ended, null);
  assert.equal(job.errorMessage, 'café 😀');
});

test('stop() aborts the stream and calls nothing after', async () => {
  answer(sse([update([1])], { open: true }));
  const seen = watch();
  while (seen.updates.length === 0) await new Promise((r) => setTimeout(r, 5));
  seen.watch.stop();
  const outcome = await Promise.race([seen.ended.then(() => 'ended'), new Promise((r) => setTimeout(() => r('quiet'), 100))]);
  assert.equal(outcome, 'quiet');
  assert.equal(requests[0].init.signal.aborted, true);
  assert.equal(requests.length, 1);
});

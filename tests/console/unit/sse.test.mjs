// The console's Server-Sent Events parser (SseParser, server/http/console/api.js):
// the text/event-stream rules it follows, and the same events however the
// stream is cut into chunks.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SseParser } from '../../../server/http/console/api.js';

// The events a parser emits for `chunks`, pushed one after another.
function parse(...chunks) {
  const events = [];
  const parser = new SseParser((e) => events.push(e));
  for (const c of chunks) parser.push(c);
  return events;
}

test('an event: its type, its data and its id', () => {
  assert.deepEqual(parse('event: update\nid: 7\ndata: {"a":1}\n\n'),
    [{ event: 'update', data: '{"a":1}', id: '7' }]);
});

test('an event without an event field is a "message" with no id', () => {
  assert.deepEqual(parse('data: hello\n\n'), [{ event: 'message', data: 'hello', id: null }]);
});

test('nothing is dispatched before the blank line that ends the event', () => {
  assert.deepEqual(parse('event: update\ndata: x\n'), []);
  assert.deepEqual(parse('event: update\ndata: x\n', '\n'), [{ event: 'update', data: 'x', id: null }]);
});

test('data lines join with \\n, in order', () => {
  assert.deepEqual(parse('data: one\ndata: two\ndata:\ndata: four\n\n'),
    [{ event: 'message', data: 'one\ntwo\n\nfour', id: null }]);
});

test('one space after the colon is dropped, a second one is data', () => {
  assert.deepEqual(parse('data:x\n\ndata: x\n\ndata:  x\n\n').map((e) => e.data), ['x', 'x', ' x']);
});

test('a colon inside the value is kept', () => {
  assert.deepEqual(parse('data: {"a":"b:c"}\n\n').map((e) => e.data), ['{"a":"b:c"}']);
});

test('a line without a colon is a field with an empty value', () => {
  assert.deepEqual(parse('data\ndata\n\n').map((e) => e.data), ['\n']);
});

test('comments (keepalives) and unknown fields are skipped', () => {
  assert.deepEqual(parse(': keepalive\n\n'), []);
  assert.deepEqual(parse(':\n: keepalive\nretry: 1000\nfoo: bar\nevent: end\n: more\ndata: {}\n\n'),
    [{ event: 'end', data: '{}', id: null }]);
});

test('blank lines between events dispatch nothing more', () => {
  assert.deepEqual(parse('\n\n\ndata: a\n\n\n\ndata: b\n\n').map((e) => e.data), ['a', 'b']);
});

test('event type and data do not leak into the next event', () => {
  assert.deepEqual(parse('event: update\nid: 3\ndata: a\n\ndata: b\n\n'), [
    { event: 'update', data: 'a', id: '3' },
    { event: 'message', data: 'b', id: null },
  ]);
});

test('lines end in \\n, \\r\\n or \\r', () => {
  const want = [{ event: 'update', data: 'a\nb', id: '1' }, { event: 'end', data: '{}', id: null }];
  assert.deepEqual(parse('event: update\nid: 1\ndata: a\ndata: b\n\nevent: end\ndata: {}\n\n'), want);
  assert.deepEqual(parse('event: update\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\nevent: end\r\ndata: {}\r\n\r\n'), want);
  // A lone \r as the last character waits for the next one (it may be
  // the first half of \r\n): here a comment line.
  assert.deepEqual(parse('event: update\rid: 1\rdata: a\rdata: b\r\revent: end\rdata: {}\r\r: next'), want);
  assert.deepEqual(parse('event: update\r\nid: 1\rdata: a\ndata: b\r\n\revent: end\ndata: {}\r\n\n'), want);
});

test('\\r\\n cut between its \\r and its \\n is one line end', () => {
  // Were the \r taken alone, the \n after it would be a blank line that
  // dispatches the event early, without its second data line.
  assert.deepEqual(parse('data: a\r', '\ndata: b\r', '\n\r', '\n'), [{ event: 'message', data: 'a\nb', id: null }]);
});

test('a lone \\r at a chunk\'s end ends its line once the next chunk starts with anything but \\n', () => {
  assert.deepEqual(parse('data: a\r', 'data: b\r', '\r'), []);
  assert.deepEqual(parse('data: a\r', 'data: b\r', '\r', 'data: c'), [{ event: 'message', data: 'a\nb', id: null }]);
});

test('an event cut mid-line, mid-field name and mid-value arrives whole', () => {
  assert.deepEqual(parse('ev', 'ent: upd', 'ate\nda', 'ta: {"jo', 'b":1}', '\n', '\n'),
    [{ event: 'update', data: '{"job":1}', id: null }]);
});

test('any cut of a stream, and one character at a time, gives the same events', () => {
  const stream = ': keepalive\r\nevent: update\r\nid: 12\r\ndata: {"events":[{"seq":"12"}]}\r\n\r\n' +
    'data: line one\rdata: line two\r\r' +
    'event: end\ndata: {"code":0}\n\n';
  const want = parse(stream);
  assert.deepEqual(want, [
    { event: 'update', data: '{"events":[{"seq":"12"}]}', id: '12' },
    { event: 'message', data: 'line one\nline two', id: null },
    { event: 'end', data: '{"code":0}', id: null },
  ]);
  for (let i = 0; i <= stream.length; i++) {
    for (let j = i; j <= stream.length; j += 7) {
      assert.deepEqual(parse(stream.slice(0, i), stream.slice(i, j), stream.slice(j)), want, `cut at ${i} and ${j}`);
    }
  }
  assert.deepEqual(parse(...stream), want);
});

test('text after the last blank line waits for more', () => {
  const events = [];
  const parser = new SseParser((e) => events.push(e));
  parser.push('data: a\n\ndata: b');
  assert.deepEqual(events.map((e) => e.data), ['a']);
  parser.push('c\n\n');
  assert.deepEqual(events.map((e) => e.data), ['a', 'bc']);
});

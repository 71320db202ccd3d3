// The console's formatting (server/http/console/format.js): int64 fields that
// arrive as strings, absent or unreadable values, and the selection metric
// the server names.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  bestMetricText, bytes, kindName, metricValue, micros, microsTime, num, percent, selectionOf, selectionText,
  stateName,
} from '../../../server/http/console/format.js';

test('num: int64 strings and numbers; anything unreadable is 0', () => {
  assert.equal(num('1234567890123'), 1234567890123);
  assert.equal(num(42), 42);
  assert.equal(num('-3.5'), -3.5);
  assert.equal(num(''), 0);
  for (const bad of [undefined, null, NaN, Infinity, -Infinity, 'abc', {}]) assert.equal(num(bad), 0, String(bad));
});

test('bytes: three significant digits in B, kB, MB, GB, TB (powers of 1000)', () => {
  assert.equal(bytes(1), '1 B');
  assert.equal(bytes(999), '999 B');
  assert.equal(bytes(1000), '1.00 kB');
  assert.equal(bytes(1234), '1.23 kB');
  assert.equal(bytes(12345), '12.3 kB');
  assert.equal(bytes(123456), '123 kB');
  assert.equal(bytes('5000000'), '5.00 MB');
  assert.equal(bytes('3500000000'), '3.50 GB');
  assert.equal(bytes(2e12), '2.00 TB');
});

test('bytes: the unit is chosen after rounding', () => {
  assert.equal(bytes(9999), '10.0 kB');
  assert.equal(bytes(99999), '100 kB');
  assert.equal(bytes(999499), '999 kB');
  assert.equal(bytes(999500), '1.00 MB');
  assert.equal(bytes(999999), '1.00 MB');
  assert.equal(bytes(999999999), '1.00 GB');
});

test('bytes: past the largest unit the number grows', () => {
  assert.equal(bytes(1e15), '1000 TB');
  assert.equal(bytes(5e15), '5000 TB');
});

test('bytes: zero, negative and unreadable sizes show a dash', () => {
  for (const none of [0, '0', -1, '-2048', undefined, null, NaN, 'abc']) assert.equal(bytes(none), '—', String(none));
});

test('percent: a fraction as a percentage, one digit by default', () => {
  assert.equal(percent(0.1234), '12.3%');
  assert.equal(percent(1), '100.0%');
  assert.equal(percent('0.5', 0), '50%');
  assert.equal(percent(0.98765, 2), '98.77%');
  assert.equal(percent(-0.25), '-25.0%');
  for (const none of [undefined, null, NaN, 'abc']) assert.equal(percent(none), '0.0%', String(none));
});

test('selectionOf: the label, value and form the server sent; none from an older server', () => {
  assert.deepEqual(selectionOf({ selection: { field: 'spearman', label: 'val Spearman', value: -0.5, fraction: false } }),
    { label: 'val Spearman', value: -0.5, fraction: false });
  // proto3 JSON: a 0 value may be absent; int64-like strings are read.
  assert.deepEqual(selectionOf({ selection: { label: 'val micro-F1', fraction: true } }),
    { label: 'val micro-F1', value: 0, fraction: true });
  for (const none of [undefined, {}, { selection: {} }, { valAccuracy: 0.5 }]) {
    assert.equal(selectionOf(none).label, 'val metric', JSON.stringify(none));
    assert.ok(Number.isNaN(selectionOf(none).value));
  }
});

test('kindName: readable names; an unknown kind shows as sent', () => {
  assert.equal(kindName('TASK_KIND_SEQUENCE_CLASSIFICATION'), 'Classification');
  assert.equal(kindName('TASK_KIND_MULTI_LABEL_CLASSIFICATION'), 'Multi-label');
  assert.equal(kindName('TASK_KIND_REGRESSION'), 'Regression');
  assert.equal(kindName('TASK_KIND_TOKEN_CLASSIFICATION'), 'Token classification');
  assert.equal(kindName('TASK_KIND_EXTRACTIVE_QA'), 'Extractive QA');
  assert.equal(kindName(undefined), 'Classification');
  assert.equal(kindName('TASK_KIND_UNSPECIFIED'), 'Classification');
  assert.equal(kindName('TASK_KIND_NEW'), 'TASK_KIND_NEW');
});

test('stateName: the enum without its prefix, capitalised, underscores as spaces', () => {
  assert.equal(stateName('JOB_STATE_SUCCEEDED'), 'Succeeded');
  assert.equal(stateName('JOB_STATE_RUNNING'), 'Running');
  assert.equal(stateName('TASK_STATE_READY'), 'Ready');
  assert.equal(stateName('TASK_STATE_PENDING'), 'Pending');
  assert.equal(stateName('JOB_STATE_UNSPECIFIED'), 'Unspecified');
  assert.equal(stateName('A_NEWER_STATE'), 'A newer state');
  assert.equal(stateName(''), 'Unknown');
  assert.equal(stateName(undefined), 'Unknown');
});

test('metricValue: a percentage for a fraction, three decimals for a correlation, a dash for none', () => {
  assert.equal(metricValue({ fraction: true }, 0.875), '87.5%');
  assert.equal(metricValue({ fraction: false }, 0.91234), '0.912');
  assert.equal(metricValue({ fraction: false }, -0.5), '-0.500');
  assert.equal(metricValue({ fraction: false }, undefined), '0.000');
  assert.equal(metricValue({ fraction: true }, NaN), '—');
});

test('bestMetricText: the server-named metric at the best epoch, whatever the kind; a dash before any epoch', () => {
  const sel = (label, value, fraction) => ({ field: 'f', label, value, fraction });
  assert.equal(bestMetricText({}), '—');
  assert.equal(bestMetricText({ bestMetrics: { epoch: '0', valAccuracy: 0.5 } }), '—');
  assert.equal(bestMetricText({ bestMetrics: { epoch: '2', selection: sel('val accuracy', 0.8125, true) } }),
    'val accuracy 81.3% (epoch 2)');
  assert.equal(bestMetricText({ bestMetrics: { epoch: 3, selection: sel('val Spearman', 0.91234, false) } }),
    'val Spearman 0.912 (epoch 3)');
  // A label this page has never seen shows as sent: the page keeps no table of metrics.
  assert.equal(bestMetricText({ bestMetrics: { epoch: '1', selection: sel('val Kendall tau', -0.25, false) } }),
    'val Kendall tau -0.250 (epoch 1)');
  assert.equal(selectionText({ selection: sel('val SQuAD F1', 0.5, true) }), 'val SQuAD F1 50.0%');
  // From a server without selection: no figure.
  assert.equal(bestMetricText({ bestMetrics: { epoch: '4', microF1: 0.5 } }), 'val metric — (epoch 4)');
});

test('micros and microsTime: microseconds since the epoch, in the local time zone', () => {
  const us = '1700000000123456';
  const date = new Date(1700000000123);
  assert.equal(micros(us), date.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' }));
  assert.equal(microsTime(us), date.toLocaleTimeString(undefined, { hour12: false }));
  // Not the same text as a date read as milliseconds or seconds.
  assert.notEqual(micros(us), new Date(1700000000123456).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' }));
});

test('micros and microsTime: no time is a dash and an empty text', () => {
  for (const none of [0, '0', undefined, null, 'abc']) {
    assert.equal(micros(none), '—', String(none));
    assert.equal(microsTime(none), '', String(none));
  }
});

// The chart's axis ticks (ticks() in server/http/console/chart.js): round
// values (1, 2, 2.5 or 5 times a power of ten apart) covering the range.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ticks } from '../../../server/http/console/chart.js';

test('round ticks over the common ranges', () => {
  assert.deepEqual(ticks(0, 1, 5), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(ticks(0, 10, 5), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(ticks(0, 1, 4), [0, 0.25, 0.5, 0.75, 1]);
  assert.deepEqual(ticks(-1, 1, 4), [-1, -0.5, 0, 0.5, 1]);
  assert.deepEqual(ticks(0, 1234, 6), [0, 250, 500, 750, 1000, 1250].filter((t) => t <= 1234));
  assert.deepEqual(ticks(0, 3, 3), [0, 1, 2, 3]);
});

test('no floating-point noise in the values', () => {
  assert.deepEqual(ticks(0, 0.3, 3), [0, 0.1, 0.2, 0.3]);
  assert.deepEqual(ticks(0, 0.7, 7), [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
  for (const t of ticks(-0.3, 0.3, 6)) assert.ok(!Object.is(t, -0) && String(t).length <= 4, `tick ${t}`);
});

test('ticks start at the first multiple of the step at or above the low end', () => {
  assert.deepEqual(ticks(3, 17, 7), [4, 6, 8, 10, 12, 14, 16]);
  assert.deepEqual(ticks(3, 17, 5), [5, 10, 15]);
  assert.deepEqual(ticks(0.05, 1, 5), [0.2, 0.4, 0.6, 0.8, 1]);
});

test('an empty or reversed range is its low end alone', () => {
  assert.deepEqual(ticks(5, 5), [5]);
  assert.deepEqual(ticks(2, 1), [2]);
  assert.deepEqual(ticks(0, 0, 5), [0]);
});

test('any range: in range, evenly spaced by a round step, about as many as asked', () => {
  const round = [1, 2, 2.5, 5, 10];
  for (const [lo, hi] of [[0, 0.013], [0, 7], [0, 42], [0, 1e6], [-1, 0.37], [10, 10.5], [0, 999], [0, 1001]]) {
    for (const count of [3, 4, 5, 6, 10]) {
      const t = ticks(lo, hi, count);
      const where = `ticks(${lo}, ${hi}, ${count}) = ${t}`;
      assert.ok(t.length >= 2 && t.length <= 2 * count + 1, where);
      assert.ok(t[0] >= lo - 1e-12 && t[t.length - 1] <= hi + 1e-12, where);
      const step = t[1] - t[0];
      const mantissa = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
      assert.ok(round.some((r) => Math.abs(mantissa - r) < 1e-6), `${where}: step ${step}`);
      for (let i = 1; i < t.length; i++) assert.ok(Math.abs(t[i] - t[i - 1] - step) < step * 1e-6, where);
      // The step is the smallest round one that gives at most `count` intervals.
      assert.ok(step >= (hi - lo) / count - 1e-12, where);
    }
  }
});

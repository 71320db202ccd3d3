#!/usr/bin/env node
// ONNX Runtime side of the peer benchmark (bench/peers/run.sh).
//
//   node bench/peers/ort_bench.js --model model.onnx --check check.json
//   node bench/peers/ort_bench.js --model model.onnx --batch 32 --seq 128 --seconds 20 [--vocab V]
//
// fp32, CPU EP, intraOpNumThreads 2, interOpNumThreads 1, graphOptimizationLevel 'all'.
// --check: runs the cases export_onnx.py wrote (inputs + the PyTorch module's
// logits) and exits 1 when a logit differs by more than the file's tolerance.
// Otherwise times session.run on random ids and prints one JSON line with
// seq/s and the per-call latency p50.
'use strict';
const path = require('path');
const fs = require('fs');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function flags() {
  const out = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    if (!a[i].startsWith('--')) throw new Error(`unexpected argument ${a[i]}`);
    const eq = a[i].indexOf('=');
    if (eq >= 0) out[a[i].slice(2, eq)] = a[i].slice(eq + 1);
    else out[a[i].slice(2)] = a[++i];
  }
  return out;
}

function tensor2d(rows) {
  const b = rows.length, n = rows[0].length;
  const data = new BigInt64Array(b * n);
  for (let i = 0; i < b; i++) for (let j = 0; j < n; j++) data[i * n + j] = BigInt(rows[i][j]);
  return new ort.Tensor('int64', data, [b, n]);
}

async function main() {
  const f = flags();
  const threads = Number(f.threads || 2);
  const session = await ort.InferenceSession.create(f.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  if (f.check) {
    const check = JSON.parse(fs.readFileSync(f.check, 'utf8'));
    let worst = 0;
    for (const c of check.cases) {
      const out = await session.run({
        input_ids: tensor2d(c.input_ids),
        attention_mask: tensor2d(c.attention_mask),
        token_type_ids: tensor2d(c.token_type_ids),
      });
      const got = out.logits.data;
      const want = c.logits.flat();
      if (got.length !== want.length) throw new Error(`logits size ${got.length} != ${want.length}`);
      for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
    }
    console.log(`CHECK ORT vs torch module: max abs diff ${worst.toExponential(3)} over ${check.cases.length} ` +
                `batches (tolerance ${check.tolerance})`);
    if (!(worst <= check.tolerance)) {
      console.error('FAILED: ONNX Runtime disagrees with the PyTorch module');
      process.exit(1);
    }
    return;
  }
  const batch = Number(f.batch || 32), seq = Number(f.seq || 128);
  const seconds = Number(f.seconds || 20), vocab = Number(f.vocab || 2000);
  const lo = Math.min(1000, Math.floor(vocab / 2));
  // Deterministic pseudo-random ids (LCG), mask all ones, type ids zero.
  let s = 12345;
  const ids = new BigInt64Array(batch * seq);
  for (let i = 0; i < ids.length; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    ids[i] = BigInt(lo + (s % (vocab - lo)));
  }
  const feeds = {
    input_ids: new ort.Tensor('int64', ids, [batch, seq]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(batch * seq).fill(1n), [batch, seq]),
    token_type_ids: new ort.Tensor('int64', new BigInt64Array(batch * seq), [batch, seq]),
  };
  for (let i = 0; i < 2; i++) await session.run(feeds);  // warm-up
  const ms = [];
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (ms.length < 3 || elapsed < seconds) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const t1 = process.hrtime.bigint();
    ms.push(Number(t1 - t0) / 1e6);
    elapsed = Number(t1 - start) / 1e9;
  }
  const sorted = [...ms].sort((a, b) => a - b);
  const total = ms.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({
    engine: 'onnxruntime-node', version: require(path.join(__dirname, 'node_modules', 'onnxruntime-node',
                                                              'package.json')).version,
    dtype: 'fp32', batch, seq, threads, calls: ms.length,
    seq_per_s: Number((batch * ms.length / (total / 1000)).toFixed(4)),
    p50_ms: Number(sorted[Math.floor(sorted.length / 2)].toFixed(3)),
    min_ms: Number(sorted[0].toFixed(3)),
  }));
}

main().catch((e) => { console.error(`ort_bench: ${e.stack || e}`); process.exit(1); });

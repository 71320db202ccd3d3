'use strict';
// docs/openapi.yaml against the real gateway (server/http/).
//
//   (a) The document is valid OpenAPI 3.0 (@apidevtools/swagger-parser,
//       found through NODE_PATH: $ADAPTERD_TOOLS/node_modules), and follows
//       the conventions the gateway's JSON has: every int64/uint64 is a
//       string, every operation has an operationId, a tag, a summary and a
//       google.rpc.Status error response, and every RPC of the proto's
//       service is an operation.
//   (b) Route parity both ways with `adapterd http-routes` (METHOD PATTERN
//       RPC per line): every server route is a spec operation whose
//       operationId is the RPC, and every spec operation that is not the
//       gateway's own (x-adapterd-gateway) is a server route.
//   (c) A real adapterd (tiny random model) probed with every spec
//       operation: path parameters name things that do not exist, every
//       documented query parameter and header is sent, JSON bodies are the
//       spec's examples. No answer may be the gateway's no-route 404 or a
//       405, nor reject a documented parameter or example; error bodies are
//       google.rpc.Status with the HTTP status of their code; 200 bodies
//       match the spec's schema exactly (no member missing or unknown). A
//       made-up path must be the no-route 404, and a wrong method 405, so
//       the probe can fail.
//
// Environment: ADAPTERD_BIN, MAKE_MODEL_BIN (the binaries),
// ADAPTERD_SOURCE_DIR (the checkout; default: two levels up), NODE_PATH.
// Exits nonzero with a message on the first failure; the server it started
// is killed on every way out. Every wait is bounded.

const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const SOURCE_DIR = process.env.ADAPTERD_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const SPEC_PATH = path.join(SOURCE_DIR, 'docs', 'openapi.yaml');
const PROTO_PATH = path.join(SOURCE_DIR, 'proto', 'adapterd', 'v1', 'adapterd_service.proto');
const ADAPTERD_BIN = process.env.ADAPTERD_BIN;
const MAKE_MODEL_BIN = process.env.MAKE_MODEL_BIN || process.env.ADAPTERD_MAKE_MODEL_BIN;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const PORT_WAIT_MS = 60000;
const HEALTH_WAIT_MS = 60000;
const REQUEST_TIMEOUT_MS = 15000;
const WATCHDOG_MS = 110000;  // under the ctest TIMEOUT (120 s)

// What each path parameter is filled with: things that do not exist.
const PATH_VALUES = {
  task_id: 'nosuchtask',
  job_id: 'job-0000000000000000000000',
  dataset_id: 'nosuchdataset',
  file: 'nosuchfile.js',
};
// Query parameter and header values that the server takes (so that a
// rejection can only mean the parameter is unknown).
const PARAM_VALUES = {
  pageSize: '1',
  pageToken: '',
  state: 'JOB_STATE_QUEUED',
  taskId: 'nosuchtask',
  afterSeq: '0',
  version: '0',
  datasetId: 'openapi-probe-ds',
  displayName: 'OpenAPI probe',
  fileName: 'probe.csv',
  totalBytes: '0',
  format: 'ADAPTER_FORMAT_ADAPTERD',
  acceptLayerNormLoss: 'false',
  'X-Task-Id': 'nosuchtask',
  'Last-Event-ID': '0',
};
// Bodies for the non-JSON content types (JSON bodies are the spec's examples).
const RAW_BODIES = {
  'text/csv': 'text,label\nthe film was great,pos\nthe plot made no sense,neg\n',
  'application/octet-stream': Buffer.from('not an adapter file'),
};
// google.rpc.Code -> HTTP status (server/http/transcoding.cc HttpStatusFor).
const HTTP_STATUS_OF_CODE = {
  1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400,
  10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
};

// --- Failure and cleanup -----------------------------------------------------

let server = null;       // the adapterd child process
let serverLog = '';      // its stdout and stderr
let workDir = null;
let failed = false;

function killServer() {
  if (server !== null && server.exitCode === null && server.signalCode === null) {
    try {
      server.kill('SIGKILL');
    } catch (e) {
      // already gone
    }
  }
}

function fail(message) {
  const err = new Error(message);
  err.testFailure = true;
  throw err;
}

function check(condition, message) {
  if (!condition) fail(message);
}

function logTail() {
  const lines = serverLog.split('\n');
  return lines.slice(Math.max(0, lines.length - 40)).join('\n');
}

process.on('exit', killServer);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    console.error(`openapi_test: FAILED: got ${signal}`);
    killServer();
    process.exit(1);
  });
}

// --- (a) The document ----------------------------------------------------------

function loadSwaggerParser() {
  try {
    return require('@apidevtools/swagger-parser');
  } catch (e) {
    fail('@apidevtools/swagger-parser not found (NODE_PATH=' + (process.env.NODE_PATH || '') +
         '): run scripts/install-deps.sh (it installs it under /opt/adapterd-tools)');
  }
  return null;
}

// Every (method, path, operation) of the spec.
function operations(api) {
  const ops = [];
  for (const [p, item] of Object.entries(api.paths)) {
    for (const m of METHODS) {
      if (item[m]) {
        ops.push({
          method: m.toUpperCase(), path: p, op: item[m],
          parameters: [...(item.parameters || []), ...(item[m].parameters || [])],
        });
      }
    }
  }
  return ops;
}

function checkConventions(api) {
  // 64-bit integers are JSON strings in protobuf's mapping.
  const walk = (schema, where) => {
    if (schema === null || typeof schema !== 'object') return;
    if (schema.format === 'int64' || schema.format === 'uint64') {
      check(schema.type === 'string', `${where}: format ${schema.format} must be type string`);
    }
    for (const [k, v] of Object.entries(schema.properties || {})) walk(v, `${where}.${k}`);
    if (schema.items) walk(schema.items, `${where}[]`);
    if (typeof schema.additionalProperties === 'object') walk(schema.additionalProperties, `${where}{}`);
  };
  for (const [name, schema] of Object.entries(api.components.schemas)) walk(schema, `schemas.${name}`);
  const status = api.components.schemas.Status;
  check(status && status.properties && status.properties.code && status.properties.message &&
        status.properties.details, 'components.schemas.Status must have code, message and details');

  const seen = new Map();
  for (const { method, path: p, op, parameters } of operations(api)) {
    const what = `${method} ${p}`;
    check(typeof op.operationId === 'string' && op.operationId !== '', `${what}: no operationId`);
    check(!seen.has(op.operationId), `${what}: operationId ${op.operationId} is also ${seen.get(op.operationId)}'s`);
    seen.set(op.operationId, what);
    check(Array.isArray(op.tags) && op.tags.length > 0, `${what}: no tags`);
    check(typeof op.summary === 'string' && op.summary !== '', `${what}: no summary`);
    for (const param of parameters) {
      if (param.in === 'path') {
        check(p.includes(`{${param.name}}`), `${what}: path parameter ${param.name} is not in the path`);
      }
    }
    for (const variable of p.match(/\{[^}]+\}/g) || []) {
      const name = variable.slice(1, -1);
      check(parameters.some((x) => x.in === 'path' && x.name === name),
            `${what}: path variable ${name} has no parameter`);
    }
    if (op['x-adapterd-gateway'] === true) continue;
    const dflt = op.responses.default;
    check(dflt && dflt.content && dflt.content['application/json'] &&
          dflt.content['application/json'].schema === status,
          `${what}: the default response must be a google.rpc.Status (components.schemas.Status)`);
    check(op.responses['200'], `${what}: no 200 response`);
  }

  // Every RPC of the service is an operation.
  const proto = fs.readFileSync(PROTO_PATH, 'utf8');
  const rpcs = [...proto.matchAll(/^\s*rpc\s+(\w+)\s*\(/gm)].map((m) => m[1]);
  check(rpcs.length > 0, `no rpc found in ${PROTO_PATH}`);
  const ids = new Set(operations(api).map((o) => o.op.operationId));
  for (const rpc of rpcs) check(ids.has(rpc), `the RPC ${rpc} has no operation in the spec`);
}

// --- (b) Route parity --------------------------------------------------------------

function checkRouteParity(api) {
  let out;
  try {
    out = childProcess.execFileSync(ADAPTERD_BIN, ['http-routes'], { encoding: 'utf8', timeout: 30000 });
  } catch (e) {
    fail(`\`${ADAPTERD_BIN} http-routes\` failed: ${e.message}`);
  }
  const serverRoutes = new Map();
  for (const line of out.split('\n')) {
    if (line.trim() === '') continue;
    const parts = line.trim().split(/\s+/);
    check(parts.length === 3, `http-routes: malformed line '${line}' (want METHOD PATTERN RPC)`);
    serverRoutes.set(`${parts[0]} ${parts[1]}`, parts[2]);
  }
  check(serverRoutes.size > 0, 'http-routes printed no route');

  const specRoutes = new Map();
  for (const { method, path: p, op } of operations(api)) {
    if (op['x-adapterd-gateway'] === true) continue;
    specRoutes.set(`${method} ${p}`, op.operationId);
  }
  for (const [route, rpc] of serverRoutes) {
    check(specRoutes.has(route), `the server's route ${route} (${rpc}) is missing from docs/openapi.yaml`);
    check(specRoutes.get(route) === rpc,
          `${route}: operationId is ${specRoutes.get(route)}, the server's RPC is ${rpc}`);
  }
  for (const [route, id] of specRoutes) {
    check(serverRoutes.has(route),
          `docs/openapi.yaml's ${route} (${id}) is not a server route (mark the gateway's own ` +
          'endpoints x-adapterd-gateway: true)');
  }
  return serverRoutes.size;
}

// --- (c) The server ------------------------------------------------------------------

// Validates a response body against a (dereferenced) spec schema, strictly:
// protobuf's JSON prints every scalar, repeated and map field, so every such
// property must be there, and no other member may be.
function validate(value, schema, where, errors) {
  if (schema.enum && !schema.enum.includes(value)) {
    errors.push(`${where}: ${JSON.stringify(value)} is not one of ${schema.enum.join(', ')}`);
    return;
  }
  switch (schema.type) {
    case 'string':
      if (typeof value !== 'string') {
        errors.push(`${where}: want a string, got ${JSON.stringify(value)}`);
      } else if ((schema.format === 'int64' || schema.format === 'uint64') && !/^-?\d+$/.test(value)) {
        errors.push(`${where}: ${JSON.stringify(value)} is not a ${schema.format} string`);
      }
      return;
    case 'integer':
      if (!Number.isInteger(value)) errors.push(`${where}: want an integer, got ${JSON.stringify(value)}`);
      return;
    case 'number':
      if (typeof value !== 'number') errors.push(`${where}: want a number, got ${JSON.stringify(value)}`);
      return;
    case 'boolean':
      if (typeof value !== 'boolean') errors.push(`${where}: want a boolean, got ${JSON.stringify(value)}`);
      return;
    case 'array':
      if (!Array.isArray(value)) {
        errors.push(`${where}: want an array, got ${JSON.stringify(value)}`);
        return;
      }
      value.forEach((v, i) => validate(v, schema.items || {}, `${where}[${i}]`, errors));
      return;
    case 'object': {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        errors.push(`${where}: want an object, got ${JSON.stringify(value)}`);
        return;
      }
      const props = schema.properties || {};
      for (const [k, v] of Object.entries(value)) {
        if (props[k]) {
          validate(v, props[k], `${where}.${k}`, errors);
        } else if (typeof schema.additionalProperties === 'object') {
          validate(v, schema.additionalProperties, `${where}[${JSON.stringify(k)}]`, errors);
        } else if (schema.additionalProperties !== true) {
          errors.push(`${where}: member '${k}' is not in the spec`);
        }
      }
      for (const [k, p] of Object.entries(props)) {
        const isMessage = p.type === 'object' && !p.additionalProperties;
        if (!(k in value) && !isMessage) errors.push(`${where}: member '${k}' is missing`);
      }
      return;
    }
    default:
      return;
  }
}

async function request(base, method, urlPath, { headers = {}, body } = {}) {
  const res = await fetch(base + urlPath, {
    method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const type = res.headers.get('content-type') || '';
  let text;
  if (type.startsWith('text/event-stream')) {
    // A stream that opened: its first event is enough.
    const reader = res.body.getReader();
    const { value } = await reader.read();
    await reader.cancel();
    text = Buffer.from(value || []).toString('utf8');
  } else {
    text = await res.text();
  }
  return { status: res.status, type, headers: res.headers, text };
}

function parseStatus(res, what) {
  let body;
  try {
    body = JSON.parse(res.text);
  } catch (e) {
    fail(`${what}: HTTP ${res.status}, not a JSON google.rpc.Status: ${JSON.stringify(res.text.slice(0, 200))}`);
  }
  const ok = body !== null && typeof body === 'object' && Number.isInteger(body.code) &&
      typeof body.message === 'string' && Array.isArray(body.details);
  check(ok, `${what}: HTTP ${res.status}, the error is not a google.rpc.Status ` +
        `{code: integer, message: string, details: array}: ${res.text.slice(0, 300)}`);
  return body;
}

function isNoRoute(res) {
  if (res.status !== 404) return false;
  try {
    return JSON.parse(res.text).message.startsWith('no route for');
  } catch (e) {
    return false;
  }
}

async function startServer() {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'adapterd-openapi-'));
  const modelDir = path.join(workDir, 'model');
  const dataDir = path.join(workDir, 'data');
  fs.mkdirSync(dataDir);
  try {
    childProcess.execFileSync(MAKE_MODEL_BIN,
                              ['--out', modelDir, '--preset', 'tiny', '--seed', '5', '--init_range', '0.2'],
                              { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60000 });
  } catch (e) {
    fail(`${MAKE_MODEL_BIN} failed: ${e.message}\n${e.stderr || ''}`);
  }
  server = childProcess.spawn(ADAPTERD_BIN, [
    '--listen', '127.0.0.1:0', '--metrics_listen', '127.0.0.1:0', '--http_listen', '127.0.0.1:0',
    '--data_dir', dataDir, '--model_dir', modelDir, '--threads', '1', '--max_queue_delay_us', '500',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(
        `no "HTTP on port N" line within ${PORT_WAIT_MS / 1000} s`)), PORT_WAIT_MS);
    const onData = (chunk) => {
      serverLog += chunk.toString();
      const m = /HTTP on port (\d+)/.exec(serverLog);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    server.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`adapterd exited (code ${code}, signal ${signal}) before serving HTTP`));
    });
  }).catch((e) => fail(`${e.message}\n--- adapterd's log:\n${logTail()}`));
  server.removeAllListeners('exit');
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + HEALTH_WAIT_MS;
  let last = '';
  while (true) {
    check(server.exitCode === null && server.signalCode === null,
          `adapterd exited while starting\n--- adapterd's log:\n${logTail()}`);
    try {
      const res = await request(base, 'GET', '/healthz');
      if (res.status === 200) break;
      last = `HTTP ${res.status} ${res.text}`;
    } catch (e) {
      last = e.message;
    }
    check(Date.now() < deadline,
          `GET /healthz not 200 within ${HEALTH_WAIT_MS / 1000} s (last: ${last})\n--- log:\n${logTail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return base;
}

function exampleOf(media) {
  if (media.example !== undefined) return media.example;
  if (media.schema && media.schema.example !== undefined) return media.schema.example;
  return {};
}

async function probe(api, base) {
  const schemas = api.components.schemas;
  let probed = 0;
  for (const { method, path: p, op, parameters } of operations(api)) {
    const what = `${method} ${p} (${op.operationId})`;
    let urlPath = p.replace(/\{([^}]+)\}/g, (_, name) => {
      check(name in PATH_VALUES, `${what}: no probe value for the path parameter ${name}`);
      return encodeURIComponent(PATH_VALUES[name]);
    });
    const query = new URLSearchParams();
    const headers = {};
    for (const param of parameters) {
      if (param.in !== 'query' && param.in !== 'header') continue;
      check(param.name in PARAM_VALUES, `${what}: no probe value for the ${param.in} parameter ${param.name}`);
      if (param.in === 'query') query.append(param.name, PARAM_VALUES[param.name]);
      else headers[param.name] = PARAM_VALUES[param.name];
    }
    if ([...query].length > 0) urlPath += '?' + query.toString();
    let body;
    if (op.requestBody) {
      const content = op.requestBody.content;
      const type = ['text/csv', 'application/octet-stream', 'application/json'].find((t) => content[t]);
      check(type, `${what}: no probe body for its content types ${Object.keys(content).join(', ')}`);
      headers['Content-Type'] = type;
      body = type === 'application/json' ? JSON.stringify(exampleOf(content[type])) : RAW_BODIES[type];
    }
    let res;
    try {
      res = await request(base, method, urlPath, { headers, body });
    } catch (e) {
      fail(`${what}: ${method} ${urlPath}: ${e.message}\n--- adapterd's log:\n${logTail()}`);
    }
    const said = `${what}: ${method} ${urlPath} -> HTTP ${res.status} ${res.text.slice(0, 300)}`;
    check(!isNoRoute(res), `${said}: the gateway has no route for a spec operation`);
    check(res.status !== 405, `${said}: the gateway does not take the spec's method`);
    check(res.status === 200 || op.responses[String(res.status)] || op.responses.default,
          `${said}: the status is not among the spec's responses`);
    if (res.status === 200) {
      const doc = op.responses['200'];
      check(doc && doc.content, `${said}: the spec has no 200 content`);
      const mediaType = res.type.split(';')[0].trim();
      const media = doc.content[mediaType] || doc.content['*/*'];
      check(media, `${said}: Content-Type ${res.type} is not among the spec's (${Object.keys(doc.content)})`);
      if (mediaType === 'application/json') {
        const errors = [];
        validate(JSON.parse(res.text), media.schema, 'body', errors);
        check(errors.length === 0, `${said}: the body does not match the spec's schema:\n  ${errors.join('\n  ')}`);
      }
    } else if (res.type.startsWith('application/json')) {
      const status = parseStatus(res, said);
      const errors = [];
      validate(status, schemas.Status, 'error', errors);
      check(errors.length === 0, `${said}: ${errors.join('; ')}`);
      check(status.code !== 0, `${said}: an error with code 0`);
      check(HTTP_STATUS_OF_CODE[status.code] === res.status || (res.status === 413 && status.code === 8),
            `${said}: code ${status.code} should be HTTP ${HTTP_STATUS_OF_CODE[status.code]}`);
      check(!status.message.startsWith('unknown parameter') && !status.message.includes('is given by the path'),
            `${said}: the server rejects a documented parameter`);
      check(!status.message.startsWith('invalid JSON body'), `${said}: the server rejects the spec's example`);
      check(!status.message.startsWith('Content-Type'), `${said}: the server rejects the spec's content type`);
    } else {
      fail(`${said}: an error that is not JSON (Content-Type ${res.type})`);
    }
    console.log(`  ${method} ${urlPath} -> HTTP ${res.status}` +
                (res.status === 200 ? '' : ` ${res.text.slice(0, 120)}`));
    probed++;
  }

  // The probe can fail: a made-up path is the no-route 404, a wrong method 405.
  const nosuch = await request(base, 'GET', '/v1/nosuch');
  parseStatus(nosuch, 'GET /v1/nosuch');
  check(isNoRoute(nosuch), `GET /v1/nosuch: want the no-route 404, got HTTP ${nosuch.status} ${nosuch.text}`);
  const wrong = await request(base, 'PUT', '/v1/tasks');
  parseStatus(wrong, 'PUT /v1/tasks');
  check(wrong.status === 405, `PUT /v1/tasks: want 405, got HTTP ${wrong.status} ${wrong.text}`);
  return probed;
}

async function main() {
  check(ADAPTERD_BIN && fs.existsSync(ADAPTERD_BIN), `ADAPTERD_BIN (${ADAPTERD_BIN}) is not a file`);
  check(MAKE_MODEL_BIN && fs.existsSync(MAKE_MODEL_BIN), `MAKE_MODEL_BIN (${MAKE_MODEL_BIN}) is not a file`);
  check(fs.existsSync(SPEC_PATH), `${SPEC_PATH} is missing (set ADAPTERD_SOURCE_DIR)`);
  const SwaggerParser = loadSwaggerParser();

  let api;
  try {
    api = await SwaggerParser.validate(SPEC_PATH);  // parses the YAML, resolves every $ref
  } catch (e) {
    fail(`docs/openapi.yaml is not valid OpenAPI: ${e.message}`);
  }
  check(api.openapi === '3.0.3', `openapi is ${api.openapi}, want 3.0.3`);
  checkConventions(api);
  console.log(`openapi_test: (a) docs/openapi.yaml is valid OpenAPI ${api.openapi}, ` +
              `${operations(api).length} operations`);

  const routes = checkRouteParity(api);
  console.log(`openapi_test: (b) the spec and \`adapterd http-routes\` agree on ${routes} routes`);

  const base = await startServer();
  const probed = await probe(api, base);
  console.log(`openapi_test: (c) ${probed} operations probed on ${base}; the no-route 404 and 405 seen`);
}

const watchdog = setTimeout(() => {
  console.error(`openapi_test: FAILED: not done within ${WATCHDOG_MS / 1000} s\n--- adapterd's log:\n${logTail()}`);
  killServer();
  process.exit(1);
}, WATCHDOG_MS);

main().then(() => {
  console.log('openapi_test: PASSED');
}).catch((e) => {
  failed = true;
  console.error('openapi_test: FAILED: ' + (e.testFailure ? e.message : (e.stack || e.message)));
}).finally(async () => {
  clearTimeout(watchdog);
  if (server !== null && server.exitCode === null && server.signalCode === null) {
    // Stop it gracefully, bounded; then for certain.
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10000))]);
    killServer();
  }
  if (workDir !== null) {
    if (failed) console.error(`openapi_test: kept ${workDir}`);
    else fs.rmSync(workDir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
});

#!/usr/bin/env node
// Validates Kubernetes objects offline against the Kubernetes API schema, with
// npm's kubernetes-models (found through NODE_PATH, which the test points at
// $ADAPTERD_TOOLS/node_modules).
//
//   node validate_k8s.js FILE.json...   each FILE: a JSON list of objects
//                                       (tests/deploy/k8s/kustomize_render.py)
//
// Two checks per object:
//   1. schema: new Model(obj).validate() (types, required fields, enums,
//      formats such as quantities);
//   2. unknown fields: the schema's validator reads every field the API
//      defines, so the validator is run again on a Proxy of the object that
//      records each field read; a field it never read is not in the API (a
//      typo such as `replica:`), which `kubectl apply` rejects too (strict
//      field validation, the default since Kubernetes 1.27).
// Prints one line per object; exits 1 if any object fails, 2 on usage or
// load errors.
'use strict';

const fs = require('fs');

function modelFor(obj) {
  if (!obj || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') {
    throw new Error('not a Kubernetes object (no apiVersion/kind)');
  }
  // "v1" -> kubernetes-models/v1/Kind; "apps/v1" -> kubernetes-models/apps/v1/Kind
  const mod = `kubernetes-models/${obj.apiVersion}/${obj.kind}`;
  let m;
  try {
    m = require(mod);
  } catch (e) {
    throw new Error(`no schema for ${obj.apiVersion} ${obj.kind} (${mod}): ${e.code || e.message}`);
  }
  const Model = m[obj.kind];
  if (typeof Model !== 'function') throw new Error(`${mod} exports no ${obj.kind}`);
  return Model;
}

function trackReads(obj) {
  const seen = new Set();
  const wrap = (v, path) => {
    if (v === null || typeof v !== 'object') return v;
    return new Proxy(v, {
      get(target, prop, receiver) {
        const x = Reflect.get(target, prop, receiver);
        if (typeof prop === 'string' && Object.prototype.hasOwnProperty.call(target, prop)) {
          seen.add(`${path}/${prop}`);
          return wrap(x, `${path}/${prop}`);
        }
        return x;
      },
    });
  };
  return { proxy: wrap(obj, ''), seen };
}

function unreadFields(obj, seen, path = '') {
  let out = [];
  if (obj === null || typeof obj !== 'object') return out;
  for (const k of Object.keys(obj)) {
    const p = `${path}/${k}`;
    out = seen.has(p) ? out.concat(unreadFields(obj[k], seen, p)) : out.concat([p]);
  }
  return out;
}

// Throws an Error naming every problem of `obj`.
function validateObject(obj) {
  const Model = modelFor(obj);
  new Model(obj).validate();
  const { proxy, seen } = trackReads(obj);
  Model.prototype.validate.call(proxy);
  const unknown = unreadFields(obj, seen);
  if (unknown.length) throw new Error(`unknown field(s): ${unknown.join(', ')}`);
}

function main(files) {
  if (!files.length) {
    console.error('usage: validate_k8s.js FILE.json...');
    return 2;
  }
  let bad = 0;
  for (const f of files) {
    let objects;
    try {
      objects = JSON.parse(fs.readFileSync(f, 'utf8'));
    } catch (e) {
      console.error(`${f}: ${e.message}`);
      return 2;
    }
    if (!Array.isArray(objects)) {
      console.error(`${f}: expected a JSON list of objects`);
      return 2;
    }
    for (const obj of objects) {
      const name = `${obj && obj.apiVersion} ${obj && obj.kind} ${obj && obj.metadata && obj.metadata.name}`;
      try {
        validateObject(obj);
        console.log(`${f}: ok      ${name}`);
      } catch (e) {
        console.log(`${f}: INVALID ${name}: ${e.message}`);
        bad++;
      }
    }
  }
  return bad ? 1 : 0;
}

module.exports = { validateObject };
if (require.main === module) process.exit(main(process.argv.slice(2)));

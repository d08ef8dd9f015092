// Validates the Kubernetes manifests in deploy/kubernetes offline, against the
// official OpenAPI schemas as compiled by the kubernetes-models package, and
// the Prometheus Operator's objects (the example ServiceMonitor) against its
// CRD schemas as compiled by @kubernetes-models/prometheus-operator (both
// pinned in package-lock.json), so that CI catches a wrong type, a missing
// required field or an unknown field before anyone runs `kubectl apply`.
//
//   node validate.cjs FILE...         validate every YAML document of each file
//   node validate.cjs --dump FILE...  print the parsed documents as JSON
//
// Each valid document prints `ok FILE KIND/NAME`; each invalid one prints
// `FILE: KIND/NAME: what is wrong` on stderr, and the exit code is then 1
// (2 for a usage error). Driven by tests/e2e/test_kubernetes_manifests.py,
// which installs the packages with `npm ci` and points NODE_PATH at them.
"use strict";

const fs = require("node:fs");
const YAML = require("yaml");

// The OpenAPI schemas do not forbid unknown fields, but `kubectl apply`
// (strict field validation on the server) rejects them. The compiled schema
// validators read every field their schema declares, so a field that was
// never read while validating is one the schema does not know.
function watchReads(value, reads) {
  if (value === null || typeof value !== "object") return value;
  const seen = new Set();
  reads.set(value, seen);
  const proxies = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      const child = Reflect.get(target, key, receiver);
      if (typeof key !== "string" || !Object.prototype.hasOwnProperty.call(target, key))
        return child;
      seen.add(key);
      if (child === null || typeof child !== "object") return child;
      if (!proxies.has(key)) proxies.set(key, watchReads(child, reads));
      return proxies.get(key);
    },
  });
}

function unknownFields(value, reads, path, out) {
  if (value === null || typeof value !== "object") return out;
  const seen = reads.get(value) || new Set();
  for (const key of Object.keys(value)) {
    const where = `${path}/${key}`;
    if (!Array.isArray(value) && !seen.has(key)) out.push(where);
    else unknownFields(value[key], reads, where, out);
  }
  return out;
}

// The API groups of custom resources whose schemas are known, and their package.
const CRD_PACKAGES = new Map([["monitoring.coreos.com", "@kubernetes-models/prometheus-operator"]]);

// "apps/v1" -> kubernetes-models/apps/v1, "v1" (the core group) -> kubernetes-models/v1,
// "monitoring.coreos.com/v1" -> @kubernetes-models/prometheus-operator/monitoring.coreos.com/v1.
function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion))
    return null;
  const apiGroup = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = CRD_PACKAGES.get(apiGroup) || "kubernetes-models";
  let group;
  try {
    group = require(`${pkg}/${apiVersion}`);
  } catch (e) {
    if (e.code === "MODULE_NOT_FOUND" || e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED") return null;
    throw e;
  }
  const model = typeof kind === "string" && Object.prototype.hasOwnProperty.call(group, kind) ? group[kind] : null;
  return model && model.kind === kind && model.apiVersion === apiVersion ? model : null;
}

function validateDocument(doc) {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc))
    return ["the document is not a mapping"];
  const Model = modelFor(doc.apiVersion, doc.kind);
  if (!Model) return [`unknown apiVersion/kind ${JSON.stringify(doc.apiVersion)}/${JSON.stringify(doc.kind)}`];
  const errors = [];
  if (!doc.metadata || typeof doc.metadata.name !== "string" || doc.metadata.name === "")
    errors.push("metadata.name is missing");
  // A plain copy: the model drops undefined values, as the API would.
  const model = new Model(JSON.parse(JSON.stringify(doc)));
  const reads = new WeakMap();
  const watched = watchReads(model, reads);
  try {
    Model.prototype.validate.call(watched);
  } catch (e) {
    errors.push(e.message);
  }
  // After a schema error the validator may stop early and leave fields unread.
  if (errors.length === 0)
    for (const field of unknownFields(model, reads, "", []))
      errors.push(`unknown field ${field.slice(1).replace(/\//g, ".")}`);
  return errors;
}

function documentsOf(file) {
  const text = fs.readFileSync(file, "utf8");
  const docs = YAML.parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true });
  const out = [];
  for (const doc of docs) {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length) throw new Error(problems.map((p) => p.message).join("; "));
    const value = doc.toJS({ maxAliasCount: 0 });
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

function label(doc) {
  const kind = doc && typeof doc.kind === "string" ? doc.kind : "?";
  const name = doc && doc.metadata && typeof doc.metadata.name === "string" ? doc.metadata.name : "?";
  return `${kind}/${name}`;
}

function main(argv) {
  const dump = argv[0] === "--dump";
  const files = dump ? argv.slice(1) : argv;
  if (files.length === 0 || files.some((f) => f.startsWith("-"))) {
    process.stderr.write("usage: node validate.cjs [--dump] FILE...\n");
    return 2;
  }
  let failed = false;
  const dumped = [];
  for (const file of files) {
    let docs;
    try {
      docs = documentsOf(file);
    } catch (e) {
      process.stderr.write(`${file}: not valid YAML: ${e.message}\n`);
      failed = true;
      continue;
    }
    if (docs.length === 0) {
      process.stderr.write(`${file}: no document\n`);
      failed = true;
      continue;
    }
    if (dump) {
      dumped.push({ file, documents: docs });
      continue;
    }
    for (const doc of docs) {
      const errors = validateDocument(doc);
      if (errors.length === 0) {
        process.stdout.write(`ok ${file} ${label(doc)}\n`);
        continue;
      }
      failed = true;
      for (const error of errors) process.stderr.write(`${file}: ${label(doc)}: ${error}\n`);
    }
  }
  if (dump && !failed) process.stdout.write(JSON.stringify(dumped) + "\n");
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));

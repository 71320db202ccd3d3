#!/usr/bin/env python3
"""Checks the PromQL of the Grafana dashboard and the alerting rules against a
live Prometheus: every expression must evaluate without error, and every
metric name it references must exist in that Prometheus.

Used by stack_test.py (ctest deploy_stack_test); also a command line tool:

  promql_check.py --prometheus http://127.0.0.1:9090 \\
      --dashboard deploy/grafana/dashboards/adapterd.json \\
      --rules deploy/prometheus/rules

Standard library and python3-yaml only.
"""

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# Grafana's built-in variables, replaced the way a panel would at a typical
# zoom; the dashboard's own template variables ($instance, $tenant, ...)
# become ".*" (their "All" value).
GRAFANA_BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__interval_ms": "15000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}

# Words of PromQL that look like identifiers but are not metric names.
PROMQL_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
    "group_right", "offset", "bool", "inf", "nan", "start", "end", "atan2",
}


@dataclass
class Expression:
    where: str          # "panel 'Batch size' (id 15) target B", "rule AdapterdNotServing"
    promql: str         # as written, with template variables
    kind: str = "query"  # "query", or "label_values" for a template variable query
    label: str = ""     # the label of a label_values() query


@dataclass
class Problem:
    where: str
    promql: str
    message: str
    missing: list = field(default_factory=list)

    def __str__(self):
        return f"{self.where}: {self.message}\n    {self.promql}"


# ----------------------------------------------------------------- parsing

def substitute_variables(expr, variables=()):
    """Replaces Grafana variables ($x, ${x}, ${x:fmt}, [[x]]): built-ins by
    typical values, the dashboard's own variables by ".*"."""

    def value(name):
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        return ".*"

    expr = re.sub(r"\$\{(\w+)(?::[^}]*)?\}", lambda m: value(m.group(1)), expr)
    expr = re.sub(r"\[\[(\w+)(?::[^\]]*)?\]\]", lambda m: value(m.group(1)), expr)
    expr = re.sub(r"\$(\w+)", lambda m: value(m.group(1)), expr)
    return expr


def _strip_strings(expr):
    """Removes string literals ("...", '...', `...`), keeping a placeholder,
    and returns (stripped, [strings])."""
    strings = []

    def keep(m):
        strings.append(m.group(0))
        return '""'

    stripped = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', keep, expr)
    return stripped, strings


def metric_names(expr):
    """The metric names a PromQL expression references (sorted, unique).

    String literals, label matchers {...}, ranges and subqueries [...],
    grouping clauses (by/without/on/ignoring/group_left/group_right (...)),
    function and aggregation names (an identifier followed by "("),
    keywords and numbers/durations are not metric names. A selector that
    names its metric as {__name__="x"} counts as x."""
    names = set()
    # {__name__="x"} before the strings go.
    for m in re.finditer(r'__name__\s*=\s*"([A-Za-z_:][A-Za-z0-9_:]*)"', expr):
        names.add(m.group(1))
    s, _ = _strip_strings(expr)
    # Label matchers and ranges (no nesting in PromQL for either).
    s = re.sub(r"\{[^{}]*\}", " ", s)
    s = re.sub(r"\[[^\[\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    tokens = re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*|\d[\w.]*|.", s)
    for tok in tokens:
        word = tok.group(0)
        if not re.match(r"[A-Za-z_:]", word):
            continue
        if word.lower() in PROMQL_KEYWORDS:
            continue
        rest = s[tok.end():]
        if re.match(r"\s*\(", rest):
            continue  # a function or an aggregation
        names.add(word)
    return sorted(names)


def parse_label_values(query):
    """label_values(selector, label) or label_values(label) -> (selector, label)."""
    m = re.fullmatch(r"\s*label_values\(\s*(?:(.*)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query, re.S)
    if not m:
        return None
    return (m.group(1) or "").strip(), m.group(2)


# ----------------------------------------------------- what to check, where

def dashboard_expressions(path):
    """Every PromQL of a Grafana dashboard: panel targets (rows' nested
    panels included), template variable queries and annotation queries."""
    dash = json.loads(Path(path).read_text())
    out = []

    def panel_exprs(panels):
        for p in panels:
            for t in p.get("targets", []) or []:
                if t.get("expr"):
                    out.append(Expression(
                        f"panel '{p.get('title', '')}' (id {p.get('id')}) target {t.get('refId', '?')}",
                        t["expr"]))
            panel_exprs(p.get("panels", []) or [])

    panel_exprs(dash.get("panels", []) or [])
    for v in (dash.get("templating", {}) or {}).get("list", []) or []:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        q = q or v.get("definition", "")
        lv = parse_label_values(q)
        if lv is not None:
            out.append(Expression(f"variable ${v.get('name')}", q, "label_values", lv[1]))
        elif q:
            out.append(Expression(f"variable ${v.get('name')}", q))
    for a in (dash.get("annotations", {}) or {}).get("list", []) or []:
        if a.get("expr"):
            out.append(Expression(f"annotation '{a.get('name', '')}'", a["expr"]))
    return out


def rule_expressions(rules_dir):
    out = []
    for f in sorted(Path(rules_dir).glob("*.yml")) + sorted(Path(rules_dir).glob("*.yaml")):
        doc = yaml.safe_load(f.read_text()) or {}
        for g in doc.get("groups", []) or []:
            for r in g.get("rules", []) or []:
                name = r.get("alert") or r.get("record")
                out.append(Expression(f"{f.name}: rule {name} (group {g.get('name')})", r["expr"]))
    return out


# ------------------------------------------------------------ Prometheus

class Prometheus:
    def __init__(self, url, timeout=10):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path, params=None):
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:  # 400/422 carry a JSON error
            body = e.read().decode(errors="replace")
            try:
                return json.loads(body)
            except ValueError:
                return {"status": "error", "errorType": f"http {e.code}", "error": body}

    def query(self, promql):
        return self.get("/api/v1/query", {"query": promql})

    def metric_names(self):
        r = self.get("/api/v1/label/__name__/values")
        if r.get("status") != "success":
            raise RuntimeError(f"label values: {r}")
        return set(r["data"])

    def label_names(self):
        r = self.get("/api/v1/labels")
        if r.get("status") != "success":
            raise RuntimeError(f"labels: {r}")
        return set(r["data"])


def check(prom, expressions):
    """Evaluates every expression and looks up every metric name it uses.
    Returns the list of Problems (empty: all good)."""
    known = prom.metric_names()
    labels = prom.label_names()
    problems = []
    for e in expressions:
        promql = substitute_variables(e.promql)
        if e.kind == "label_values":
            selector, label = parse_label_values(promql)
            names = metric_names(selector) if selector else []
            to_run = f"count by ({label}) ({selector})" if selector else None
            if label not in labels:
                problems.append(Problem(e.where, e.promql, f"label '{label}' does not exist in Prometheus"))
        else:
            names = metric_names(promql)
            to_run = promql
        missing = [n for n in names if n not in known]
        if missing:
            problems.append(Problem(e.where, e.promql,
                                    "metric(s) not in Prometheus: " + ", ".join(missing), missing))
        if to_run is not None:
            r = prom.query(to_run)
            if r.get("status") != "success":
                problems.append(Problem(e.where, e.promql,
                                        f"query failed: {r.get('errorType')}: {r.get('error')}"))
    return problems


def missing_names(problems):
    """{metric name: [where, ...]} over all Problems."""
    out = {}
    for p in problems:
        for n in p.missing:
            out.setdefault(n, []).append(p.where)
    return out


def report(problems):
    lines = [str(p) for p in problems]
    miss = missing_names(problems)
    if miss:
        lines.append("metric names missing from Prometheus (%d):" % len(miss))
        for n in sorted(miss):
            lines.append(f"  {n}  <- " + "; ".join(miss[n]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--dashboard", action="append", default=[], help="Grafana dashboard JSON (repeatable)")
    ap.add_argument("--rules", action="append", default=[], help="directory of rule files (repeatable)")
    args = ap.parse_args(argv)
    exprs = []
    for d in args.dashboard:
        exprs += dashboard_expressions(d)
    for r in args.rules:
        exprs += rule_expressions(r)
    problems = check(Prometheus(args.prometheus), exprs)
    print(f"checked {len(exprs)} expressions: {len(problems)} problem(s)")
    if problems:
        print(report(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

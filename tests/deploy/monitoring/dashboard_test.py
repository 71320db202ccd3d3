#!/usr/bin/env python3
"""deploy_dashboard_test: static checks of the Grafana dashboard, the Grafana
provisioning and deploy/compose.yaml (no server needed), and unit tests of
promql_check's metric name extraction.

- the dashboard: valid JSON, one provisioned datasource uid on every panel
  and target, unique panel ids, a grid without overlaps, every panel a query,
  the panels the issue asks for, the $instance and $tenant variables;
- provisioning and compose agree: the datasource URL is the compose
  Prometheus service, the dashboard provider reads the directory compose
  mounts, Prometheus reads the mounted config, the targets file names the
  compose adapterd service on the image's metrics port;
- yamllint (default rules, warnings as errors) on the monitoring YAML.

Environment: ADAPTERD_SOURCE_DIR. Standard library and python3-yaml only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import promql_check  # noqa: E402

SOURCE_DIR = Path(os.environ.get("ADAPTERD_SOURCE_DIR", Path(__file__).resolve().parents[3]))
DEPLOY = SOURCE_DIR / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "adapterd.json"
COMPOSE = DEPLOY / "compose.yaml"


def load_yaml(path):
    return yaml.safe_load(Path(path).read_text())


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []) or [])


def datasource_uid():
    uids = []
    for f in sorted((DEPLOY / "grafana" / "provisioning" / "datasources").glob("*.yml")):
        for ds in load_yaml(f).get("datasources", []):
            if ds.get("type") == "prometheus":
                uids.append(ds["uid"])
    return uids


def compose_mounts(service):
    """{container path: host path (absolute)} of a compose service's bind
    mounts (sources starting with . or /)."""
    out = {}
    for v in load_yaml(COMPOSE)["services"][service].get("volumes", []):
        src, dst = v.split(":")[:2]
        if src.startswith((".", "/")):
            out[dst] = (COMPOSE.parent / src).resolve()
    return out


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dash = json.loads(DASHBOARD.read_text())
        cls.panels = [p for p in all_panels(cls.dash["panels"]) if p.get("type") != "row"]

    def test_identity(self):
        self.assertTrue(self.dash.get("uid"))
        self.assertTrue(self.dash.get("title"))
        self.assertIsNone(self.dash.get("id"), "a provisioned dashboard has no numeric id")
        self.assertGreaterEqual(self.dash.get("schemaVersion", 0), 36)

    def test_every_panel_and_target_uses_the_provisioned_datasource(self):
        uids = datasource_uid()
        self.assertEqual(len(uids), 1, uids)
        for p in self.panels:
            self.assertEqual(p.get("datasource"), {"type": "prometheus", "uid": uids[0]}, p["title"])
            for t in p.get("targets", []):
                self.assertEqual(t.get("datasource"), {"type": "prometheus", "uid": uids[0]}, p["title"])
        for v in self.dash["templating"]["list"]:
            if v.get("type") == "query":
                self.assertEqual(v["datasource"]["uid"], uids[0], v["name"])
        for a in self.dash["annotations"]["list"]:
            if a.get("expr"):
                self.assertEqual(a["datasource"]["uid"], uids[0], a["name"])

    def test_panel_ids_are_unique_and_the_grid_has_no_overlap(self):
        ids = [p["id"] for p in all_panels(self.dash["panels"])]
        self.assertEqual(len(ids), len(set(ids)), ids)
        cells = {}
        for p in all_panels(self.dash["panels"]):
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"'{p['title']}' overlaps '{cells.get((x, y))}'")
                    cells[(x, y)] = p["title"]

    def test_every_panel_queries_something(self):
        for p in self.panels:
            targets = p.get("targets", [])
            self.assertTrue(targets, p["title"])
            refs = [t["refId"] for t in targets]
            self.assertEqual(len(refs), len(set(refs)), p["title"])
            for t in targets:
                self.assertTrue(t.get("expr", "").strip(), f"{p['title']} {t['refId']}")
                self.assertTrue(promql_check.metric_names(promql_check.substitute_variables(t["expr"])),
                                f"{p['title']} {t['refId']}: no metric")
            self.assertTrue(p.get("description"), f"{p['title']}: no description")

    def test_the_panels_the_issue_asks_for(self):
        titles = [p["title"] for p in self.panels]
        wanted = ["Predict rate", "Errors by code", "latency by tenant", "Batch size", "Padding", "Tasks per batch",
                  "Cache hit ratio", "Cache bytes", "Cold loads", "Jobs by state", "Queue depth by tenant",
                  "Training throughput", "Executor share", "Process memory"]
        for w in wanted:
            self.assertTrue(any(w.lower() in t.lower() for t in titles), f"no panel '{w}' in {titles}")

    def test_template_variables(self):
        names = {v["name"]: v for v in self.dash["templating"]["list"]}
        self.assertIn("tenant", names)
        self.assertIn("instance", names)
        for v in names.values():
            self.assertEqual(v.get("allValue"), ".*", v["name"])
        used = set()
        for e in promql_check.dashboard_expressions(DASHBOARD):
            used |= set(re.findall(r"\$(\w+)", e.promql))
        self.assertIn("tenant", used)
        # Every $variable a query uses is the dashboard's or Grafana's.
        self.assertEqual(used - set(names) - set(promql_check.GRAFANA_BUILTINS), set())

    def test_every_expression_parses_into_metric_names(self):
        exprs = promql_check.dashboard_expressions(DASHBOARD)
        self.assertGreater(len(exprs), 20)
        for e in exprs:
            q = promql_check.substitute_variables(e.promql)
            self.assertNotIn("$", q, e.where)


class ProvisioningAndComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compose = load_yaml(COMPOSE)
        cls.services = cls.compose["services"]

    def test_services(self):
        self.assertEqual(set(self.services), {"adapterd", "prometheus", "grafana"})
        a = self.services["adapterd"]
        self.assertEqual(a["image"], "adapterd:latest")
        self.assertEqual(a["build"], {"context": "..", "dockerfile": "docker/Dockerfile"})
        self.assertIn("adapterd-data:/data", a["volumes"])
        self.assertTrue(self.services["prometheus"]["image"].startswith("prom/prometheus:v"))
        self.assertTrue(self.services["grafana"]["image"].startswith("grafana/grafana:"))
        # Published ports only on loopback, and /metrics not at all.
        for name, s in self.services.items():
            for p in s.get("ports", []):
                self.assertTrue(str(p).startswith("127.0.0.1:"), f"{name}: {p}")
                self.assertFalse(str(p).endswith(":9500"), f"{name}: {p}")
        for volume in ("adapterd-data", "prometheus-data", "grafana-data"):
            self.assertIn(volume, self.compose["volumes"])

    def test_every_bind_mount_source_exists(self):
        for name in self.services:
            for dst, src in compose_mounts(name).items():
                self.assertTrue(src.exists(), f"{name}: {src} (mounted at {dst})")

    def test_build_context_has_the_dockerfile_when_present(self):
        b = self.services["adapterd"]["build"]
        context = (COMPOSE.parent / b["context"]).resolve()
        self.assertEqual(context, SOURCE_DIR.resolve())
        dockerfile = context / b["dockerfile"]
        if not dockerfile.exists():
            self.skipTest(f"{dockerfile} not written yet")
        text = dockerfile.read_text()
        # The image's metrics port is the one the targets file names.
        m = re.search(r"ADAPTERD_METRICS_LISTEN=\S*:(\d+)", text)
        if m:
            self.assertEqual(m.group(1), "9500")

    def test_prometheus_reads_the_mounted_repo_config(self):
        mounts = compose_mounts("prometheus")
        self.assertEqual(mounts.get("/etc/prometheus"), (DEPLOY / "prometheus").resolve())
        self.assertIn("--config.file=/etc/prometheus/prometheus.yml", self.services["prometheus"]["command"])
        targets = load_yaml(DEPLOY / "prometheus" / "targets" / "adapterd.yml")
        self.assertEqual(targets, [{"targets": ["adapterd:9500"]}])
        cfg = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
        # Relative paths: the same file works mounted and in the tests' copy.
        for f in cfg["rule_files"]:
            self.assertFalse(f.startswith("/"), f)
        job = next(j for j in cfg["scrape_configs"] if j["job_name"] == "adapterd")
        for sd in job["file_sd_configs"]:
            for f in sd["files"]:
                self.assertFalse(f.startswith("/"), f)
        # Intervals are global only, so that a test can shorten them.
        self.assertNotIn("scrape_interval", job)

    def test_grafana_provisioning_matches_the_mounts(self):
        mounts = compose_mounts("grafana")
        self.assertEqual(mounts.get("/etc/grafana/provisioning"), (DEPLOY / "grafana" / "provisioning").resolve())
        provider = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "adapterd.yml")["providers"][0]
        path = provider["options"]["path"]
        self.assertEqual(mounts.get(path), DASHBOARD.parent.resolve())
        home = self.services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        self.assertEqual(home, f"{path}/{DASHBOARD.name}")
        ds = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")["datasources"][0]
        self.assertEqual(ds["url"], "http://prometheus:9090")
        self.assertIn("prometheus", self.services)
        self.assertEqual(ds["jsonData"]["timeInterval"],
                         load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["global"]["scrape_interval"])

    def test_yamllint(self):
        yamllint = shutil.which("yamllint")
        if yamllint is None:
            self.skipTest("yamllint not installed (scripts/install-deps.sh installs it)")
        paths = [str(DEPLOY / "prometheus"), str(DEPLOY / "grafana"), str(COMPOSE)]
        r = subprocess.run([yamllint, "-s", "-d", "default", *paths], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class MetricNamesTest(unittest.TestCase):
    def names(self, expr):
        return promql_check.metric_names(promql_check.substitute_variables(expr))

    def test_functions_keywords_labels_and_strings_are_not_names(self):
        self.assertEqual(self.names(
            'histogram_quantile(0.99, sum by (tenant, le) (rate(adapterd_request_duration_seconds_bucket'
            '{method="Predict", tenant=~"$tenant"}[$__rate_interval])))'),
            ["adapterd_request_duration_seconds_bucket"])
        self.assertEqual(self.names(
            'sum(rate(a_total{code=~"UNKNOWN|up"}[5m])) without (instance) / ignoring(code) group_left '
            'sum(rate(b_total[5m] offset 1h))'), ["a_total", "b_total"])
        self.assertEqual(self.names('up{job="adapterd"} == 0 or adapterd_serving == 0'), ["adapterd_serving", "up"])
        self.assertEqual(self.names('time() - process_start_time_seconds > 26 * 3600 and vector(1) bool'),
                         ["process_start_time_seconds"])
        self.assertEqual(self.names('{__name__="adapterd_build_info", version!=""}'), ["adapterd_build_info"])
        self.assertEqual(self.names('label_replace(x_bytes, "dst", "$1", "src", "(.*)")'), ["x_bytes"])
        self.assertEqual(self.names('max_over_time(y_seconds[1h:5m]) and on() count(z) > 1e-3'),
                         ["y_seconds", "z"])

    def test_variables(self):
        self.assertEqual(promql_check.substitute_variables('a{t=~"$tenant", i=~"${instance:regex}"}[$__rate_interval]'),
                         'a{t=~".*", i=~".*"}[1m]')
        self.assertEqual(promql_check.parse_label_values('label_values(up{job="adapterd"}, instance)'),
                         ('up{job="adapterd"}', "instance"))
        self.assertEqual(promql_check.parse_label_values("label_values(tenant)"), ("", "tenant"))
        self.assertIsNone(promql_check.parse_label_values("sum(up)"))


if __name__ == "__main__":
    unittest.main(verbosity=2)

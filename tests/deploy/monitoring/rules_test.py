#!/usr/bin/env python3
"""deploy_prometheus_rules_test: the Prometheus config and alerting rules of
deploy/prometheus, checked by promtool, and the rules' unit tests checked for
coverage and sensitivity.

- `promtool check config` on the repository's prometheus.yml (as compose
  uses it) and on a temp copy whose targets file names 127.0.0.1 (as the
  stack test uses it);
- `promtool check rules` on rules/*.yml;
- `promtool test rules` on tests/*.yml;
- every alert has a "<alert> fires" test group (non-empty exp_alerts) and a
  "<alert> quiet" group (exp_alerts: [] at an eval_time past the alert's
  `for`);
- sensitivity: with the alert's expr replaced by one that never fires, its
  "fires" group fails; with one that always fires, its "quiet" group fails.

Environment: ADAPTERD_SOURCE_DIR (the repository), PROMTOOL (default
/usr/bin/promtool). Standard library and python3-yaml only.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import yaml

SOURCE_DIR = Path(os.environ.get("ADAPTERD_SOURCE_DIR", Path(__file__).resolve().parents[3]))
PROM_DIR = SOURCE_DIR / "deploy" / "prometheus"
PROMTOOL = os.environ.get("PROMTOOL", "/usr/bin/promtool")


def promtool(*args, cwd=None):
    r = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def duration_seconds(d):
    """Prometheus duration ("1h30m", "90s", "0") -> seconds."""
    if d in (None, "", 0, "0"):
        return 0
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", str(d)):
        total += float(num) * units[unit]
    return total


def rule_files():
    return sorted(PROM_DIR.glob("rules/*.yml"))


def test_files():
    return sorted(PROM_DIR.glob("tests/*.yml"))


def alerts():
    """{alert name: (rule file, group index, rule index, rule)}."""
    out = {}
    for f in rule_files():
        doc = yaml.safe_load(f.read_text())
        for gi, g in enumerate(doc["groups"]):
            for ri, r in enumerate(g["rules"]):
                if "alert" in r:
                    out[r["alert"]] = (f, gi, ri, r)
    return out


def test_groups():
    """[(test file, test group)] over every unit test file."""
    out = []
    for f in test_files():
        for t in yaml.safe_load(f.read_text())["tests"]:
            out.append((f, t))
    return out


class PromtoolTest(unittest.TestCase):
    def test_promtool_is_installed(self):
        self.assertTrue(os.access(PROMTOOL, os.X_OK), f"{PROMTOOL} missing: scripts/install-deps.sh installs it")

    def test_check_config_as_compose_uses_it(self):
        code, out = promtool("check", "config", str(PROM_DIR / "prometheus.yml"))
        self.assertEqual(code, 0, out)
        # The rules are found through the relative rule_files glob.
        for f in rule_files():
            self.assertIn(f.name, out)

    def test_check_config_on_a_copy_with_a_loopback_target(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "prometheus"
            shutil.copytree(PROM_DIR, copy)
            (copy / "targets" / "adapterd.yml").write_text("- targets:\n    - 127.0.0.1:9500\n")
            code, out = promtool("check", "config", str(copy / "prometheus.yml"))
            self.assertEqual(code, 0, out)
            self.assertIn("SUCCESS", out)

    def test_check_rules(self):
        self.assertTrue(rule_files(), "no rules in deploy/prometheus/rules")
        code, out = promtool("check", "rules", *map(str, rule_files()))
        self.assertEqual(code, 0, out)
        self.assertNotIn("FAILED", out)

    def test_unit_tests_pass(self):
        self.assertTrue(test_files(), "no unit tests in deploy/prometheus/tests")
        code, out = promtool("test", "rules", *map(str, test_files()))
        self.assertEqual(code, 0, out)
        self.assertIn("SUCCESS", out)

    def test_unit_tests_load_the_repository_rules(self):
        for f in test_files():
            doc = yaml.safe_load(f.read_text())
            loaded = sorted((f.parent / p).resolve() for p in doc["rule_files"])
            self.assertEqual(loaded, sorted(p.resolve() for p in rule_files()), f)


class CoverageTest(unittest.TestCase):
    def test_every_alert_has_a_firing_and_a_quiet_group(self):
        groups = {t["name"]: t for _, t in test_groups()}
        problems = []
        for name, (_, _, _, rule) in sorted(alerts().items()):
            fires = groups.get(f"{name} fires")
            quiet = groups.get(f"{name} quiet")
            if fires is None or not any(c["alertname"] == name and c.get("exp_alerts")
                                        for c in fires.get("alert_rule_test", [])):
                problems.append(f"{name}: no '{name} fires' group expecting it to fire")
            for_s = duration_seconds(rule.get("for"))
            if quiet is None or not any(
                    c["alertname"] == name and c.get("exp_alerts") == [] and duration_seconds(c["eval_time"]) >= for_s
                    for c in quiet.get("alert_rule_test", [])):
                problems.append(f"{name}: no '{name} quiet' group expecting it quiet at an eval_time >= for "
                                f"({rule.get('for', '0s')})")
        self.assertEqual(problems, [], "\n".join(problems))

    def test_no_test_group_names_an_unknown_alert(self):
        names = set(alerts())
        for f, t in test_groups():
            for c in t.get("alert_rule_test", []):
                self.assertIn(c["alertname"], names, f"{f.name}: group '{t['name']}'")


class SensitivityTest(unittest.TestCase):
    """A unit test group that passes whatever the rule says proves nothing:
    replace the alert's expr and run only that alert's group."""

    def run_mutated(self, alert, new_expr, group_name):
        f, gi, ri, _ = alerts()[alert]
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "rules").mkdir()
            (tmp / "tests").mkdir()
            for rf in rule_files():
                doc = yaml.safe_load(rf.read_text())
                if rf == f:
                    doc["groups"][gi]["rules"][ri]["expr"] = new_expr
                (tmp / "rules" / rf.name).write_text(yaml.safe_dump(doc, sort_keys=False))
            groups = [t for _, t in test_groups() if t["name"] == group_name]
            self.assertEqual(len(groups), 1, group_name)
            test = {"rule_files": [f"../rules/{rf.name}" for rf in rule_files()],
                    "evaluation_interval": "1m", "tests": groups}
            (tmp / "tests" / "t.yml").write_text(yaml.safe_dump(test, sort_keys=False))
            return promtool("test", "rules", str(tmp / "tests" / "t.yml"))

    def test_each_fires_group_notices_a_rule_that_never_fires(self):
        for alert in sorted(alerts()):
            with self.subTest(alert=alert):
                code, out = self.run_mutated(alert, "vector(1) < 0", f"{alert} fires")
                self.assertNotEqual(code, 0, out)
                self.assertIn(f"name: {alert} fires", out)

    def test_each_quiet_group_notices_a_rule_that_always_fires(self):
        for alert in sorted(alerts()):
            with self.subTest(alert=alert):
                code, out = self.run_mutated(alert, "vector(1)", f"{alert} quiet")
                self.assertNotEqual(code, 0, out)
                self.assertIn(f"name: {alert} quiet", out)

    def test_the_unmutated_groups_pass_alone(self):
        # The harness itself: each group passes on the real rules when run
        # alone, so the failures above come from the mutation.
        for alert, (_, _, _, rule) in sorted(alerts().items()):
            for kind in ("fires", "quiet"):
                with self.subTest(alert=alert, kind=kind):
                    code, out = self.run_mutated(alert, rule["expr"], f"{alert} {kind}")
                    self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/env python3
"""deploy_stack_test: the monitoring stack against the real binaries.

A real adapterd (build/, free loopback ports, a temp data dir, a tiny model
made by adapterd-make-model) and a real Prometheus (Debian's) running
deploy/prometheus's own prometheus.yml and rules (a temp copy: only the
global intervals are shortened, and the file_sd targets file names the
server's metrics port). adapterctl drives traffic (a training job watched to
SUCCEEDED, Predict calls, a failing call, jobs left waiting in the queue).
Then every PromQL expression of the Grafana dashboard (template variables
substituted) and of the alerting rules must evaluate in Prometheus, and every
metric name they reference must exist there; and the checker must catch a
dashboard copy with one panel's metric misspelled.

Environment (set by tests/deploy/monitoring/CMakeLists.txt):
ADAPTERD_SOURCE_DIR, ADAPTERD_BIN, ADAPTERCTL_BIN, MAKE_MODEL_BIN,
PROMETHEUS (default /usr/bin/prometheus). Standard library and python3-yaml
only; everything listens on 127.0.0.1; child processes die with the test.
"""

import copy
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "testing"))
import promql_check  # noqa: E402
from free_port import free_port  # noqa: E402

SOURCE_DIR = Path(os.environ.get("ADAPTERD_SOURCE_DIR", Path(__file__).resolve().parents[3]))
BUILD_DIR = Path(os.environ.get("ADAPTERD_BINARY_DIR", SOURCE_DIR / "build"))
ADAPTERD = os.environ.get("ADAPTERD_BIN", str(BUILD_DIR / "server" / "adapterd"))
ADAPTERCTL = os.environ.get("ADAPTERCTL_BIN", str(BUILD_DIR / "client" / "adapterctl"))
MAKE_MODEL = os.environ.get("MAKE_MODEL_BIN", str(BUILD_DIR / "tools" / "make_model" / "adapterd-make-model"))
PROMETHEUS = os.environ.get("PROMETHEUS", "/usr/bin/prometheus")
PROM_DIR = SOURCE_DIR / "deploy" / "prometheus"
DASHBOARD = SOURCE_DIR / "deploy" / "grafana" / "dashboards" / "adapterd.json"
EXAMPLES = SOURCE_DIR / "examples"

SCRAPE_INTERVAL = "1s"
PREDICTS = 5

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG = 1: SIGKILL this child if the test process dies
    # (ctest's timeout kills only the test).
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def poll(predicate, timeout, interval=0.25):
    """Calls predicate until it returns a truthy value or timeout seconds
    pass; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


class Child:
    """A child process logging to a file; stopped by stop()."""

    def __init__(self, argv, log_path):
        self.argv = argv
        self.log_path = Path(log_path)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)

    def text(self):
        return self.log_path.read_text(errors="replace")

    def running(self):
        return self.proc.poll() is None

    def stop(self, timeout=30):
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode


def derived_prometheus_config(repo_config, tmp_prom_dir):
    """The repository's prometheus.yml with only the global intervals
    shortened (scrape and rule definitions untouched)."""
    cfg = yaml.safe_load(repo_config.read_text())
    cfg.setdefault("global", {})
    cfg["global"]["scrape_interval"] = SCRAPE_INTERVAL
    cfg["global"]["scrape_timeout"] = SCRAPE_INTERVAL
    cfg["global"]["evaluation_interval"] = SCRAPE_INTERVAL
    out = tmp_prom_dir / "prometheus.yml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


class StackTest(unittest.TestCase):
    tmp = None
    adapterd = None
    prometheus = None

    # ------------------------------------------------------------ set-up
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="adapterd-stack-"))

        def on_sigterm(signum, frame):  # ctest's timeout: clean up, then go
            cls.tearDownClass()
            os._exit(128 + signum)
        signal.signal(signal.SIGTERM, on_sigterm)
        try:
            cls._start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for child in (cls.prometheus, cls.adapterd):
            if child is not None:
                child.stop()
        cls.prometheus = cls.adapterd = None
        if cls.tmp is not None and not os.environ.get("KEEP_TMP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)
        cls.tmp = None

    @classmethod
    def _start(cls):
        for b in (ADAPTERD, ADAPTERCTL, MAKE_MODEL, PROMETHEUS):
            # The build may be relinking a binary for a moment.
            if not poll(lambda: os.access(b, os.X_OK), 60, 1):
                raise RuntimeError(f"{b} is missing")
        # A tiny model (seconds to make, to load and to train on).
        model = cls.tmp / "model"
        subprocess.run([MAKE_MODEL, "--out", str(model), "--preset", "tiny", "--seed", "5", "--init_range", "0.2"],
                       check=True, capture_output=True, timeout=300)

        # adapterd on free ports, read from its log.
        cls.adapterd = Child([ADAPTERD, "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                              "--data_dir", str(cls.tmp / "data"), "--model_dir", str(model), "--threads", "1",
                              "--max_queue_delay_us", "500", "--drain_seconds", "5",
                              # backups configured, so the backup series are real
                              "--backup_dir", str(cls.tmp / "backups"), "--backup_interval_seconds", "3600"],
                             cls.tmp / "adapterd.log")
        log = poll(lambda: (not cls.adapterd.running() or "SERVING on port" in cls.adapterd.text())
                   and cls.adapterd.text(), 180)
        if not log or not cls.adapterd.running():
            raise RuntimeError("adapterd did not start:\n" + cls.adapterd.text())
        cls.grpc_port = int(re.search(r"SERVING on port (\d+)", log).group(1))
        cls.metrics_port = int(re.search(r"/metrics on port (\d+)", log).group(1))

        # Prometheus on a copy of deploy/prometheus: rules and targets keep
        # their relative paths; the targets file names our server.
        prom_dir = cls.tmp / "prometheus"
        shutil.copytree(PROM_DIR, prom_dir)
        (prom_dir / "targets" / "adapterd.yml").write_text(f"- targets:\n    - 127.0.0.1:{cls.metrics_port}\n")
        config = derived_prometheus_config(PROM_DIR / "prometheus.yml", prom_dir)
        for attempt in range(3):  # the free port may be taken in between
            cls.prom_port = free_port()
            cls.prometheus = Child([PROMETHEUS, f"--config.file={config}",
                                    f"--storage.tsdb.path={cls.tmp / f'tsdb{attempt}'}",
                                    f"--web.listen-address=127.0.0.1:{cls.prom_port}"],
                                   cls.tmp / f"prometheus{attempt}.log")
            cls.prom_url = f"http://127.0.0.1:{cls.prom_port}"
            ready = poll(lambda: not cls.prometheus.running() or cls._prom_ready(), 60)
            if ready and cls.prometheus.running():
                break
            cls.prometheus.stop()
        else:
            raise RuntimeError("prometheus did not start:\n" + cls.prometheus.text())
        cls.prom = promql_check.Prometheus(cls.prom_url)

        cls._drive_traffic()
        cls._wait_for_scrapes()

    @classmethod
    def _prom_ready(cls):
        try:
            return http_get(cls.prom_url + "/-/ready", 2)[0] == 200
        except OSError:
            return False

    @classmethod
    def ctl(cls, *args, timeout=120):
        return subprocess.run([ADAPTERCTL, "--server", f"127.0.0.1:{cls.grpc_port}", "--timeout", str(timeout),
                               *args], capture_output=True, text=True, timeout=timeout + 60)

    @classmethod
    def _drive_traffic(cls):
        # A training job, watched to SUCCEEDED.
        r = cls.ctl("--json", "train", "--detach", "--task", "sentiment", "--data",
                    str(EXAMPLES / "sentiment_train.csv"), "--epochs", "1", "--seed", "7")
        if r.returncode != 0:
            raise RuntimeError(f"train: {r.stderr}{r.stdout}")
        job_id = json.loads(r.stdout)["job_id"]
        r = cls.ctl("jobs", "watch", job_id, timeout=300)
        if r.returncode != 0 or "SUCCEEDED" not in r.stdout + r.stderr:
            raise RuntimeError(f"watch {job_id}: {r.returncode} {r.stderr}{r.stdout}")
        # Predict calls, and failing ones: an unknown task (NOT_FOUND).
        for i in range(PREDICTS):
            r = cls.ctl("predict", "--task", "sentiment", f"a wonderful film, number {i}")
            if r.returncode != 0:
                raise RuntimeError(f"predict: {r.stderr}")
        r = cls.ctl("predict", "--task", "no-such-task", "text")
        if r.returncode != 4:  # adapterctl: 4 = not found
            raise RuntimeError(f"predict on an unknown task: exit {r.returncode} {r.stderr}")
        cls.failed_calls = 1
        # A backup now (SIGUSR1), so that the backup panels and alerts see a
        # real success timestamp.
        cls.adapterd.proc.send_signal(signal.SIGUSR1)
        # Jobs left waiting in the training queue (one runs, one waits), so
        # that the queue depth has series; cancelled once Prometheus saw them.
        cls.queued_jobs = []
        for task in ("topics-a", "topics-b"):
            r = cls.ctl("--json", "train", "--detach", "--task", task, "--data", str(EXAMPLES / "topics_train.csv"),
                        "--epochs", "30", "--seed", "3")
            if r.returncode != 0:
                raise RuntimeError(f"train {task}: {r.stderr}")
            cls.queued_jobs.append(json.loads(r.stdout)["job_id"])
        cls.saw_queue = bool(poll(lambda: cls._value("sum(adapterd_training_queue_depth)") > 0, 60, 0.5))
        for job_id in cls.queued_jobs:
            cls.ctl("jobs", "cancel", job_id)

    @classmethod
    def _value(cls, promql):
        """The single value of an instant query, or -1."""
        try:
            r = cls.prom.query(promql)
        except OSError:
            return -1
        result = r.get("data", {}).get("result", []) if r.get("status") == "success" else []
        return float(result[0]["value"][1]) if len(result) == 1 else -1

    @classmethod
    def _wait_for_scrapes(cls):
        # Prometheus has scraped the traffic (the counters' final values)...
        ok = 'sum(adapterd_requests_total{method="Predict", code="OK"})'
        bad = 'sum(adapterd_requests_total{method="Predict", code="NOT_FOUND"})'
        backup = 'sum(adapterd_backups_total{result="ok"})'
        seen = poll(lambda: cls._value(ok) == PREDICTS and cls._value(bad) == cls.failed_calls
                    and cls._value(backup) >= 1, 120, 0.5)
        if not seen:
            raise RuntimeError(f"Prometheus did not scrape the traffic: {ok} = {cls._value(ok)}, "
                               f"{bad} = {cls._value(bad)}, {backup} = {cls._value(backup)}\n"
                               + cls.prometheus.text()[-4000:] + "\nadapterd:\n" + cls.adapterd.text()[-4000:])

        # ... a few more times (rate() needs two samples in its window), and
        # has evaluated every rule group since.
        time.sleep(3)

        def rules_evaluated():
            groups = cls.prom.get("/api/v1/rules").get("data", {}).get("groups", [])
            return groups and all(not g.get("lastEvaluation", "").startswith("0001") for g in groups) and groups
        cls.rule_groups = poll(rules_evaluated, 60, 0.5)

    # ------------------------------------------------------------- tests
    def test_1_prometheus_scrapes_adapterd_through_the_repo_config(self):
        targets = self.prom.get("/api/v1/targets")["data"]["activeTargets"]
        ours = [t for t in targets if t["labels"].get("job") == "adapterd"]
        self.assertEqual(len(ours), 1, targets)
        self.assertEqual(ours[0]["labels"]["instance"], f"127.0.0.1:{self.metrics_port}")
        self.assertEqual(ours[0]["health"], "up", ours[0])
        self.assertEqual(self._value('up{job="adapterd"}'), 1)

    def test_2_prometheus_loaded_every_repo_rule_and_evaluates_them_cleanly(self):
        self.assertTrue(self.rule_groups, "rule groups were not evaluated")
        loaded = {r["name"] for g in self.rule_groups for r in g["rules"]}
        expected = set()
        for f in sorted(PROM_DIR.glob("rules/*.yml")):
            for g in yaml.safe_load(f.read_text())["groups"]:
                expected |= {r.get("alert") or r.get("record") for r in g["rules"]}
        self.assertEqual(loaded, expected)
        # Runtime evaluation errors (many-to-many matching, ...) show here.
        bad = [(r["name"], r.get("lastError")) for g in self.rule_groups for r in g["rules"]
               if r.get("health") not in ("ok", "unknown")]
        self.assertEqual(bad, [])

    def test_3_dashboard_queries_evaluate_and_their_metrics_exist(self):
        exprs = promql_check.dashboard_expressions(DASHBOARD)
        self.assertGreater(len(exprs), 20)
        problems = promql_check.check(self.prom, exprs)
        if problems:
            self.fail(f"{len(problems)} problem(s):\n" + promql_check.report(problems) + self._queue_note(problems))

    def test_4_rule_queries_evaluate_and_their_metrics_exist(self):
        exprs = promql_check.rule_expressions(PROM_DIR / "rules")
        self.assertGreater(len(exprs), 5)
        problems = promql_check.check(self.prom, exprs)
        if problems:
            self.fail(f"{len(problems)} problem(s):\n" + promql_check.report(problems) + self._queue_note(problems))

    def _queue_note(self, problems):
        if "adapterd_training_queue_depth" in promql_check.missing_names(problems) and not self.saw_queue:
            return "\n(no job was seen waiting in the queue during the test)"
        return ""

    def test_5_checker_reports_a_misspelled_panel_metric(self):
        # The sensitivity of tests 3 and 4: a dashboard copy whose "Tasks per
        # batch" panel misspells its metric must be reported, with the
        # misspelled name and the panel, and nothing else may change.
        dash = json.loads(DASHBOARD.read_text())
        mutated = copy.deepcopy(dash)
        panel = next(p for p in mutated["panels"] if p.get("title") == "Tasks per batch")
        for t in panel["targets"]:
            t["expr"] = t["expr"].replace("adapterd_batch_tasks_", "adapterd_batch_taks_")
        path = self.tmp / "dashboard-typo.json"
        path.write_text(json.dumps(mutated))

        before = {str(p) for p in promql_check.check(self.prom, promql_check.dashboard_expressions(DASHBOARD))}
        after = promql_check.check(self.prom, promql_check.dashboard_expressions(path))
        new = [p for p in after if str(p) not in before]
        self.assertTrue(new, "the checker did not notice the misspelled metric")
        for p in new:
            self.assertIn("'Tasks per batch'", p.where)
        self.assertEqual(sorted(promql_check.missing_names(new)),
                         ["adapterd_batch_taks_bucket", "adapterd_batch_taks_count", "adapterd_batch_taks_sum"])
        # And the command line tool fails on it.
        cli = subprocess.run([sys.executable, str(Path(promql_check.__file__)), "--prometheus", self.prom_url,
                              "--dashboard", str(path)], capture_output=True, text=True, timeout=120)
        self.assertEqual(cli.returncode, 1, cli.stdout + cli.stderr)
        self.assertIn("adapterd_batch_taks_bucket", cli.stdout)

    def test_6_checker_reports_a_query_that_does_not_parse(self):
        dash = json.loads(DASHBOARD.read_text())
        panel = next(p for p in dash["panels"] if p.get("title") == "Cold load time")
        panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace("sum by (tier, le) (", "sum by (tier, le) ((", 1)
        path = self.tmp / "dashboard-syntax.json"
        path.write_text(json.dumps(dash))
        problems = [p for p in promql_check.check(self.prom, promql_check.dashboard_expressions(path))
                    if "query failed" in p.message]
        self.assertEqual(len(problems), 1, [str(p) for p in problems])
        self.assertIn("'Cold load time'", problems[0].where)

    def test_7_healthy_server_raises_no_alert(self):
        # A failing call by a client (NOT_FOUND) is no server error, and a
        # running server is serving: nothing but what the host's own disk
        # warrants may be pending or firing.
        r = self.prom.query('ALERTS{alertstate=~"pending|firing"}')
        self.assertEqual(r["status"], "success", r)
        disk = {"AdapterdDataDiskNearlyFull", "AdapterdDataDiskFillingUp"}
        alerts = [a["metric"] for a in r["data"]["result"] if a["metric"]["alertname"] not in disk]
        self.assertEqual(alerts, [])

    def test_8_not_serving_alert_goes_pending_when_adapterd_stops(self):
        # Last (it stops the server): the rules see the real job's up series.
        self.assertEqual(self.adapterd.stop(), 0, self.adapterd.text())
        pending = poll(lambda: self.prom.query('ALERTS{alertname="AdapterdNotServing"}')["data"]["result"], 60, 0.5)
        self.assertTrue(pending, "AdapterdNotServing did not go pending after adapterd stopped")
        self.assertEqual(pending[0]["metric"]["instance"], f"127.0.0.1:{self.metrics_port}")
        self.assertEqual(pending[0]["metric"]["alertstate"], "pending")


if __name__ == "__main__":
    unittest.main(verbosity=2)

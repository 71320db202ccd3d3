#!/usr/bin/env python3
"""deploy_k8s_router_test: the router's nginx configuration, run by Debian's nginx.

    router_test.py REPO_ROOT WORK_DIR [ADAPTERCTL]

1. Loopback layout (tests/deploy/k8s/render_router.sh, the one the e2e tests
   use) in front of three fake replicas (nginx instances on loopback that
   answer gRPC-shaped responses naming themselves and echoing the metadata
   they received): nginx -t passes; a task's calls always reach the same
   replica; tasks spread over the replicas; authorization and x-task-id
   arrive unchanged; with a replica stopped, its tasks answer gRPC
   UNAVAILABLE (14, a trailers-only response) on every call, with exactly one
   connection attempt each, to that replica only (no retry elsewhere, never
   taken out of the ring), while the other tasks stay where they were; a real
   gRPC client (adapterctl, when given) reports UNAVAILABLE with the router's
   message; nginx stops cleanly.
2. Container layout: the files of the rendered ConfigMap adapterd-router
   (deploy/k8s, as kubectl would create it) at ROOT/etc/nginx/adapterd/, nginx
   run exactly as the Deployment runs it (-p ROOT/tmp/ -c
   ROOT/etc/nginx/adapterd/nginx.conf), the adapterd-shard-N names in a
   private /etc/hosts (a mount namespace), in a private network namespace (so
   port 8500 is free). As root: nginx starts, serves on 8500 and answers 14
   for unreachable shards, by hash; otherwise (user namespace) nginx -t only;
   without namespaces, nginx -t must fail only on resolving adapterd-shard-0
   in ROOT/etc/nginx/adapterd/adapterd-upstream-servers.conf (the include
   resolved).
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testing"))
from free_port import free_ports  # noqa: E402

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CURL = shutil.which("curl")
FAILURES = []


def check(cond, what, detail=""):
    """Records a check; `detail` is printed only when it fails."""
    if not cond and detail:
        what = f"{what}: {detail}"
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def wait_port(host, port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_nginx(args, log, prefix=()):
    return subprocess.Popen(list(prefix) + [NGINX] + args + ["-g", "daemon off;"], stdout=log,
                            stderr=subprocess.STDOUT)


def stop_nginx(proc, sig=signal.SIGQUIT, timeout=10.0):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def grpc_call(port, task=None, auth=None, host="127.0.0.1", path="/adapterd.v1.Adapterd/Predict"):
    """A gRPC-shaped POST over h2c (curl); returns (http status, headers, body). No body: the
    request's HEADERS frame ends the stream, so that an early answer (the router's UNAVAILABLE,
    sent before the body is read, then RST_STREAM NO_ERROR) cannot race curl's upload."""
    cmd = [CURL, "-sS", "--http2-prior-knowledge", "-X", "POST", "--max-time", "10",
           "-H", "content-type: application/grpc", "-H", "te: trailers",
           "-D", "-", f"http://{host}:{port}{path}"]
    if task is not None:
        cmd[1:1] = ["-H", f"x-task-id: {task}"]
    if auth is not None:
        cmd[1:1] = ["-H", f"authorization: {auth}"]
    out = subprocess.run(cmd, capture_output=True, timeout=20)
    if out.returncode != 0:
        print(f"curl exit {out.returncode}: {out.stderr.decode('utf-8', 'replace').strip()}", flush=True)
    text = out.stdout.decode("utf-8", "replace")
    head, _, body = text.partition("\r\n\r\n")
    lines = head.split("\r\n")
    m = re.match(r"HTTP/2 (\d+)", lines[0] if lines else "")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return (int(m.group(1)) if m else None), headers, body


def raw_response_frames(port, task, host="127.0.0.1"):
    """Sends one gRPC-shaped request with a hand-made HTTP/2 client and returns the
    (type, flags) of the frames of stream 1, to see the response's shape."""
    def lit(n, v):  # HPACK literal header field without indexing, new name, no Huffman
        n, v = n.encode(), v.encode()
        return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v

    def frame(t, f, sid, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([t, f]) + struct.pack(">I", sid) + payload
    hdrs = b"".join(lit(n, v) for n, v in [(":method", "POST"), (":scheme", "http"),
                                           (":path", "/adapterd.v1.Adapterd/Predict"), (":authority", "x"),
                                           ("content-type", "application/grpc"), ("te", "trailers"),
                                           ("x-task-id", task)])
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 0x4, 1, hdrs) +
              frame(0, 0x1, 1, b"\x00\x00\x00\x00\x00"))
    buf, frames = b"", []
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
            while len(buf) >= 9:
                ln = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + ln:
                    break
                t, f, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                buf = buf[9 + ln:]
                if sid == 1:
                    frames.append((t, f))
                    if f & 0x1 or t == 3:
                        return frames
    except socket.timeout:
        pass
    finally:
        s.close()
    return frames


def write_fake_replica(d, port):
    """An nginx answering every h2c POST like a gRPC server (grpc-status 0),
    naming itself and echoing the metadata it received."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"""worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {d}/client_body_temp;
    proxy_temp_path {d}/proxy_temp;
    fastcgi_temp_path {d}/fastcgi_temp;
    uwsgi_temp_path {d}/uwsgi_temp;
    scgi_temp_path {d}/scgi_temp;
    access_log off;
    server {{
        listen 127.0.0.1:{port} http2;
        location / {{
            default_type application/grpc;
            add_header x-replica {port};
            add_header x-seen-task-id "$http_x_task_id";
            add_header x-seen-authorization "$http_authorization";
            add_header x-seen-path "$request_uri";
            add_header grpc-status 0;
            return 200 "";
        }}
    }}
}}
""")
    return os.path.join(d, "nginx.conf")


def upstream_attempts(error_log, since):
    with open(error_log, encoding="utf-8", errors="replace") as f:
        f.seek(since)
        text = f.read()
    return re.findall(r'while connecting to upstream.*?upstream: "grpc://([^"]+)"', text)


def loopback_test(repo, work, adapterctl):
    print("== loopback layout (render_router.sh)", flush=True)
    out = os.path.join(work, "router")
    router_port, *rep_ports = free_ports(4)
    upstreams = [f"127.0.0.1:{p}" for p in rep_ports]
    render = os.path.join(repo, "tests", "deploy", "k8s", "render_router.sh")

    # The script's interface: bad arguments are usage errors.
    for bad in ([out, str(router_port)], [out, "70000", upstreams[0]], [out, str(router_port), "127.0.0.1"]):
        r = subprocess.run([render] + bad, capture_output=True)
        check(r.returncode == 2, f"render_router.sh {' '.join(bad[1:])}: usage error (exit 2)")
    r = subprocess.run([render, out, str(router_port)] + upstreams, capture_output=True, text=True)
    if not check(r.returncode == 0 and r.stdout == "", "render_router.sh writes the layout", r.stderr.strip()):
        return
    with open(os.path.join(out, "nginx.conf")) as f:
        main_conf = f.read()
    router_conf = os.path.join(repo, "deploy", "k8s", "router", "adapterd-router.conf")
    check(f"include {os.path.realpath(router_conf)};" in main_conf,
          "the layout includes the repository's adapterd-router.conf itself (no copy)")
    with open(os.path.join(out, "adapterd-upstream-servers.conf")) as f:
        check(re.findall(r"^server (\S+) max_fails=0;$", f.read(), re.M) == upstreams,
              "adapterd-upstream-servers.conf: the upstreams, in order, max_fails=0")

    conf = os.path.join(out, "nginx.conf")
    elog = os.path.join(out, "error.log")
    t = subprocess.run([NGINX, "-t", "-c", conf, "-e", elog], capture_output=True, text=True)
    if not check(t.returncode == 0, f"nginx -t -c {conf}", t.stderr.strip()):
        return

    logs = open(os.path.join(work, "nginx-output.log"), "wb")
    replicas = {}
    for p in rep_ports:
        replicas[p] = start_nginx(["-c", write_fake_replica(os.path.join(work, f"replica-{p}"), p),
                                   "-e", os.path.join(work, f"replica-{p}", "error.log")], logs)
    router = start_nginx(["-c", conf, "-e", elog], logs)
    try:
        if not check(all(wait_port("127.0.0.1", p) for p in rep_ports + [router_port]),
                     "the router and the three fake replicas listen"):
            return

        # Sharding by task.
        tasks = [f"task-{i}" for i in range(24)]
        owner = {}
        for task in tasks:
            st, h, _ = grpc_call(router_port, task, auth="Bearer test-key-1")
            if not check(st == 200 and h.get("grpc-status") == "0", f"{task}: answered through the router", f"{st} {h}"):
                return
            owner[task] = int(h.get("x-replica", 0))
            check(h.get("x-seen-task-id") == task and h.get("x-seen-authorization") == "Bearer test-key-1"
                  and h.get("x-seen-path") == "/adapterd.v1.Adapterd/Predict",
                  f"{task}: x-task-id, authorization and the method path reach the replica unchanged", str(h))
        check(set(owner.values()) <= set(rep_ports) and len(set(owner.values())) >= 2,
              f"tasks spread over the replicas: {sorted(set(owner.values()))}")
        again = {task: int(grpc_call(router_port, task)[1].get("x-replica", 0)) for task in tasks}
        check(again == owner, "every task reaches the same replica again")
        anyone = []
        for _ in range(6):
            st, h, _ = grpc_call(router_port, None, auth="Bearer test-key-1", path="/adapterd.v1.Adapterd/ListTasks")
            anyone.append(int(h.get("x-replica", 0)))
            check(st == 200 and h.get("x-seen-authorization") == "Bearer test-key-1"
                  and h.get("x-seen-path") == "/adapterd.v1.Adapterd/ListTasks",
                  "a call without x-task-id reaches a replica, metadata and method unchanged", f"{st} {h}")
        check(set(anyone) == set(rep_ports), "calls without x-task-id go round-robin over the replicas", str(anyone))

        # A dead replica: its tasks answer UNAVAILABLE, the others are untouched.
        dead = owner[tasks[0]]
        stop_nginx(replicas[dead])
        check(not wait_port("127.0.0.1", dead, timeout=0.3), f"replica {dead} stopped")
        dead_tasks = [t for t in tasks if owner[t] == dead]
        live_tasks = [t for t in tasks if owner[t] != dead]
        since = os.path.getsize(elog)
        calls = 0
        for _ in range(3):  # more failures than nginx's default max_fails (1)
            for task in dead_tasks:
                st, h, _ = grpc_call(router_port, task)
                calls += 1
                check(st == 200 and h.get("grpc-status") == "14" and "unavailable" in h.get("grpc-message", ""),
                      f"{task} (replica {dead} down): grpc-status 14 with a message", f"{st} {h}")
        time.sleep(0.2)
        attempts = upstream_attempts(elog, since)
        check(len(attempts) == calls and set(attempts) == {f"127.0.0.1:{dead}"},
              f"one connection attempt per call, to the dead replica only (no retry elsewhere): "
              f"{calls} calls, attempts {sorted(set(attempts))} x{len(attempts)}")
        for task in live_tasks:
            st, h, _ = grpc_call(router_port, task)
            check(st == 200 and int(h.get("x-replica", 0)) == owner[task],
                  f"{task}: still served by its replica {owner[task]}")
        anyone = [grpc_call(router_port, None)[1].get("x-replica") for _ in range(6)]
        check(all(a is not None and int(a) != dead for a in anyone) and len(set(anyone)) == 2,
              "calls without x-task-id skip the dead replica, round-robin over the others", str(anyone))
        frames = raw_response_frames(router_port, dead_tasks[0])
        check(frames == [(1, 0x5)],
              "the UNAVAILABLE answer is trailers-only: one HEADERS frame with END_STREAM", str(frames))
        if adapterctl:
            r = subprocess.run([adapterctl, "--server", f"127.0.0.1:{router_port}", "--timeout", "10",
                                "tasks", "get", dead_tasks[0]], capture_output=True, text=True, timeout=60)
            check(r.returncode == 9 and "the replica that owns this task is unavailable" in r.stderr,
                  "adapterctl (a real gRPC client): UNAVAILABLE (exit 9) with the router's message",
                  f"exit {r.returncode}: {r.stderr.strip()}")
        for p in rep_ports:
            stop_nginx(replicas[p])
        st, h, _ = grpc_call(router_port, None)
        check(st == 200 and h.get("grpc-status") == "14" and "no adapterd replica" in h.get("grpc-message", ""),
              "with every replica down, a call without x-task-id answers grpc-status 14", f"{st} {h}")
        with open(os.path.join(out, "access.log")) as f:
            check(re.search(rf'task="{re.escape(dead_tasks[0])}" upstream=127\.0\.0\.1:{dead} status=200 '
                            r'grpc_status=- grpc_status_in_headers=14 ', f.read()) is not None,
                  "the access log names task, upstream and gRPC status")
    finally:
        rc = stop_nginx(router)
        check(rc == 0, f"the router stops cleanly on SIGQUIT (exit {rc})")
        for p, proc in replicas.items():
            stop_nginx(proc)
        logs.close()


CONTAINER_HOSTS = {f"adapterd-shard-{i}": f"10.0.0.{i + 1}" for i in range(3)}


def materialize_container_layout(base_json, root):
    """The rendered ConfigMap adapterd-router's files at ROOT/etc/nginx/adapterd/, as the
    Deployment's volume mounts them; an empty ROOT/tmp/ (its emptyDir)."""
    with open(base_json) as f:
        objs = json.load(f)
    cm = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "adapterd-router"]
    if not check(len(cm) == 1, "the rendered base has the ConfigMap adapterd-router"):
        return None
    shutil.rmtree(root, ignore_errors=True)
    conf_dir = os.path.join(root, "etc", "nginx", "adapterd")
    os.makedirs(conf_dir)
    os.makedirs(os.path.join(root, "tmp"))
    for name, text in cm[0]["data"].items():
        with open(os.path.join(conf_dir, name), "w") as f:
            f.write(text)
    with open(os.path.join(root, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n")
        for name, ip in CONTAINER_HOSTS.items():
            f.write(f"{ip} {name}\n")
    return conf_dir


def container_inside(root, full):
    """Runs inside `unshare` (a private mount and network namespace)."""
    subprocess.run(["mount", "--bind", os.path.join(root, "hosts"), "/etc/hosts"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    args = ["-p", os.path.join(root, "tmp") + "/", "-c", os.path.join(root, "etc/nginx/adapterd/nginx.conf"),
            "-e", "stderr"]
    # As in the pod (full run, root outside): nginx runs as uid 101, not root, and its /tmp is
    # world-writable (an emptyDir). In a user namespace (not root outside) only uid 0 exists:
    # nginx, "root" there, would chown its temp directories to nobody, which the namespace lacks.
    as_101, extra = [], []
    if full and shutil.which("setpriv"):
        as_101 = ["setpriv", "--reuid", "101", "--regid", "101", "--clear-groups"]
        os.chmod(os.path.join(root, "tmp"), 0o1777)
    elif not full:
        extra = ["-g", "user root root;"]
    print(f"container layout: nginx runs as {'uid 101' if as_101 else 'root'}", flush=True)
    # nginx's stdout is its own to reopen as /dev/stdout (the access log), as runc chowns a
    # container's stdio to the container's user.
    log_path = os.path.join(root, "nginx-output.log")
    with open(log_path, "wb") as log:
        if as_101:
            os.chown(log_path, 101, 101)
        t = subprocess.run(as_101 + [NGINX, "-t"] + args + extra, stdout=log, stderr=subprocess.PIPE, text=True)
    check(t.returncode == 0, f"container layout: nginx -t {' '.join(args)}", t.stderr.strip())
    if t.returncode != 0 or not full:
        return
    with open(log_path, "ab") as log:
        proc = start_nginx(args, log, as_101)
        try:
            if not check(wait_port("127.0.0.1", 8500), "container layout: nginx serves on port 8500"):
                return
            owner = {}
            for i in range(12):
                task = f"task-{i}"
                for _ in range(2):
                    st, h, _ = grpc_call(8500, task)
                    check(st == 200 and h.get("grpc-status") == "14",
                          f"container layout: {task} (shard unreachable): grpc-status 14", f"{st} {h}")
                    time.sleep(0.05)
                    with open(log_path, encoding="utf-8", errors="replace") as f:
                        ups = re.findall(rf'task="{task}" upstream=(\S+) ', f.read())
                    owner.setdefault(task, set()).update(ups)
            addrs = {f"{ip}:8500" for ip in CONTAINER_HOSTS.values()}
            check(all(len(v) == 1 and v <= addrs for v in owner.values()),
                  "container layout: each task goes to one adapterd-shard-N", str(owner))
            check(len(set().union(*owner.values())) >= 2, "container layout: tasks spread over the shards")
            check(os.path.isdir(os.path.join(root, "tmp", "client_body_temp")) and
                  os.path.isfile(os.path.join(root, "tmp", "nginx.pid")),
                  "container layout: pid and temp paths under the -p prefix (the pod's /tmp)")
        finally:
            rc = stop_nginx(proc)
            check(rc == 0, f"container layout: nginx stops cleanly on SIGQUIT (exit {rc})")


def container_test(repo, work, base_json):
    print("== container layout (the rendered ConfigMap, as mounted in the pod)", flush=True)
    root = os.path.join(work, "container")
    if materialize_container_layout(base_json, root) is None:
        return
    me = [sys.executable, os.path.abspath(__file__), "--container-inside", root]
    probe = lambda flags: subprocess.run(["unshare"] + flags + ["true"], capture_output=True).returncode == 0  # noqa
    if shutil.which("unshare") and os.geteuid() == 0 and probe(["-m", "-n"]):
        mode, cmd = "full run (root: mount + network namespace)", ["unshare", "-m", "-n"] + me + ["full"]
    elif shutil.which("unshare") and probe(["-r", "-m", "-n"]):
        mode, cmd = "nginx -t (user namespace)", ["unshare", "-r", "-m", "-n"] + me + ["test"]
    else:
        mode, cmd = "no namespaces: nginx -t up to name resolution", None
    print(f"container layout: {mode}", flush=True)
    if cmd:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout)
        for ln in r.stdout.splitlines():
            if ln.startswith("FAIL  "):
                FAILURES.append(ln[6:])
        check(r.returncode == 0, f"container layout run (exit {r.returncode})", r.stderr.strip()[-2000:])
        return
    conf_dir = os.path.join(root, "etc", "nginx", "adapterd")
    t = subprocess.run([NGINX, "-t", "-p", os.path.join(root, "tmp") + "/", "-c", os.path.join(conf_dir, "nginx.conf"),
                        "-e", "stderr"], capture_output=True, text=True)
    errs = [ln for ln in t.stderr.splitlines() if "[emerg]" in ln]
    check(len(errs) == 1 and re.search(r'host not found in upstream "adapterd-shard-0:8500" in '
                                       + re.escape(os.path.join(conf_dir, "adapterd-upstream-servers.conf")),
                                       errs[0]) is not None,
          f"container layout: the includes resolve to {conf_dir} (only the cluster name fails here)", str(errs))


def main(argv):
    if len(argv) >= 3 and argv[1] == "--container-inside":
        container_inside(argv[2], argv[3] == "full")
        return 1 if FAILURES else 0
    if len(argv) not in (3, 4):
        print(f"usage: {argv[0]} REPO_ROOT WORK_DIR [ADAPTERCTL]", file=sys.stderr)
        return 2
    repo, work = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    adapterctl = argv[3] if len(argv) == 4 and os.access(argv[3], os.X_OK) else None
    if not os.access(NGINX, os.X_OK):
        print("FAIL: nginx missing (Debian: nginx-light; run scripts/install-deps.sh)")
        return 1
    if not CURL or "HTTP2" not in subprocess.run([CURL, "-V"], capture_output=True, text=True).stdout:
        print("FAIL: curl with HTTP/2 missing (Debian: curl)")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if not adapterctl:
        print("note: no adapterctl given: the real gRPC client check is skipped")

    loopback_test(repo, work, adapterctl)

    here = os.path.dirname(os.path.abspath(__file__))
    base_json = os.path.join(work, "base.json")
    with open(base_json, "w") as f:
        r = subprocess.run([sys.executable, os.path.join(here, "kustomize_render.py"),
                            os.path.join(repo, "deploy", "k8s")], stdout=f)
    if check(r.returncode == 0, "render deploy/k8s"):
        container_test(repo, work, base_json)

    print(f"router_test: {len(FAILURES)} failure(s)")
    for f in FAILURES:
        print(f"FAILED: {f}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

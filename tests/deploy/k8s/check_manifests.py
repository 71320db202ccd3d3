#!/usr/bin/env python3
"""Consistency checks of the rendered Kubernetes manifests (deploy/k8s).

    check_manifests.py REPO_ROOT BASE.json GPU.json

BASE.json and GPU.json: the rendered base and gpu kustomizations
(kustomize_render.py). The schema itself is checked by validate_k8s.js; this
checks what a schema cannot: that the objects fit together and fit adapterd.
Prints every failed check and exits 1 if any failed.
"""
import base64
import json
import os
import re
import sys

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def find(objects, kind, name):
    hits = [o for o in objects if o.get("kind") == kind and o.get("metadata", {}).get("name") == name]
    return hits[0] if len(hits) == 1 else None


def container(workload, name):
    for c in workload["spec"]["template"]["spec"].get("containers", []):
        if c.get("name") == name:
            return c
    return None


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def adapterd_flags(repo):
    """Flag names adapterd accepts, from its option parser's source (every
    option also reads ADAPTERD_<NAME upper-case>)."""
    with open(os.path.join(repo, "server", "server_options.cc"), encoding="utf-8") as f:
        src = f.read()
    flags = set(re.findall(r'add_option\(\s*"--([a-z0-9_]+)"', src))
    flags |= set(re.findall(r'set_config\(\s*"--([a-z0-9_]+)"', src))
    return flags


def check_common(objects, label, repo):
    """Checks that hold for every variant (base and gpu)."""
    P = f"[{label}]"
    ss = find(objects, "StatefulSet", "adapterd")
    if not check(ss is not None, f"{P} one StatefulSet adapterd"):
        return
    spec = ss["spec"]
    pod = spec["template"]["spec"]
    c = container(ss, "adapterd")
    if not check(c is not None, f"{P} StatefulSet has a container 'adapterd'"):
        return
    env = env_of(c)
    replicas = spec.get("replicas")
    check(isinstance(replicas, int) and replicas >= 1, f"{P} replicas is a positive integer")
    service_name = spec.get("serviceName")

    # Peers: one per replica, adapterd-N.<headless service>:<grpc port>, itself included.
    peers = (env.get("ADAPTERD_PEERS") or "").split(",")
    check(len(peers) == replicas,
          f"{P} ADAPTERD_PEERS lists {len(peers)} replicas, the StatefulSet has replicas={replicas}")
    check(peers == [f"adapterd-{i}.{service_name}:8500" for i in range(replicas or 0)],
          f"{P} ADAPTERD_PEERS is adapterd-0..{(replicas or 0) - 1}.{service_name}:8500 in order: {peers}")

    # Headless Service governing the StatefulSet.
    hs = find(objects, "Service", service_name)
    if check(hs is not None, f"{P} the StatefulSet's serviceName '{service_name}' is a Service"):
        check(hs["spec"].get("clusterIP") == "None", f"{P} Service {service_name} is headless (clusterIP: None)")
        check(hs["spec"].get("publishNotReadyAddresses") is True,
              f"{P} Service {service_name} publishes not-ready addresses (peers resolve while starting)")
        check(any(p.get("port") == 8500 for p in hs["spec"].get("ports", [])),
              f"{P} Service {service_name} has port 8500")

    # Per-replica Services, the router's upstreams.
    shards = sorted(o["metadata"]["name"] for o in objects
                    if o.get("kind") == "Service" and o["metadata"]["name"].startswith("adapterd-shard-"))
    check(shards == sorted(f"adapterd-shard-{i}" for i in range(replicas or 0)),
          f"{P} one Service adapterd-shard-N per replica: {shards}")
    for i in range(replicas or 0):
        s = find(objects, "Service", f"adapterd-shard-{i}")
        if s:
            check(s["spec"].get("selector", {}).get("statefulset.kubernetes.io/pod-name") == f"adapterd-{i}",
                  f"{P} Service adapterd-shard-{i} selects pod adapterd-{i}")
            check(s["spec"].get("clusterIP") != "None", f"{P} Service adapterd-shard-{i} has a cluster IP")
            check(any(p.get("port") == 8500 for p in s["spec"].get("ports", [])),
                  f"{P} Service adapterd-shard-{i} has port 8500")

    # The router's ConfigMap: byte-identical to the repository's files.
    cm = find(objects, "ConfigMap", "adapterd-router")
    if check(cm is not None, f"{P} ConfigMap adapterd-router"):
        router_dir = os.path.join(repo, "deploy", "k8s", "router")
        for fname in sorted(os.listdir(router_dir)):
            with open(os.path.join(router_dir, fname), encoding="utf-8") as f:
                want = f.read()
            check(cm["data"].get(fname) == want,
                  f"{P} ConfigMap adapterd-router's {fname} is byte-identical to deploy/k8s/router/{fname}")
        check(set(cm["data"]) == set(os.listdir(router_dir)),
              f"{P} ConfigMap adapterd-router holds exactly the files of deploy/k8s/router/")
        servers = re.findall(r"^\s*server\s+(\S+)(.*);", cm["data"].get("adapterd-upstream-servers.conf", ""),
                             re.M)
        check([s for s, _ in servers] == [f"adapterd-shard-{i}:8500" for i in range(replicas or 0)],
              f"{P} the router's upstream servers are adapterd-shard-0..{(replicas or 0) - 1}:8500: {servers}")
        check(all(re.search(r"\bmax_fails=0\b", rest) for _, rest in servers),
              f"{P} every upstream server has max_fails=0")
        conf = cm["data"].get("adapterd-router.conf", "")
        for needle in ["hash $http_x_task_id consistent;", "grpc_next_upstream off;", "grpc_pass grpc://adapterd;",
                       "include adapterd-upstream-servers.conf;", "include adapterd-router-listen.conf;",
                       "client_max_body_size 0;"]:
            check(needle in conf, f"{P} adapterd-router.conf has '{needle}'")
        check(re.search(r"^\s*listen\s+8500\s+http2;", cm["data"].get("adapterd-router-listen.conf", ""), re.M),
              f"{P} the router listens on 8500 (http2)")
        check(re.search(r"^\s*include\s+adapterd-router\.conf;", cm["data"].get("nginx.conf", ""), re.M),
              f"{P} nginx.conf includes adapterd-router.conf by relative path")

    # Router Deployment: mounts that ConfigMap where its command reads it.
    rd = find(objects, "Deployment", "adapterd-router")
    if check(rd is not None, f"{P} Deployment adapterd-router"):
        check(rd["spec"].get("replicas") == 2, f"{P} the router runs 2 replicas")
        rc = container(rd, "nginx")
        if check(rc is not None, f"{P} router container 'nginx'"):
            cmd = rc.get("command", [])
            check("-c" in cmd and cmd[cmd.index("-c") + 1] == "/etc/nginx/adapterd/nginx.conf",
                  f"{P} the router runs nginx -c /etc/nginx/adapterd/nginx.conf: {cmd}")
            check("-p" in cmd and cmd[cmd.index("-p") + 1] == "/tmp/", f"{P} the router runs nginx -p /tmp/")
            mounts = {m["mountPath"]: m["name"] for m in rc.get("volumeMounts", [])}
            vols = {v["name"]: v for v in rd["spec"]["template"]["spec"].get("volumes", [])}
            cfg = vols.get(mounts.get("/etc/nginx/adapterd"), {})
            check(cfg.get("configMap", {}).get("name") == "adapterd-router" and "items" not in cfg["configMap"],
                  f"{P} the whole ConfigMap adapterd-router is mounted at /etc/nginx/adapterd")
            check("emptyDir" in vols.get(mounts.get("/tmp"), {}), f"{P} the router's /tmp (-p prefix) is an emptyDir")
            check_security(rd, rc, P + " router", uid=None)
        rs = find(objects, "Service", "adapterd-router")
        if check(rs is not None, f"{P} Service adapterd-router"):
            check(rs["spec"].get("type", "ClusterIP") == "ClusterIP" and rs["spec"].get("clusterIP") != "None",
                  f"{P} Service adapterd-router is a ClusterIP Service")
            check([p.get("port") for p in rs["spec"].get("ports", [])] == [8500], f"{P} adapterd-router port 8500")

    # Probes: Kubernetes' gRPC probe on 8500, overall health (service "").
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        g = (c.get(probe) or {}).get("grpc")
        check(g is not None and g.get("port") == 8500 and g.get("service", "") == "",
              f"{P} {probe} is a grpc probe on port 8500, service \"\"")

    # Shutdown: the kubelet's SIGKILL only after adapterd's own bound.
    drain = int(env.get("ADAPTERD_DRAIN_SECONDS", "10"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(grace >= drain + 5,
          f"{P} terminationGracePeriodSeconds ({grace}) exceeds ADAPTERD_DRAIN_SECONDS ({drain}) by 5 s or more")

    # Resources, security, metrics.
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            check(r in c.get("resources", {}).get(kind, {}), f"{P} adapterd has resources.{kind}.{r}")
    check_security(ss, c, P + " adapterd", uid=10001)
    check(pod.get("securityContext", {}).get("fsGroup") == 10001, f"{P} adapterd pod fsGroup 10001")
    ann = spec["template"]["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "9500"
          and ann.get("prometheus.io/path") == "/metrics", f"{P} Prometheus scrape annotations (9500, /metrics)")
    check(env.get("ADAPTERD_LISTEN") == "0.0.0.0:8500", f"{P} adapterd listens on 0.0.0.0:8500")
    check(env.get("ADAPTERD_METRICS_LISTEN") == "0.0.0.0:9500", f"{P} adapterd serves /metrics on 0.0.0.0:9500")
    check(pod.get("enableServiceLinks") is False,
          f"{P} enableServiceLinks: false (no ADAPTERD_*_SERVICE_* variables from Services)")

    # Volumes: RocksDB per replica at /data, the tenants Secret read-only.
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    claims = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    check(mounts.get("/data", {}).get("name") in claims, f"{P} /data is a volumeClaimTemplate (one volume per replica)")
    check(env.get("ADAPTERD_DATA_DIR") == "/data", f"{P} ADAPTERD_DATA_DIR=/data")
    for m in c.get("volumeMounts", []):
        check(m["name"] in vols or m["name"] in claims, f"{P} volumeMount {m['name']} has a volume")
    tf = env.get("ADAPTERD_TENANTS_FILE", "")
    tmount = mounts.get(os.path.dirname(tf))
    if check(tmount is not None and tmount.get("readOnly") is True,
             f"{P} ADAPTERD_TENANTS_FILE ({tf}) lies in a read-only mount"):
        secret_name = vols.get(tmount["name"], {}).get("secret", {}).get("secretName")
        secret = find(objects, "Secret", secret_name)
        if check(secret is not None, f"{P} the tenants volume's Secret '{secret_name}' exists"):
            key = os.path.basename(tf)
            if check(key in secret.get("data", {}), f"{P} Secret {secret_name} has key {key}"):
                check_tenants(base64.b64decode(secret["data"][key]), P)

    # With --peers, the replicas' shared secret (server_options.cc requires
    # it): a file in a read-only Secret mount, at least 16 bytes.
    pf = env.get("ADAPTERD_PEER_SECRET_FILE", "")
    pmount = mounts.get(os.path.dirname(pf))
    if check(bool(pf) and pmount is not None and pmount.get("readOnly") is True,
             f"{P} ADAPTERD_PEER_SECRET_FILE ({pf}) lies in a read-only mount"):
        secret_name = vols.get(pmount["name"], {}).get("secret", {}).get("secretName")
        secret = find(objects, "Secret", secret_name)
        key = os.path.basename(pf)
        if check(secret is not None and key in secret.get("data", {}),
                 f"{P} the peer secret volume's Secret '{secret_name}' has key {key}"):
            check(len(base64.b64decode(secret["data"][key]).strip()) >= 16,
                  f"{P} the peer secret holds at least 16 bytes")

    # The settings: a ConfigMap through envFrom, every ADAPTERD_* a real flag.
    config = None
    for ef in c.get("envFrom", []):
        name = ef.get("configMapRef", {}).get("name")
        config = find(objects, "ConfigMap", name)
        check(config is not None, f"{P} envFrom ConfigMap '{name}' exists")
    if check(config is not None, f"{P} adapterd takes a ConfigMap through envFrom"):
        for k in ("ADAPTERD_MAX_TASKS", "ADAPTERD_MAX_QUEUED_JOBS", "ADAPTERD_MAX_TEXTS_PER_PREDICT",
                  "ADAPTERD_MAX_BATCH_SIZE", "ADAPTERD_DEVICE_CACHE_BYTES"):
            check(k in config["data"], f"{P} the ConfigMap sets {k}")
        bdir = config["data"].get("ADAPTERD_BACKUP_DIR", "")
        bmount = mounts.get(bdir)
        check(bmount is not None and bmount.get("name") in claims and bmount.get("name") != mounts.get("/data", {}).get("name"),
              f"{P} backups go to a volume of the replica's own, apart from /data (ADAPTERD_BACKUP_DIR={bdir})")
        check(not (bdir + "/").startswith("/data/"),
              f"{P} ADAPTERD_BACKUP_DIR lies outside ADAPTERD_DATA_DIR (adapterd refuses it inside)")
        flags = adapterd_flags(repo)
        names = [k for k in list(config["data"]) + list(env) if k.startswith("ADAPTERD_")]
        for k in names:
            check(k[len("ADAPTERD_"):].lower() in flags,
                  f"{P} {k} names an adapterd flag (--{k[len('ADAPTERD_'):].lower()}, server/server_options.cc)")
        for k, v in config["data"].items():
            check(isinstance(v, str), f"{P} ConfigMap value {k} is a string")

    # PodDisruptionBudgets select their workloads.
    pdb = find(objects, "PodDisruptionBudget", "adapterd")
    if check(pdb is not None, f"{P} PodDisruptionBudget adapterd"):
        check(pdb["spec"].get("maxUnavailable") == 1, f"{P} PDB adapterd: maxUnavailable 1")
        check(selects(pdb["spec"]["selector"]["matchLabels"], ss), f"{P} PDB adapterd selects the StatefulSet's pods")

    # Every workload's selector matches its pod template; every Service selects a pod template.
    workloads = [o for o in objects if o.get("kind") in ("StatefulSet", "Deployment")]
    for w in workloads:
        check(selects(w["spec"]["selector"]["matchLabels"], w),
              f"{P} {w['kind']} {w['metadata']['name']}: selector matches the pod template")
    for s in (o for o in objects if o.get("kind") == "Service"):
        sel = dict(s["spec"].get("selector", {}))
        sel.pop("statefulset.kubernetes.io/pod-name", None)  # set by the StatefulSet controller
        check(any(selects(sel, w) for w in workloads), f"{P} Service {s['metadata']['name']} selects a pod template")
        for p in s["spec"].get("ports", []):
            tp = p.get("targetPort", p.get("port"))
            if isinstance(tp, str):
                check(any(tp in [cp.get("name") for cc in w["spec"]["template"]["spec"]["containers"]
                                 for cp in cc.get("ports", [])] for w in workloads if selects(sel, w)),
                      f"{P} Service {s['metadata']['name']}: targetPort '{tp}' is a named container port")
    return ss


def selects(match_labels, workload):
    labels = workload["spec"]["template"]["metadata"].get("labels", {})
    return bool(match_labels) and all(labels.get(k) == v for k, v in match_labels.items())


def check_security(workload, c, P, uid):
    psc = workload["spec"]["template"]["spec"].get("securityContext", {})
    csc = c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, f"{P}: runAsNonRoot")
    if uid is not None:
        check(psc.get("runAsUser") == uid, f"{P}: runAsUser {uid}")
    check(csc.get("readOnlyRootFilesystem") is True, f"{P}: readOnlyRootFilesystem")
    check(csc.get("allowPrivilegeEscalation") is False, f"{P}: allowPrivilegeEscalation false")
    check(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{P}: drops ALL capabilities")
    check(workload["spec"]["template"]["spec"].get("automountServiceAccountToken") is False,
          f"{P}: no service account token")


def check_tenants(raw, P):
    """The tenants file format adapterd reads (server/api/tenants.cc)."""
    try:
        doc = json.loads(raw)
    except ValueError as e:
        check(False, f"{P} tenants.json is JSON: {e}")
        return
    tenants = doc.get("tenants") if isinstance(doc, dict) else None
    if not check(isinstance(tenants, list) and tenants, f"{P} tenants.json has a non-empty 'tenants' list"):
        return
    hashes = []
    for i, t in enumerate(tenants):
        check(isinstance(t.get("id"), str) and re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", t["id"]) is not None,
              f"{P} tenants[{i}].id is a valid id")
        h = t.get("api_key_sha256")
        h = [h] if isinstance(h, str) else h
        check(isinstance(h, list) and h and all(isinstance(x, str) and re.fullmatch(r"[0-9a-fA-F]{64}", x)
                                                for x in h), f"{P} tenants[{i}].api_key_sha256: 64 hex digits each")
        hashes += [x.lower() for x in h or [] if isinstance(x, str)]
        for q in ("max_tasks", "max_queued_jobs", "max_texts_per_predict", "max_dataset_bytes",
                  "predict_rate_per_second", "predict_burst"):
            if q in t:
                check(isinstance(t[q], (int, float)) and t[q] >= 0, f"{P} tenants[{i}].{q} is a number >= 0")
    check(len(hashes) == len(set(hashes)), f"{P} no key hash used twice")


def main(argv):
    if len(argv) != 4:
        print(f"usage: {argv[0]} REPO_ROOT BASE.json GPU.json", file=sys.stderr)
        return 2
    repo = argv[1]
    with open(argv[2], encoding="utf-8") as f:
        base = json.load(f)
    with open(argv[3], encoding="utf-8") as f:
        gpu = json.load(f)

    base_ss = check_common(base, "base", repo)
    gpu_ss = check_common(gpu, "gpu", repo)

    if base_ss:
        c = container(base_ss, "adapterd")
        check(c["image"] == "adapterd:latest", "[base] image adapterd:latest")
        check(not any(k.startswith("nvidia.com/") for kind in ("requests", "limits")
                      for k in c["resources"].get(kind, {})), "[base] requests no GPU")
        check(base_ss["spec"]["replicas"] == 3, "[base] 3 replicas")

    if gpu_ss:
        c = container(gpu_ss, "adapterd")
        env = env_of(c)
        pod = gpu_ss["spec"]["template"]["spec"]
        check(c["image"] == "adapterd:cuda", "[gpu] image adapterd:cuda")
        check(c["resources"].get("limits", {}).get("nvidia.com/gpu") in ("1", 1), "[gpu] limits nvidia.com/gpu: 1")
        check(env.get("ADAPTERD_DEVICE") == "cuda", "[gpu] ADAPTERD_DEVICE=cuda")
        check(env.get("ADAPTERD_DTYPE") == "bf16", "[gpu] ADAPTERD_DTYPE=bf16")
        check(pod.get("nodeSelector"), "[gpu] a nodeSelector for GPU nodes")
        check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])),
              "[gpu] tolerates the nvidia.com/gpu taint")
        # The patch merged rather than replaced: the base's settings survive.
        if base_ss:
            benv = env_of(container(base_ss, "adapterd"))
            check(all(env.get(k) == v for k, v in benv.items()), "[gpu] keeps every env entry of the base")
            check(container(gpu_ss, "adapterd")["volumeMounts"] == container(base_ss, "adapterd")["volumeMounts"],
                  "[gpu] keeps the base's volume mounts")
        # Everything but the StatefulSet and adapterd-config is the base's, unchanged.
        same = [o for o in gpu if o["kind"] not in ("StatefulSet",) and o["metadata"]["name"] != "adapterd-config"]
        check(all(o in base for o in same), "[gpu] other objects are the base's, unchanged")

    for f in FAILURES:
        print(f"FAILED: {f}")
    print(f"check_manifests: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

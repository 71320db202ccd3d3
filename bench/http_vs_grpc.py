#!/usr/bin/python3
"""Predict latency over the REST gateway against gRPC, in one run.

Starts the real adapterd (gRPC and --http_listen on free loopback ports),
trains one task over gRPC (or uses --task on a running server), then sends
the same Predict (the same texts, so the same batch) alternately over both
protocols, one call at a time: gRPC through Python's grpcio (gRPC's C core),
HTTP through http.client on one keep-alive connection with the JSON body.
Alternating cancels the shared, noisy machine's drift out of the ratio.
Prints p50 / p90 / p99 per protocol and the ratios (HTTP / gRPC), and the
JSON line of the results with --json.

    bench/http_vs_grpc.py --adapterd build/server/adapterd --model_dir models/adapterd-mini-en \
        --data examples/sentiment_train.csv [--calls 400] [--texts 8]

Needs Debian's python3-grpcio and the Python stubs generated from proto/
(PYTHONPATH=<build>/tests/python_client/stubs, which the build makes).
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

from adapterd.v1 import adapterd_service_pb2 as pb
from adapterd.v1 import adapterd_service_pb2_grpc as pb_grpc


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def start_server(args, workdir):
    log_path = os.path.join(workdir, "adapterd.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [args.adapterd, "--listen", "127.0.0.1:0", "--metrics_listen", "", "--http_listen", "127.0.0.1:0",
         "--data_dir", os.path.join(workdir, "data"), "--model_dir", args.model_dir] + args.server_flags,
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = open(log_path, encoding="utf-8", errors="replace").read()
        if "SERVING on port" in text:
            return proc, int(re.search(r"SERVING on port (\d+)", text).group(1)), \
                int(re.search(r"HTTP on port (\d+)", text).group(1))
        if proc.poll() is not None:
            sys.exit(f"adapterd exited {proc.returncode}:\n{text}")
        time.sleep(0.1)
    proc.kill()
    sys.exit("adapterd did not start in 300 s")


def train(stub, task, data_path, epochs):
    lines = open(data_path, encoding="utf-8").read().splitlines()
    header, rows = lines[0].split(","), lines[1:]
    assert header[:2] == ["text", "label"], header

    def requests():
        yield pb.UploadDatasetRequest(metadata=pb.UploadDatasetRequest.Metadata(dataset_id=task + "-data"))
        chunk = pb.DatasetChunk()
        for row in rows:
            text, label = row.rsplit(",", 1)
            chunk.examples.add(text=text.strip('"'), label=label)
        yield pb.UploadDatasetRequest(chunk=chunk)

    md = [("x-task-id", task)]
    stub.UploadDataset(requests(), metadata=md)
    job = stub.CreateTrainingJob(pb.CreateTrainingJobRequest(
        task_id=task, dataset_ids=[task + "-data"], hyperparameters=pb.Hyperparameters(epochs=epochs)), metadata=md)
    for _ in stub.WatchTrainingJob(pb.WatchTrainingJobRequest(job_id=job.job_id), metadata=md):
        pass
    state = stub.GetTrainingJob(pb.GetTrainingJobRequest(job_id=job.job_id), metadata=md).state
    assert state == pb.JOB_STATE_SUCCEEDED, pb.JobState.Name(state)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapterd", help="the adapterd binary (omit with --grpc_port/--http_port)")
    p.add_argument("--model_dir", default="models/adapterd-mini-en")
    p.add_argument("--data", default="examples/sentiment_train.csv", help="CSV (text,label) to train the task on")
    p.add_argument("--grpc_port", type=int, help="a running server's gRPC port")
    p.add_argument("--http_port", type=int, help="a running server's HTTP port")
    p.add_argument("--task", default="bench-http", help="the task (trained here unless it exists)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--calls", type=int, default=400, help="calls per protocol (after 20 of warm-up)")
    p.add_argument("--texts", type=int, default=8, help="texts per Predict (the batch)")
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    p.add_argument("server_flags", nargs="*", help="extra adapterd flags, after --")
    args = p.parse_args()

    proc = None
    workdir = tempfile.mkdtemp(prefix="http-vs-grpc-")
    if args.adapterd:
        proc, grpc_port, http_port = start_server(args, workdir)
    else:
        grpc_port, http_port = args.grpc_port, args.http_port
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = pb_grpc.AdapterdStub(channel)
        md = [("x-task-id", args.task)]
        try:
            stub.GetTask(pb.GetTaskRequest(task_id=args.task), metadata=md)
        except grpc.RpcError:
            train(stub, args.task, args.data, args.epochs)

        texts = [f"a review of the film, number {i}, that was rather good" for i in range(args.texts)]
        request = pb.PredictRequest(task_id=args.task, texts=texts)
        body = json.dumps({"texts": texts}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)

        def over_grpc():
            return stub.Predict(request, metadata=md, timeout=60)

        def over_http():
            conn.request("POST", f"/v1/tasks/{args.task}:predict", body=body,
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200, data[:300]
            return data

        times = {"grpc": [], "http": []}
        for i in range(20 + args.calls):
            for name, call in (("grpc", over_grpc), ("http", over_http)) if i % 2 == 0 else \
                    (("http", over_http), ("grpc", over_grpc)):
                start = time.perf_counter()
                call()
                if i >= 20:
                    times[name].append((time.perf_counter() - start) * 1e3)
        conn.close()
        channel.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)

    result = {"calls": args.calls, "texts": args.texts, "model_dir": args.model_dir}
    print(f"Predict of {args.texts} texts, {args.calls} calls per protocol, alternating, one at a time")
    print(f"{'':6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name in ("grpc", "http"):
        t = times[name]
        row = {"p50": percentile(t, 0.5), "p90": percentile(t, 0.9), "p99": percentile(t, 0.99),
               "mean": statistics.fmean(t)}
        result[name] = row
        print(f"{name:6} {row['p50']:8.2f} {row['p90']:8.2f} {row['p99']:8.2f} {row['mean']:8.2f}")
    ratio = {k: result["http"][k] / result["grpc"][k] for k in ("p50", "p90", "p99", "mean")}
    result["http_over_grpc"] = ratio
    print("HTTP / gRPC: " + ", ".join(f"{k} {v:.3f}" for k, v in ratio.items()))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()

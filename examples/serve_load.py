"""Load `hf-longdoc serve` with concurrent clients sending real long documents, and compare its throughput with
offline `hf-longdoc predict` on the same model and documents.

    python examples/serve_load.py MODEL_DIR --dataset docs.jsonl --clients 16 --seconds 60

Starts the server in a process of its own (as a user does), waits for /health, then runs `--clients` httpx async
clients for `--seconds`, each posting one document at a time to `/predict` (TEI's request). Prints the requests, the
errors, the documents a second, the latency p50/p99 and the server's peak memory (VmHWM), beside offline `predict`'s
documents a second on the same documents (run first, in this process). `--endpoint classify` posts to /classify.
"""

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_texts(path, limit):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(limit), f)]


def offline_rate(model_dir, texts, flags):
    """Documents a second of `predict` on `texts`, in this process, after an untimed warm-up on 16 of them (as
    `examples/predict_speed.py` measures it); `flags`: the server's `--long` and `--stride`, read the same way."""
    import datasets

    from hf_longdoc.predicting import predict

    settings = {}
    for flag, value in zip(flags[::2], flags[1::2]):
        if flag in ("--long", "--stride", "--aggregation", "--batch-size"):
            settings[flag[2:].replace("-", "_")] = int(value) if value.isdigit() else value
    data = datasets.Dataset.from_dict({"text": texts})
    predict(model_dir, data.select(range(min(16, len(data)))), **settings)
    started = time.perf_counter()
    predict(model_dir, data, **settings)
    return len(data) / (time.perf_counter() - started)


def start_server(model_dir, port, flags):
    """`hf-longdoc serve` in a process of its own, once /health answers: (process, url). Its log goes to a temporary
    file (a pipe nobody reads would fill and stop the server), shown if it fails to start."""
    log = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen([sys.executable, "-m", "hf_longdoc", "serve", model_dir, "--port", str(port), *flags],
                               stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
        if process.poll() is not None:
            log.seek(0)
            raise SystemExit(log.read())
    process.kill()
    raise SystemExit("the server did not start")


def peak_memory_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def load(url, texts, clients, seconds, endpoint):
    """(latencies of the answered requests, errors, documents answered, wall seconds)."""
    latencies, errors, done = [], [], [0]
    deadline = time.monotonic() + seconds

    async def client(number):
        async with httpx.AsyncClient(base_url=url, timeout=600) as http:
            position = number
            while time.monotonic() < deadline:
                text = texts[position % len(texts)]
                position += clients
                started = time.perf_counter()
                response = await http.post(f"/{endpoint}", json={"inputs": text})
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - started)
                    done[0] += 1
                else:
                    errors.append(f"{response.status_code}: {response.text[:200]}")

    started = time.perf_counter()
    await asyncio.gather(*[client(number) for number in range(clients)])
    return latencies, errors, done[0], time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--dataset", required=True, help="a JSONL file with a `text` column")
    parser.add_argument("--documents", type=int, default=200, help="documents cycled through (and read offline)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--endpoint", default="predict", choices=["predict", "classify"])
    parser.add_argument("--server-flags", default="", help="extra `serve` flags, e.g. '--long chunks'")
    parser.add_argument("--skip-offline", action="store_true")
    args = parser.parse_args(argv)
    flags = args.server_flags.split()
    texts = read_texts(args.dataset, args.documents)
    offline = None if args.skip_offline else offline_rate(args.model_dir, texts, flags)
    process, url = start_server(args.model_dir, free_port(), flags)
    try:
        latencies, errors, done, wall = asyncio.run(load(url, texts, args.clients, args.seconds, args.endpoint))
        memory = peak_memory_mib(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=120)
    rate = done / wall
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    result = {"requests": done + len(errors), "errors": len(errors), "documents_per_second": round(rate, 2),
              "offline_documents_per_second": None if offline is None else round(offline, 2),
              "served_over_offline": None if offline is None else round(rate / offline, 3),
              "latency_p50_s": round(quantiles[49], 3), "latency_p99_s": round(quantiles[98], 3),
              "server_peak_memory_mib": round(memory), "clients": args.clients, "seconds": round(wall, 1)}
    print(json.dumps(result, indent=2))
    if errors:
        print("first errors:", *errors[:5], sep="\n  ")
    return result


if __name__ == "__main__":
    main()

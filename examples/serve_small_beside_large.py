"""How long a small request waits beside a large one on `hf-longdoc serve`: the latency of a one-word `/predict`
alone, and sent while another client's request of long documents is being tokenized and read.

    python examples/serve_small_beside_large.py MODEL_DIR --documents 4 --characters 1999000 --repeats 5

Starts the server in a process of its own (as a user does), then for each repeat: a small request alone, then the
large request (`--documents` documents of `--characters` characters, real text cycled from `--dataset` or a built-in
paragraph) and, `--delay` seconds after it, the small request again. Prints the medians of each latency.
"""

import argparse
import asyncio
import json
import statistics
import time

import httpx
from serve_load import free_port, read_texts, start_server

PARAGRAPH = ("The club won the cup final on Saturday, and the minister spoke about the economy on Monday, when shares "
             "fell and the central bank kept its rate. ")


async def timed(client, url, inputs):
    started = time.perf_counter()
    response = await client.post(f"{url}/predict", json={"inputs": inputs})
    response.raise_for_status()
    return time.perf_counter() - started


async def measure(url, large, delay, repeats):
    alone, beside, large_times = [], [], []
    async with httpx.AsyncClient(timeout=600) as client:
        await timed(client, url, "warm up")
        for _ in range(repeats):
            alone.append(await timed(client, url, "football"))

            async def small_later():
                await asyncio.sleep(delay)
                return await timed(client, url, "football")

            large_time, small_time = await asyncio.gather(timed(client, url, large), small_later())
            beside.append(small_time)
            large_times.append(large_time)
    return alone, beside, large_times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--dataset", help="a JSONL file with a `text` column whose texts fill the large documents")
    parser.add_argument("--documents", type=int, default=4, help="documents in the large request")
    parser.add_argument("--characters", type=int, default=1_999_000, help="characters of each large document")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds between the large and the small request")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--server-flags", default="", help="extra `serve` flags")
    args = parser.parse_args(argv)
    source = " ".join(read_texts(args.dataset, 200)) if args.dataset else PARAGRAPH
    text = (source * (args.characters // len(source) + 1))[: args.characters]
    process, url = start_server(args.model_dir, free_port(), args.server_flags.split())
    try:
        alone, beside, large = asyncio.run(measure(url, [text] * args.documents, args.delay, args.repeats))
    finally:
        process.terminate()
        process.wait(timeout=120)
    result = {"small_alone_s": round(statistics.median(alone), 4),
              "small_beside_large_s": round(statistics.median(beside), 4),
              "large_s": round(statistics.median(large), 3), "documents": args.documents,
              "characters": args.characters, "repeats": args.repeats}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

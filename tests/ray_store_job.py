"""A Ray driver in its own process, for the kill -9 test of tests/test_ray_store.py.

python tests/ray_store_job.py RAY_ADDRESS BASE_URL CACHE_URL OUTPUT_URL ROWS BATCH

Scores ROWS rows on the cluster at RAY_ADDRESS with the reply store at CACHE_URL (object storage) and writes
the scored rows with Ray Data's own Parquet writer to OUTPUT_URL, shard by shard as they finish.
"""

import sys


def rows(n: int) -> list[dict]:
    """The rows: ids, so that the output's shards can be put back in order."""
    return [{"id": i, "question": f"q{i}?", "answer": f"a{i}"} for i in range(n)]


def main() -> None:
    import ray

    address, base_url, cache_url, output_url, n, batch = sys.argv[1:5] + [int(x) for x in sys.argv[5:7]]
    ray.init(address=address, log_to_driver=False)
    from hf_judge.ray import score_ray_dataset

    scored = score_ray_dataset(
        ray.data.from_items(rows(n), override_num_blocks=n // batch),
        ["QA_Clarity"],
        columns={"instruction": "question", "output": "answer"},
        model="judge",
        api_key="sk-test",
        base_url=base_url,
        cache_dir=cache_url,
        concurrency=2,
        in_flight=8,
        batch_size=batch,
    )
    print("started", flush=True)
    # overwrite: a rerun after a kill writes every shard again (its replies come from the store, unpaid)
    scored.write_parquet(output_url, mode="overwrite")
    print("done", flush=True)


if __name__ == "__main__":
    main()

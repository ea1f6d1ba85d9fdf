#!/usr/bin/env python3
"""boto3 side of the remote benchmark (scripts/bench/remote.py); runs with the
servers venv (.venv-servers), which has boto3.

    s3client.py ENDPOINT fill BUCKET DIR         a bucket holding every file under DIR (key = relpath)
    s3client.py ENDPOINT list BUCKET PREFIX      ListObjectsV2 of PREFIX/, paginated, delimiter "/":
                                                 prints `SECONDS KEYS TOTAL_SIZE REQUESTS` (the
                                                 client is made before the clock starts)

Credentials and region from the usual AWS environment variables (moto takes any).
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
                        config=Config(max_pool_connections=16))


def fill(s3, bucket, top):
    s3.create_bucket(Bucket=bucket)
    files = []
    for d, _, names in os.walk(top):
        for n in names:
            path = os.path.join(d, n)
            files.append((path, os.path.relpath(path, top).replace(os.sep, "/")))
    # One PUT per object (no multipart upload): moto serves a multipart object slower.
    one = TransferConfig(multipart_threshold=4 << 30)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda f: s3.upload_file(f[0], bucket, f[1], Config=one), files))
    print(f"uploaded {len(files)} objects to s3://{bucket}/")


def list_prefix(s3, bucket, prefix):
    s3.list_buckets()  # the connection made before the clock starts
    t0 = time.perf_counter()
    keys = size = requests = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/",
                                                              Delimiter="/"):
        requests += 1
        for o in page.get("Contents", []):
            keys += 1
            size += o["Size"]
    print(f"{time.perf_counter() - t0} {keys} {size} {requests}")


def main(argv):
    if len(argv) != 5 or argv[2] not in ("fill", "list"):
        sys.exit(__doc__)
    s3 = client(argv[1])
    if argv[2] == "fill":
        fill(s3, argv[3], argv[4])
    else:
        list_prefix(s3, argv[3], argv[4])


if __name__ == "__main__":
    main(sys.argv)
